import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { problemResponses } from '../core/http/openapi-responses.ts';
import { storeParams, storeSchema, storeSettingsPatch, type StorePlanUsage } from './schemas.ts';
import type { StoreService } from './service.ts';

/**
 * A store's configuration, for the agents its owner bound to it. `planOf` reads the plan in
 * force and its usage from the billing feature, for a store the service has already shown.
 */
export function storeRoutes(service: StoreService, planOf: (domain: string) => Promise<StorePlanUsage>) {
  const withPlan = async <T extends { domain: string }>(store: T) => ({ ...store, plan: await planOf(store.domain) });
  return async function (app: FastifyInstance) {
    const api = app.withTypeProvider<ZodTypeProvider>();

    api.get('/api/v1/stores/:domain', {
      config: { scope: 'api:read' },
      schema: {
        operationId: 'getStore',
        summary: "Read a store's configuration (agents bound to the store only)",
        tags: ['stores'],
        params: storeParams,
        response: { 200: storeSchema, ...problemResponses(400, 404) },
      },
      handler: async (request) => withPlan(await service.storeFor(request.caller!, request.params.domain)),
    });

    api.patch('/api/v1/stores/:domain', {
      config: { scope: 'inventory:alerts', idempotent: true },
      schema: {
        operationId: 'updateStoreSettings',
        summary: "Change a store's batch policy, language, template or sender (agents bound to the store only)",
        tags: ['stores'],
        params: storeParams,
        body: storeSettingsPatch,
        response: { 200: storeSchema, ...problemResponses(400, 404, 413, 415, 501, 502, 503) },
      },
      handler: async (request) => withPlan(await service.updateStoreSettings(request.caller!, request.params.domain, request.body)),
    });
  };
}
