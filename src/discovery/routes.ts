import type { FastifyInstance, RouteOptions } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { html, page } from '../core/html.ts';
import { NotFound, problemTypes, type ProblemSlug } from '../core/problems.ts';

/** An operation as the API index lists it. */
export interface IndexedOperation {
  operationId: string;
  method: string;
  path: string;
  summary: string;
  scope?: string;
}

/** Records every documented route as it is registered (see the `operation-index` plugin). */
export function collectOperations(app: FastifyInstance, operations: IndexedOperation[]): void {
  app.addHook('onRoute', (route: RouteOptions) => {
    const schema = route.schema as { operationId?: string; summary?: string; hide?: boolean } | undefined;
    if (!schema?.operationId || schema.hide) return;
    for (const method of [route.method].flat()) {
      if (method === 'HEAD') continue;
      const scope = route.config?.scope;
      operations.push({ operationId: schema.operationId, method, path: route.url, summary: schema.summary ?? '', ...(scope ? { scope } : {}) });
    }
  });
}

/** `/openapi.json`, derived from the registered routes, and the problem types' pages. */
export function discoveryRoutes() {
  return async function (app: FastifyInstance) {

    const api = app.withTypeProvider<ZodTypeProvider>();
    app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());

    api.get('/problems/:slug', {
      config: { page: true },
      schema: { hide: true, params: z.object({ slug: z.string().max(64) }) },
      handler: async (request, reply) => {
        const type = Object.hasOwn(problemTypes, request.params.slug)
          ? problemTypes[request.params.slug as ProblemSlug]
          : undefined;
        if (!type) throw new NotFound(`No problem type ${request.params.slug}.`);
        const body = html`<h1>${type.title}</h1><p>HTTP status ${type.status}.</p><p>${type.description}</p>`;
        return reply.type('text/html; charset=utf-8').send(page(type.title, body));
      },
    });
  };
}
