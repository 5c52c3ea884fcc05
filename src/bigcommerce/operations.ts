import { z } from 'zod';
import { defineOperation } from '../core/operations.ts';
import { storeInput } from '../stores/schemas.ts';
import type { BigCommerceService } from './service.ts';

/** What the operation reads: the store's installation. */
export type BigCommerceConnections = Pick<BigCommerceService, 'connectionFor'>;

const connectionSchema = z
  .object({
    storeDomain: z.string().describe('store-{hash}.mybigcommerce.com'),
    storeHash: z.string(),
    status: z.enum(['connected', 'disconnected']),
    webhookIds: z.array(z.number()).describe("The webhooks the service made on the store (products' changes and stock)"),
    connectedAt: z.string(),
    disconnectedAt: z.string().nullable(),
    disconnectReason: z.string().nullable(),
    reconciledAt: z.string().nullable(),
  })
  .describe("A BigCommerce store's installation of the app; its access token is never shown back");

/** The connection as the store's agents see it. */
export const bigCommerceOperations = [
  defineOperation({
    id: 'getBigCommerceConnection',
    method: 'GET',
    path: '/api/v1/stores/:shop/bigcommerce',
    summary: "A store's installation from BigCommerce (agents bound to the store only)",
    tag: 'stores',
    scope: 'api:read',
    input: storeInput,
    output: connectionSchema,
    errors: [400, 404],
    tenancy: { refusal: 404 },
    example: { shop: 'store-abc123.mybigcommerce.com' },
    run: (bigcommerce: BigCommerceConnections, { shop }, { caller }) => bigcommerce.connectionFor(caller, shop),
  }),
];
