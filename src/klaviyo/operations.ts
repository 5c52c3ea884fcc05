import { defineOperation } from '../core/operations.ts';
import { storeInput } from '../stores/schemas.ts';
import { klaviyoConnection, klaviyoConnectionInput } from './schemas.ts';
import type { KlaviyoService } from './service.ts';

const EXAMPLE_SHOP = 'shop.example.com';

/** A store's Klaviyo connection, for the agents bound to it (docs/klaviyo.md). */
export const klaviyoOperations = [
  defineOperation({
    id: 'connectKlaviyo',
    method: 'PUT',
    path: '/api/v1/stores/:shop/klaviyo',
    summary: "Connect the store's Klaviyo account with a private API key, checked with Klaviyo and kept sealed: sign-ups, alerts sent, clicks and attributed orders become Klaviyo events (agents bound to the store only)",
    tag: 'stores',
    scope: 'inventory:alerts',
    input: storeInput.extend(klaviyoConnectionInput.shape).strict(),
    output: klaviyoConnection,
    errors: [400, 404, 413, 415, 501, 502, 503],
    tenancy: { refusal: 404 },
    example: { shop: EXAMPLE_SHOP, privateApiKey: 'pk_example0000000000000000000000000' },
    run: (klaviyo: KlaviyoService, { shop, ...input }, { caller }) => klaviyo.connect(caller, shop, input),
  }),
  defineOperation({
    id: 'getKlaviyoConnection',
    method: 'GET',
    path: '/api/v1/stores/:shop/klaviyo',
    summary: "The store's Klaviyo connection and its queued events (agents bound to the store only)",
    tag: 'stores',
    scope: 'api:read',
    input: storeInput,
    output: klaviyoConnection,
    errors: [400, 404],
    tenancy: { refusal: 404 },
    example: { shop: EXAMPLE_SHOP },
    run: (klaviyo: KlaviyoService, { shop }, { caller }) => klaviyo.connectionFor(caller, shop),
  }),
  defineOperation({
    id: 'disconnectKlaviyo',
    method: 'DELETE',
    path: '/api/v1/stores/:shop/klaviyo',
    summary: 'Disconnect Klaviyo: the key is forgotten and events not yet sent are cancelled (agents bound to the store only)',
    tag: 'stores',
    scope: 'inventory:alerts',
    input: storeInput,
    output: klaviyoConnection,
    errors: [400, 404, 503],
    tenancy: { refusal: 404 },
    example: { shop: EXAMPLE_SHOP },
    run: (klaviyo: KlaviyoService, { shop }, { caller }) => klaviyo.disconnect(caller, shop),
  }),
];
