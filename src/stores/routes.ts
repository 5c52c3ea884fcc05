import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { problemResponses } from '../core/http/openapi-responses.ts';
import { NotFound } from '../core/problems.ts';
import { storeParams, storeSchema } from './schemas.ts';
import type { StoreService } from './service.ts';

/** A store's configuration, for the agents its owner bound to it. */
export function storeRoutes(service: StoreService) {
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
      handler: async (request) => {
        const domain = request.params.domain.toLowerCase();
        // Another store's existence is nobody else's business: it answers like a missing one.
        if (request.caller!.storeDomain !== domain) throw new NotFound(`No store ${domain} is visible to this agent.`);
        return service.getStore(domain);
      },
    });
  };
}
