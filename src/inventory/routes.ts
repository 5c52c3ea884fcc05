import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { problemResponses } from '../core/http/openapi-responses.ts';
import { storeParams } from '../stores/schemas.ts';
import { reportInventoryBody, reportInventoryResponse, stockQuery, stockResponse } from './schemas.ts';
import type { InventoryService } from './service.ts';

/** The inventory API: any platform (or an agent bound to the store) reports stock; restocks follow. */
export function inventoryRoutes(service: InventoryService) {
  return async function (app: FastifyInstance) {
    const api = app.withTypeProvider<ZodTypeProvider>();

    api.post('/api/v1/stores/:domain/inventory', {
      config: { scope: 'inventory:alerts', idempotent: true },
      schema: {
        operationId: 'reportInventory',
        summary: "Report stock; a variant that becomes sellable again dispatches its waiting subscribers' alerts",
        tags: ['inventory'],
        params: storeParams,
        body: reportInventoryBody,
        response: { 200: reportInventoryResponse, ...problemResponses(400, 404, 413, 415, 503) },
      },
      handler: async (request) => ({ items: await service.reportInventory(request.caller!, request.params.domain, request.body.items) }),
    });

    api.get('/api/v1/stores/:domain/stock', {
      config: { scope: 'api:read' },
      schema: {
        operationId: 'getStockStatus',
        summary: "Read the store's known stock, per variant",
        tags: ['inventory'],
        params: storeParams,
        querystring: stockQuery,
        response: { 200: stockResponse, ...problemResponses(400, 404, 503) },
      },
      handler: async (request) => ({ items: await service.stockStatus(request.caller!, request.params.domain, request.query.productId) }),
    });
  };
}
