import { defineOperation } from '../core/operations.ts';
import { storeInput, storeSchema, storeSettingsPatch, type StorePlanUsage } from './schemas.ts';
import type { StoreService } from './service.ts';

/** What the store operations run on: the stores, and the plan in force that billing reports. */
export interface StoreOperationsPort {
  stores: StoreService;
  /** The plan and its usage, for a store the service has already shown. */
  planOf(shop: string): Promise<StorePlanUsage>;
}

const withPlan = async <T extends { domain: string }>(port: StoreOperationsPort, store: T) => ({ ...store, plan: await port.planOf(store.domain) });

/** A store's configuration, for the agents its owner bound to it. */
export const storeOperations = [
  defineOperation({
    id: 'getStore',
    method: 'GET',
    path: '/api/v1/stores/:shop',
    summary: "Read a store's configuration (agents bound to the store only)",
    tag: 'stores',
    scope: 'api:read',
    input: storeInput,
    output: storeSchema,
    errors: [400, 404],
    tenancy: { refusal: 404 },
    example: { shop: 'my-store.myshopify.com' },
    run: async (port: StoreOperationsPort, { shop }, { caller }) => withPlan(port, await port.stores.storeFor(caller, shop)),
  }),
  defineOperation({
    id: 'updateStoreSettings',
    method: 'PATCH',
    path: '/api/v1/stores/:shop',
    summary: "Change a store's batch policy, language, template or sender (agents bound to the store only)",
    tag: 'stores',
    scope: 'inventory:alerts',
    idempotent: true,
    input: storeInput.extend(storeSettingsPatch.shape).strict(),
    output: storeSchema,
    errors: [400, 404, 413, 415, 501, 502, 503],
    tenancy: { refusal: 404 },
    // The patch's fields are made from the settings' own, so its type names none of them.
    example: { shop: 'my-store.myshopify.com', senderName: 'My Store' } as { shop: string },
    run: async (port: StoreOperationsPort, { shop, ...patch }, { caller }) => withPlan(port, await port.stores.updateStoreSettings(caller, shop, patch)),
  }),
];
