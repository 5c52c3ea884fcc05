import type { FastifyInstance, FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import type { BoundPaidTerms, Operation, OperationContext } from '../operations.ts';
import { httpParts, type HttpParts } from '../operations.ts';
import type { z } from 'zod';
import { ValidationFailed } from '../problems.ts';
import type { Caller } from './caller.ts';
import { problemResponses } from './openapi-responses.ts';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Callers without an access token may pay for this route per request (the payment gate). */
    payment?: BoundPaidTerms;
  }
  interface FastifyRequest {
    /** How a caller without a token paid for this request (set by the payment gate). */
    paidWith?: 'x402' | 'mpp';
  }
}

/**
 * Who runs a public operation (one that names no scope) when no token came: an agent holding no
 * scope and owning nothing, so a service asked on its behalf shows it nothing of anyone's.
 */
const PUBLIC_CALLER: Caller = Object.freeze({ agentId: 'public', scopes: new Set<string>(), storeDomain: null, rateLimitPerMinute: 0, tokenId: '' });

/** The HTTP routes of declared operations, each validated and documented from its declaration. */
export function operationRoutes(operations: Operation[]): FastifyPluginAsync {
  return async function (app: FastifyInstance) {
    for (const operation of operations) app.route(routeOf(operation));
  };
}

/** Reads the validated input from where HTTP carried it: one part as it is (no copy on the hot paths), several merged. */
function inputReader(parts: HttpParts): (request: FastifyRequest) => object {
  const carried = (['params', 'query', 'body'] as const).filter((part) => parts[part]);
  if (carried.length === 0) return () => ({});
  if (carried.length === 1) {
    const [part] = carried as [keyof FastifyRequest & ('params' | 'query' | 'body')];
    return (request) => request[part] as object;
  }
  return (request) => Object.assign({}, ...carried.map((part) => request[part] as object));
}

/** The input's rules across fields, checked on the parts already validated; refused as the parts' own errors are. */
function checkRefinements(input: z.ZodObject, parsed: object, part: 'body' | 'query'): unknown {
  const checked = input.safeParse(parsed);
  if (checked.success) return checked.data;
  throw new ValidationFailed(checked.error.issues.map((issue) => ({ pointer: `/${[part, ...issue.path.map(String)].join('/')}`, message: issue.message })));
}

function routeOf({ declaration, pathFields, paid, run }: Operation) {
  const parts = httpParts(declaration, pathFields);
  const inputOf = inputReader(parts);
  const status = declaration.status ?? 200;
  return {
    method: declaration.method,
    url: declaration.path,
    config: {
      ...(declaration.scope ? { scope: declaration.scope } : {}),
      ...(declaration.idempotent ? { idempotent: true } : {}),
      ...(paid ? { payment: paid } : {}),
    },
    schema: {
      operationId: declaration.id,
      summary: declaration.summary,
      ...(declaration.description ? { description: declaration.description } : {}),
      tags: [declaration.tag],
      ...parts,
      response: { [status]: declaration.output, ...problemResponses(...declaration.errors) },
    },
    handler: async (request: FastifyRequest, reply: FastifyReply) => {
      const parsed = inputOf(request);
      const input = parts.refined ? checkRefinements(declaration.input, parsed, parts.body ? 'body' : 'query') : parsed;
      const context: OperationContext = { caller: request.caller ?? PUBLIC_CALLER, ...(request.paidWith ? { paidWith: request.paidWith } : {}) };
      const result = await run(input, context);
      if (declaration.headers) reply.headers(declaration.headers);
      reply.code(status);
      return status === 204 ? reply.send(null) : result;
    },
  };
}
