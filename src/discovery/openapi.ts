import swagger from '@fastify/swagger';
import type { FastifyInstance } from 'fastify';
import { jsonSchemaTransform } from 'fastify-type-provider-zod';

export const API_VERSION = '1.0.0';

type OpenApiDocument = Record<string, unknown> & { paths?: Record<string, Record<string, OperationObject>> };
type OperationObject = { responses?: Record<string, { content?: Record<string, unknown> }> };

/**
 * Registers the OpenAPI 3.1 generator. Call before the routes register: it documents every route
 * from the zod schemas that validate it.
 */
export async function registerOpenApi(app: FastifyInstance, baseUrl: string): Promise<void> {
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Restock',
        version: API_VERSION,
        description:
          'Back-in-stock alerts for e-commerce stores. Subscribe a customer e-mail to a restock alert, ' +
          'check out the monthly plan, and read the service health.',
      },
      servers: [{ url: baseUrl }],
      tags: [
        { name: 'alerts', description: 'Restock alert subscriptions' },
        { name: 'plans', description: 'Plans merchants buy' },
        { name: 'agents', description: 'Agent registration, claim, tokens and revocation' },
        { name: 'stores', description: "Merchants' stores and the agents bound to them" },
        { name: 'service', description: 'Health and discovery' },
      ],
      components: {
        securitySchemes: {
          agentToken: {
            type: 'http',
            scheme: 'bearer',
            bearerFormat: 'JWT',
            description:
              'An access token from POST /api/agent/register, the claim, or POST /oauth/token. Each operation lists the scope it needs; ' +
              `see ${baseUrl}/.well-known/oauth-protected-resource.`,
          },
        },
      },
    },
    transform: jsonSchemaTransform,
    transformObject: (documentObject) => {
      const document = (documentObject as { openapiObject: OpenApiDocument }).openapiObject;
      return withServiceInfo(withProblemMediaType(document)) as never;
    },
  });
}

/** Error answers are problem+json (RFC 9457); the generator only knows application/json. */
function withProblemMediaType(document: OpenApiDocument): OpenApiDocument {
  for (const operations of Object.values(document.paths ?? {})) {
    for (const operation of Object.values(operations)) {
      for (const [status, response] of Object.entries(operation.responses ?? {})) {
        const json = response.content?.['application/json'];
        if (Number(status) >= 400 && json) response.content = { 'application/problem+json': json };
      }
    }
  }
  return document;
}

function withServiceInfo(document: OpenApiDocument): OpenApiDocument {
  return { ...document, 'x-service-info': { categories: ['e-commerce', 'notifications', 'inventory'] } };
}
