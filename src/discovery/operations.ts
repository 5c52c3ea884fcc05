import { z } from 'zod';
import { defineOperation, perRequestCharges } from '../core/operations.ts';
import { API_VERSION } from './openapi.ts';
import type { IndexedOperation } from './routes.ts';

export { API_VERSION } from './openapi.ts';

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


/** What the index is made of: the service, and the operations collected as the routes registered. */
export interface ApiIndexPort {
  serviceName: string;
  baseUrl: string;
  operations: IndexedOperation[];
  testNetworkNotice: string | undefined;
}

/** `/api`, the API index: derived from the registered routes, so it can never list an operation that does not exist or miss one that does. */
export const discoveryOperations = [
  defineOperation({
    id: 'getApiIndex',
    method: 'GET',
    path: '/api',
    summary: 'List the operations of this API',
    tag: 'service',
    // The seed's protected route: an access token reads it, anyone else pays per request.
    scope: 'api:read',
    input: z.object({}),
    output: apiIndexSchema,
    errors: [],
    tenancy: { none: 'the index of operations' },
    example: {},
    // The seed names no price for the API index; it costs what one paid request costs.
    paid: {
      price: { usdCents: 5, description: 'The API index (per-request fee)', mpp: perRequestCharges, x402: true },
      storeOf: () => null,
      resultReference: () => null,
    },
    run: async (site: ApiIndexPort) => ({
      service: site.serviceName,
      version: API_VERSION,
      description: 'Back-in-stock alerts for e-commerce stores: subscribe shoppers to restock e-mails and buy the monthly plan.',
      openapi: `${site.baseUrl}/openapi.json`,
      mcp: { url: `${site.baseUrl}/mcp`, transport: 'streamable-http' as const, authorization: `${site.baseUrl}/.well-known/oauth-protected-resource` },
      ...(site.testNetworkNotice ? { testNetworkPayments: site.testNetworkNotice } : {}),
      operations: [...site.operations].sort((a, b) => a.path.localeCompare(b.path) || a.method.localeCompare(b.method)),
    }),
  }),
];
