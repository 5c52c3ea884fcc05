import type { FastifyInstance, RouteOptions } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { API_VERSION } from './openapi.ts';
import { html, page } from '../core/html.ts';
import { NotFound, problemTypes, type ProblemSlug } from '../core/problems.ts';

const apiIndexSchema = z
  .object({
    service: z.string(),
    version: z.string(),
    description: z.string(),
    openapi: z.url().describe('The OpenAPI 3.1 document of this API'),
    mcp: z
      .object({ url: z.url(), transport: z.literal('streamable-http'), authorization: z.url().describe('Protected resource metadata (RFC 9728)') })
      .describe('The same operations as MCP tools'),
    testNetworkPayments: z.string().optional().describe('Present when payments per request are taken on test networks only (test tokens, no money): says so'),
    operations: z.array(
      z.object({
        operationId: z.string(),
        method: z.string(),
        path: z.string(),
        summary: z.string(),
        scope: z.string().optional().describe('Scope an access token needs for this operation; absent for public ones'),
      }),
    ),
  })
  .describe('Index of the API');


export interface Operation {
  operationId: string;
  method: string;
  path: string;
  summary: string;
  scope?: string;
}

/** Records every documented route as it is registered (see the `operation-index` plugin). */
export function collectOperations(app: FastifyInstance, operations: Operation[]): void {
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

/**
 * `/api` (the API index) and `/openapi.json`. Both are derived from the registered routes, so
 * they can never list an operation that does not exist or miss one that does.
 */
export function discoveryRoutes(options: { serviceName: string; baseUrl: string; operations: Operation[]; testNetworkNotice: string | undefined }) {
  const { operations } = options;
  return async function (app: FastifyInstance) {

    const api = app.withTypeProvider<ZodTypeProvider>();
    api.get('/api', {
      // The seed's protected route: an access token reads it, anyone else pays per request.
      config: { scope: 'api:read', payment: 'getApiIndex' },
      schema: {
        operationId: 'getApiIndex',
        summary: 'List the operations of this API',
        tags: ['service'],
        response: { 200: apiIndexSchema },
      },
      handler: async () => ({
        service: options.serviceName,
        version: API_VERSION,
        description: 'Back-in-stock alerts for e-commerce stores: subscribe shoppers to restock e-mails and buy the monthly plan.',
        openapi: `${options.baseUrl}/openapi.json`,
        mcp: { url: `${options.baseUrl}/mcp`, transport: 'streamable-http' as const, authorization: `${options.baseUrl}/.well-known/oauth-protected-resource` },
        ...(options.testNetworkNotice ? { testNetworkPayments: options.testNetworkNotice } : {}),
        operations: [...operations].sort((a, b) => a.path.localeCompare(b.path) || a.method.localeCompare(b.method)),
      }),
    });

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
