import swagger from '@fastify/swagger';
import type { FastifyInstance } from 'fastify';
import { jsonSchemaTransform } from 'fastify-type-provider-zod';

export const API_VERSION = '1.0.0';

type OpenApiDocument = Record<string, unknown> & { paths?: Record<string, Record<string, OperationObject>> };
type OperationObject = {
  operationId?: string;
  responses?: Record<string, { content?: Record<string, unknown> }>;
  security?: Array<Record<string, string[]>>;
  'x-payment-info'?: unknown;
};

/**
 * Registers the OpenAPI 3.1 generator (the discovery feature's `openapi` plugin, loaded before any
 * route): it documents every route from the zod schemas that validate it.
 */
/** `x-payment-info` of a paid operation (the payments service's, with the offers in force). */
export type PaymentInfo = (operation: string) => unknown;

export async function registerOpenApi(app: FastifyInstance, baseUrl: string, paid: ReadonlySet<string>, paymentInfo: PaymentInfo): Promise<void> {
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
        { name: 'payments', description: 'The ledger of requests paid per request (x402, MPP)' },
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
      return withServiceInfo(withPaymentInfo(withPublicSecurity(withClosedRecords(withProblemMediaType(document))), paid, paymentInfo), baseUrl) as never;
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

/**
 * `security: []` on every operation the identity gate does not guard (it writes the requirement
 * of those that name a scope): without it a reader cannot tell "public" from "forgot to say", and
 * linters and client generators take the latter.
 */
function withPublicSecurity(document: OpenApiDocument): OpenApiDocument {
  for (const operations of Object.values(document.paths ?? {})) {
    for (const operation of Object.values(operations)) operation.security ??= [];
  }
  return document;
}

type JsonSchema = { [keyword: string]: unknown };

/**
 * A zod record keyed by an enum has every key (zod v4 requires each), which the generator writes
 * as `propertyNames` + `required` with no `properties`: valid JSON Schema, but readers (linters,
 * client generators) see required properties that are not defined and make a map. Written as the
 * closed object it is, each key is a typed field.
 */
function withClosedRecords(document: OpenApiDocument): OpenApiDocument {
  const visit = (node: unknown): void => {
    if (Array.isArray(node)) return node.forEach(visit);
    if (node === null || typeof node !== 'object') return;
    const schema = node as JsonSchema;
    const keys = (schema.propertyNames as JsonSchema | undefined)?.enum;
    const values = schema.additionalProperties;
    if (schema.type === 'object' && Array.isArray(keys) && !schema.properties && values && typeof values === 'object' && Array.isArray(schema.required)) {
      const required = new Set(schema.required as string[]);
      if (keys.every((key) => typeof key === 'string' && required.has(key))) {
        delete schema.propertyNames;
        schema.properties = Object.fromEntries((keys as string[]).map((key) => [key, structuredClone(values)]));
        schema.additionalProperties = false;
      }
    }
    Object.values(schema).forEach(visit);
  };
  visit(document.paths);
  visit(document.components);
  return document;
}

/** The MPP discovery draft's offers and the x402 requirements on each paid operation, as the 402s make them. */
function withPaymentInfo(document: OpenApiDocument, paid: ReadonlySet<string>, paymentInfo: PaymentInfo): OpenApiDocument {
  for (const operations of Object.values(document.paths ?? {})) {
    for (const operation of Object.values(operations)) {
      const id = operation.operationId;
      if (id && paid.has(id)) operation['x-payment-info'] = paymentInfo(id);
    }
  }
  return document;
}

function withServiceInfo(document: OpenApiDocument, baseUrl: string): OpenApiDocument {
  return {
    ...document,
    'x-service-info': {
      categories: ['e-commerce', 'notifications', 'inventory'],
      docs: { apiReference: `${baseUrl}/openapi.json`, homepage: `${baseUrl}/` },
      mcp: { url: `${baseUrl}/mcp`, transport: 'streamable-http' },
    },
  };
}
