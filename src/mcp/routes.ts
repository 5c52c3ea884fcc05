import { NodeStreamableHTTPServerTransport } from '@modelcontextprotocol/node';
import type { AuthInfo } from '@modelcontextprotocol/server';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { MCP_RESOURCE_PATH } from '../agents/feature.ts';
import type { BearerGate } from '../agents/service.ts';
import type { Operation } from '../core/operations.ts';
import { SERVER_CARD_PATHS, serverCard } from './server-card.ts';
import { mcpServerFor, paidToolNames, restockTools, type McpPayments } from './tools.ts';

export const MCP_PATH = MCP_RESOURCE_PATH;

export interface McpOptions {
  gate: BearerGate;
  /** Every declared operation; those that offer a tool are served. */
  operations: Operation[];
  serviceName: string;
  baseUrl: string;
  /** The endpoint's own protected resource metadata, which its 401 and 403 challenges link to. */
  resourceMetadataUrl: string;
  payments: McpPayments;
}

/** What a caller without a token may ask: to learn the tools, and to call (and pay for) a paid one. */
const OPEN_METHODS = new Set(['initialize', 'ping', 'tools/list']);

/**
 * `/mcp`: the MCP endpoint (Streamable HTTP, stateless: each POST is answered on its own, in
 * JSON). Authorization per the MCP specification: a valid access token for this API is needed
 * (401 with `resource_metadata` otherwise; a token sent is checked before the body is read and
 * counted by the caller's rate limit); each tool then needs its HTTP twin's scope (403
 * `insufficient_scope`). Without a token, an agent may list the tools and call the paid ones,
 * paying per call as the MCP payment conventions say (paid-tools.ts), counted against its client
 * address's `payment` limit (and, once paid, its payer's).
 *
 * A browser page of another site is refused (403 `foreign-origin`), as the Streamable HTTP
 * transport's security warning asks; agents send no `Origin`.
 *
 * Every JSON-RPC message counts as one request against the caller's (or the address's) limit: a
 * batch of 60 tool calls is 60 requests, not one. The first is counted before the body is read,
 * the rest once it is; a batch that does not fit in what remains is refused whole with 429
 * problem+json and none of it runs.
 */
export function mcpRoutes(options: McpOptions) {
  const tools = restockTools(options.operations);
  const paid = paidToolNames(tools);
  /** JSON-RPC messages a caller without a token may send (anything else: 401, as with a bad token). */
  const openToAll = (body: unknown) =>
    [body].flat().every((message) => {
      const { method, params } = (message ?? {}) as { method?: unknown; params?: { name?: unknown } };
      if (typeof method !== 'string') return false;
      if (OPEN_METHODS.has(method) || method.startsWith('notifications/')) return true;
      return method === 'tools/call' && typeof params?.name === 'string' && paid.has(params.name);
    });
  return async function (app: FastifyInstance) {
    // Without it a batch would count as one request.
    if (!app.hasDecorator('rateLimits')) throw new Error('The MCP endpoint counts each message of a batch: register the rate-limit gate before it.');
    app.post(MCP_PATH, {
      schema: { hide: true },
      config: { rateLimitByAddressWithoutCaller: 'payment', ownOriginOnly: true },
      onRequest: async (request: FastifyRequest) => {
        // Without any Authorization, the body decides (preHandler); a token is checked at once.
        if (request.headers.authorization !== undefined) request.caller = await options.gate.callerOf(request);
      },
      preHandler: async (request: FastifyRequest, reply: FastifyReply) => {
        if (!request.caller && !openToAll(request.body)) await options.gate.callerOf(request);
        const more = messagesIn(request.body) - 1;
        if (more > 0) await app.rateLimits.countMore(request, reply, more);
      },
      handler: async (request, reply) => {
        const caller = request.caller;
        const auth: AuthInfo | undefined = caller && {
          token: caller.tokenId,
          clientId: caller.agentId,
          scopes: [...caller.scopes],
          // The MCP resource's identifier; the token's audience, the base URL, covers it.
          resource: new URL(`${options.baseUrl}${MCP_PATH}`),
          resourceMetadataUrl: options.resourceMetadataUrl,
        };
        const server = mcpServerFor(tools, caller, options.serviceName, options.payments);
        const transport = new NodeStreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
        reply.raw.on('close', () => {
          void transport.close();
          void server.close();
        });
        await server.connect(transport);
        // The transport writes the answer itself: what the hooks set (request id, RateLimit-*) goes first.
        for (const [name, value] of Object.entries(reply.getHeaders())) if (value !== undefined) reply.raw.setHeader(name, value);
        reply.hijack();
        await transport.handleRequest(auth ? Object.assign(request.raw, { auth }) : request.raw, reply.raw, request.body);
      },
    });

    // Stateless: no server-initiated stream to open, no session to end.
    const notHere = async (_request: FastifyRequest, reply: FastifyReply) =>
      reply
        .code(405)
        .header('allow', 'POST')
        .send({ jsonrpc: '2.0', error: { code: -32000, message: 'This MCP endpoint is stateless: POST JSON-RPC requests to it.' }, id: null });
    app.get(MCP_PATH, { schema: { hide: true }, config: { ownOriginOnly: true } }, notHere);

    let card: Promise<unknown> | undefined;
    for (const path of SERVER_CARD_PATHS) {
      app.get(path, { schema: { hide: true } }, async (_request, reply) => {
        card ??= serverCard({
          tools,
          serviceName: options.serviceName,
          baseUrl: options.baseUrl,
          endpoint: `${options.baseUrl}${MCP_PATH}`,
          // The endpoint's own document, as its 401 links it: a client checks that the resource it
          // names is the endpoint it calls (RFC 9728 §3.3).
          resourceMetadataUrl: options.resourceMetadataUrl,
          payments: options.payments,
        }).catch((err: unknown) => {
          card = undefined;
          throw err;
        });
        return reply.header('cache-control', 'public, max-age=300').header('access-control-allow-origin', '*').send(await card);
      });
    }
    app.delete(MCP_PATH, { schema: { hide: true }, config: { ownOriginOnly: true } }, notHere);
  };
}

/** JSON-RPC messages in a body: a batch's length, otherwise one. */
function messagesIn(body: unknown): number {
  return Array.isArray(body) ? Math.max(1, body.length) : 1;
}
