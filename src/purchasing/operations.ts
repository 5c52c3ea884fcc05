import { defineOperation } from '../core/operations.ts';
import { storeInput } from '../stores/schemas.ts';
import { purchasingQuery, purchasingResponse } from './schemas.ts';
import type { PurchasingService } from './service.ts';

const EXAMPLE_SHOP = 'my-store.myshopify.com';

/** The purchasing view: what to reorder first, and what it would bring. */
export const purchasingOperations = [
  defineOperation({
    id: 'getPurchasingView',
    method: 'GET',
    path: '/api/v1/stores/:shop/purchasing',
    summary: 'Rank the waitlists for purchasing: most shoppers waiting, then longest waited, with the revenue at the current price',
    description: 'Keyset pages: pass `next` as `cursor` for the following page. The same rows as CSV: `GET /api/v1/stores/{shop}/purchasing.csv`.',
    tag: 'purchasing',
    scope: 'api:read',
    input: storeInput.extend(purchasingQuery.shape).strict(),
    output: purchasingResponse,
    errors: [400, 404, 503],
    tenancy: { refusal: 404 },
    example: { shop: EXAMPLE_SHOP, limit: 50 },
    tool: { title: "Rank a store's waitlists for purchasing", description: 'Variants by shoppers waiting and time waited, with the revenue they would bring at the current price. For agents bound to the store.' },
    run: async (purchasing: PurchasingService, { shop, limit, cursor }, { caller }) => purchasing.page(caller, shop, { limit, cursor }),
  }),
];
