import { defineOperation } from '../core/operations.ts';
import { storeInput } from '../stores/schemas.ts';
import { reportInventoryBody, reportInventoryResponse, stockQuery, stockResponse } from './schemas.ts';
import type { InventoryService } from './service.ts';

const EXAMPLE_SHOP = 'my-store.myshopify.com';

/** The inventory API: any platform (or an agent bound to the store) reports stock; restocks follow. */
export const inventoryOperations = [
  defineOperation({
    id: 'reportInventory',
    method: 'POST',
    path: '/api/v1/stores/:shop/inventory',
    summary: "Report stock; a variant that becomes sellable again dispatches its waiting subscribers' alerts",
    tag: 'inventory',
    scope: 'inventory:alerts',
    idempotent: true,
    input: storeInput.extend(reportInventoryBody.shape).strict(),
    output: reportInventoryResponse,
    errors: [400, 404, 413, 415, 503],
    tenancy: { refusal: 404 },
    example: { shop: EXAMPLE_SHOP, items: [{ productId: 'gid://shopify/Product/123', variantId: 'gid://shopify/ProductVariant/456', available: 0 }] },
    tool: { title: "Report a store's stock", description: 'Up to 100 variants; one that becomes sellable again alerts its waiting subscribers. For agents bound to the store.' },
    run: async (inventory: InventoryService, { shop, items }, { caller }) => ({ items: await inventory.reportInventory(caller, shop, items) }),
  }),
  defineOperation({
    id: 'getStockStatus',
    method: 'GET',
    path: '/api/v1/stores/:shop/stock',
    summary: "Read the store's known stock, per variant",
    tag: 'inventory',
    scope: 'api:read',
    input: storeInput.extend(stockQuery.shape).strict(),
    output: stockResponse,
    errors: [400, 404, 503],
    tenancy: { refusal: 404 },
    example: { shop: EXAMPLE_SHOP, productId: 'gid://shopify/Product/123' },
    tool: { title: "Read a store's known stock", description: 'Stock per variant, as the store last reported it.' },
    skill: true,
    run: async (inventory: InventoryService, { shop, productId }, { caller }) => ({ items: await inventory.stockStatus(caller, shop, productId) }),
  }),
];
