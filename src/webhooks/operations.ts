import { z } from 'zod';
import { defineOperation } from '../core/operations.ts';
import { storeInput } from '../stores/schemas.ts';
import {
  createdEndpointSchema,
  createEndpointBody,
  deliveriesQuery,
  deliveryListSchema,
  endpointIdSchema,
  endpointListSchema,
  endpointSchema,
  updateEndpointBody,
} from './schemas.ts';
import type { WebhookService } from './service.ts';

const EXAMPLE_SHOP = 'my-store.myshopify.com';
const EXAMPLE_ENDPOINT = 'whe_0123456789';
const endpointInput = storeInput.extend({ endpointId: endpointIdSchema });

/** A store's webhook endpoints and their deliveries, for the agents bound to it. Changes take the scope of the store's settings: only agents bound to the store hold it. */
export const webhookOperations = [
  defineOperation({
    id: 'listWebhookEndpoints',
    method: 'GET',
    path: '/api/v1/stores/:shop/webhooks',
    summary: "List the store's webhook endpoints",
    tag: 'stores',
    scope: 'api:read',
    input: storeInput,
    output: endpointListSchema,
    errors: [400, 404, 503],
    tenancy: { refusal: 404 },
    example: { shop: EXAMPLE_SHOP },
    run: async (webhooks: WebhookService, { shop }, { caller }) => ({ items: await webhooks.listEndpoints(caller, shop) }),
  }),
  defineOperation({
    id: 'createWebhookEndpoint',
    method: 'POST',
    path: '/api/v1/stores/:shop/webhooks',
    summary: "Register an endpoint for the store's events; the answer holds its signing secret, shown once",
    tag: 'stores',
    // Not idempotent: the answer holds the signing secret, which must not be kept in clear.
    scope: 'inventory:alerts',
    input: storeInput.extend(createEndpointBody.shape).strict(),
    output: createdEndpointSchema,
    status: 201,
    errors: [400, 404, 409, 413, 415, 501, 503],
    tenancy: { refusal: 404 },
    example: { shop: EXAMPLE_SHOP, url: 'https://hooks.example.com/restock' },
    run: (webhooks: WebhookService, { shop, ...endpoint }, { caller }) => webhooks.createEndpoint(caller, shop, endpoint),
  }),
  defineOperation({
    id: 'getWebhookEndpoint',
    method: 'GET',
    path: '/api/v1/stores/:shop/webhooks/:endpointId',
    summary: 'Read one webhook endpoint',
    tag: 'stores',
    scope: 'api:read',
    input: endpointInput,
    output: endpointSchema,
    errors: [400, 404, 503],
    tenancy: { refusal: 404 },
    example: { shop: EXAMPLE_SHOP, endpointId: EXAMPLE_ENDPOINT },
    run: (webhooks: WebhookService, { shop, endpointId }, { caller }) => webhooks.getEndpoint(caller, shop, endpointId),
  }),
  defineOperation({
    id: 'updateWebhookEndpoint',
    method: 'PATCH',
    path: '/api/v1/stores/:shop/webhooks/:endpointId',
    summary: 'Change a webhook endpoint: its URL, its event types, or whether it is enabled',
    tag: 'stores',
    scope: 'inventory:alerts',
    input: endpointInput
      .extend(updateEndpointBody.shape)
      .strict()
      .refine(({ url, eventTypes, enabled }) => url !== undefined || eventTypes !== undefined || enabled !== undefined, 'names at least one of url, eventTypes, enabled'),
    output: endpointSchema,
    errors: [400, 404, 413, 415, 503],
    tenancy: { refusal: 404 },
    example: { shop: EXAMPLE_SHOP, endpointId: EXAMPLE_ENDPOINT, enabled: false },
    run: (webhooks: WebhookService, { shop, endpointId, ...patch }, { caller }) => webhooks.updateEndpoint(caller, shop, endpointId, patch),
  }),
  defineOperation({
    id: 'deleteWebhookEndpoint',
    method: 'DELETE',
    path: '/api/v1/stores/:shop/webhooks/:endpointId',
    summary: 'Remove a webhook endpoint, its pending deliveries and its log',
    tag: 'stores',
    scope: 'inventory:alerts',
    idempotent: true,
    input: endpointInput,
    output: z.null().describe('Removed'),
    status: 204,
    errors: [400, 404, 503],
    tenancy: { refusal: 404 },
    example: { shop: EXAMPLE_SHOP, endpointId: EXAMPLE_ENDPOINT },
    run: async (webhooks: WebhookService, { shop, endpointId }, { caller }) => {
      await webhooks.deleteEndpoint(caller, shop, endpointId);
      return null;
    },
  }),
  defineOperation({
    id: 'listWebhookDeliveries',
    method: 'GET',
    path: '/api/v1/stores/:shop/webhooks/:endpointId/deliveries',
    summary: "A webhook endpoint's recent deliveries, newest first, each with its attempts",
    tag: 'stores',
    scope: 'api:read',
    input: endpointInput.extend(deliveriesQuery.shape).strict(),
    output: deliveryListSchema,
    errors: [400, 404, 503],
    tenancy: { refusal: 404 },
    example: { shop: EXAMPLE_SHOP, endpointId: EXAMPLE_ENDPOINT },
    run: async (webhooks: WebhookService, { shop, endpointId, limit }, { caller }) => ({ items: await webhooks.listDeliveries(caller, shop, endpointId, limit) }),
  }),
];
