import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { problemResponses } from '../core/http/openapi-responses.ts';
import {
  createdEndpointSchema,
  createEndpointBody,
  deliveriesQuery,
  deliveryListSchema,
  endpointListSchema,
  endpointParams,
  endpointSchema,
  updateEndpointBody,
  webhookParams,
} from './schemas.ts';
import type { WebhookService } from './service.ts';

/** Changes take the scope of the store's settings: only agents bound to the store hold it. */
const WRITE_SCOPE = 'inventory:alerts';

/** A store's webhook endpoints and their deliveries, for the agents bound to it. */
export function webhookRoutes(service: WebhookService) {
  return async function (app: FastifyInstance) {
    const api = app.withTypeProvider<ZodTypeProvider>();
    const base = '/api/v1/stores/:domain/webhooks';

    api.get(base, {
      config: { scope: 'api:read' },
      schema: {
        operationId: 'listWebhookEndpoints',
        summary: "List the store's webhook endpoints",
        tags: ['stores'],
        params: webhookParams,
        response: { 200: endpointListSchema, ...problemResponses(400, 404, 503) },
      },
      handler: async (request) => ({ items: await service.listEndpoints(request.caller!, request.params.domain) }),
    });

    api.post(base, {
      // Not idempotent: the answer holds the signing secret, which must not be kept in clear.
      config: { scope: WRITE_SCOPE },
      schema: {
        operationId: 'createWebhookEndpoint',
        summary: "Register an endpoint for the store's events; the answer holds its signing secret, shown once",
        tags: ['stores'],
        params: webhookParams,
        body: createEndpointBody,
        response: { 201: createdEndpointSchema, ...problemResponses(400, 404, 409, 413, 415, 501, 503) },
      },
      handler: async (request, reply) => reply.code(201).send(await service.createEndpoint(request.caller!, request.params.domain, request.body)),
    });

    api.get(`${base}/:endpointId`, {
      config: { scope: 'api:read' },
      schema: {
        operationId: 'getWebhookEndpoint',
        summary: 'Read one webhook endpoint',
        tags: ['stores'],
        params: endpointParams,
        response: { 200: endpointSchema, ...problemResponses(400, 404, 503) },
      },
      handler: async (request) => service.getEndpoint(request.caller!, request.params.domain, request.params.endpointId),
    });

    api.patch(`${base}/:endpointId`, {
      config: { scope: WRITE_SCOPE },
      schema: {
        operationId: 'updateWebhookEndpoint',
        summary: 'Change a webhook endpoint: its URL, its event types, or whether it is enabled',
        tags: ['stores'],
        params: endpointParams,
        body: updateEndpointBody,
        response: { 200: endpointSchema, ...problemResponses(400, 404, 413, 415, 503) },
      },
      handler: async (request) => service.updateEndpoint(request.caller!, request.params.domain, request.params.endpointId, request.body),
    });

    api.delete(`${base}/:endpointId`, {
      config: { scope: WRITE_SCOPE, idempotent: true },
      schema: {
        operationId: 'deleteWebhookEndpoint',
        summary: 'Remove a webhook endpoint, its pending deliveries and its log',
        tags: ['stores'],
        params: endpointParams,
        response: { 204: z.null().describe('Removed'), ...problemResponses(400, 404, 503) },
      },
      handler: async (request, reply) => {
        await service.deleteEndpoint(request.caller!, request.params.domain, request.params.endpointId);
        return reply.code(204).send(null);
      },
    });

    api.get(`${base}/:endpointId/deliveries`, {
      config: { scope: 'api:read' },
      schema: {
        operationId: 'listWebhookDeliveries',
        summary: "A webhook endpoint's recent deliveries, newest first, each with its attempts",
        tags: ['stores'],
        params: endpointParams,
        querystring: deliveriesQuery,
        response: { 200: deliveryListSchema, ...problemResponses(400, 404, 503) },
      },
      handler: async (request) => ({ items: await service.listDeliveries(request.caller!, request.params.domain, request.params.endpointId, request.query.limit) }),
    });
  };
}
