import { NodeStreamableHTTPServerTransport } from '@modelcontextprotocol/node';
import { isInitializeRequest, ProtocolError, ProtocolErrorCode, type McpServer } from '@modelcontextprotocol/server';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { MCP_RESOURCE_PATH } from '../agents/feature.ts';
import type { BearerGate } from '../agents/service.ts';
import type { Caller } from '../core/http/caller.ts';
import { rawAnswerAfterDurable, type Durable } from '../core/http/durable-answers.ts';
import type { Operation } from '../core/operations.ts';
import { authInfoOf } from './caller.ts';
import type { Following, SubscriptionReads } from './resources.ts';
import { SERVER_CARD_PATHS, serverCard } from './server-card.ts';
import type { McpSession, McpSessions } from './sessions.ts';
import { mcpServerFor, paidToolNames, restockTools, type McpPayments } from './tools.ts';

export const MCP_PATH = MCP_RESOURCE_PATH;
const SESSION_HEADER = 'mcp-session-id';

export interface McpOptions {
  gate: BearerGate;
  /** Every declared operation; those that offer a tool are served. */
  operations: Operation[];
  serviceName: string;
  baseUrl: string;
  /** The endpoint's own protected resource metadata, which its 401 and 403 challenges link to. */
  resourceMetadataUrl: string;
  payments: McpPayments;
  /** What the subscription resources read. */
  reads: SubscriptionReads;
  sessions: McpSessions;
  /** What the transport's answers wait for before they leave. */
  durable: Durable;
}

/** What a caller without a token may ask: to learn the tools and the resource template, and to call (and pay for) a paid tool. */
const OPEN_METHODS = new Set(['initialize', 'ping', 'tools/list', 'resources/templates/list']);

/**
 * `/mcp`: the MCP endpoint (Streamable HTTP). Authorization per the MCP specification: a valid
 * access token for this API is needed (401 with `resource_metadata` otherwise; a token sent is
 * checked before the body is read and counted by the caller's rate limit); each tool and
 * resource method then needs its HTTP twin's scope (403 `insufficient_scope`). Without a token,
 * an agent may learn the tools and call the paid ones, paying per call as the MCP payment
 * conventions say (paid-tools.ts), counted against its client address's `payment` limit (and,
 * once paid, its payer's).
 *
 * Stateless by default: a POST without `Mcp-Session-Id` is answered on its own, in JSON, by a
 * server made for it. An `initialize` with a token opens a session instead, while the agent and
 * the process are within their limits (sessions.ts; beyond them, it is answered statelessly): its
 * answer carries the session's id, which the client sends with every later request. In a
 * session, GET opens the stream its resource updates come on and DELETE ends it. Every request
 * of a session needs a token of the agent that opened it, checked as any other; to another
 * agent the session does not exist (404).
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
  const { sessions } = options;
  const tools = restockTools(options.operations);
  const paid = paidToolNames(tools);
  const scope = readScopeOf(options.operations);
  const resource = new URL(`${options.baseUrl}${MCP_PATH}`);
  const serverWith = (following: Following): McpServer => mcpServerFor(tools, options.serviceName, options.payments, { ...options.reads, following, scope });
  /** JSON-RPC messages a caller without a token may send (anything else: 401, as with a bad token). */
  const openToAll = (body: unknown) =>
    [body].flat().every((message) => {
      const { method, params } = (message ?? {}) as { method?: unknown; params?: { name?: unknown } };
      if (typeof method !== 'string') return false;
      if (OPEN_METHODS.has(method) || method.startsWith('notifications/')) return true;
      return method === 'tools/call' && typeof params?.name === 'string' && paid.has(params.name);
    });
  /** Outside a session there is no stream to tell of updates on: following is refused, saying how to get one. */
  const outsideSession = (caller: Caller | undefined): Following => ({
    follow() {
      const refusal = caller && sessions.refusal(caller.agentId);
      throw new ProtocolError(
        ProtocolErrorCode.InvalidRequest,
        refusal ?? 'resources/subscribe needs a session: send initialize with an access token, then the Mcp-Session-Id its answer carries with every request, and open the stream (GET /mcp) the updates come on.',
      );
    },
    unfollow() {},
  });
  /** The raw request with the auth info the SDK hands to the handlers (and checks scopes against). */
  const withAuth = (request: FastifyRequest) => {
    const caller = request.caller;
    return caller ? Object.assign(request.raw, { auth: authInfoOf(caller, resource, options.resourceMetadataUrl) }) : request.raw;
  };

  const serveStateless = async (request: FastifyRequest, reply: FastifyReply) => {
    const server = serverWith(outsideSession(request.caller));
    const transport = new NodeStreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    reply.raw.on('close', () => {
      void transport.close();
      void server.close();
    });
    await server.connect(transport);
    handOver(reply, options.durable);
    await transport.handleRequest(withAuth(request), reply.raw, request.body);
  };
  const serveInSession = async (session: McpSession, request: FastifyRequest, reply: FastifyReply) => {
    sessions.touch(session);
    handOver(reply, options.durable);
    await session.transport.handleRequest(withAuth(request), reply.raw, request.body);
  };
  /** The session named by a request whose token was checked (onRequest), if it is its agent's. */
  const sessionNamed = (request: FastifyRequest) => sessions.find(sessionIdOf(request)!, request.caller!.agentId);

  return async function (app: FastifyInstance) {
    // Without it a batch would count as one request.
    if (!app.hasDecorator('rateLimits')) throw new Error('The MCP endpoint counts each message of a batch: register the rate-limit gate before it.');
    // An open stream would keep the server from closing: sessions end first.
    app.addHook('preClose', async () => sessions.close());

    /** A session's every request needs a token, checked before anything else; a stateless one only when it sends one. */
    const checkToken = async (request: FastifyRequest) => {
      if (request.headers.authorization !== undefined || sessionIdOf(request) !== undefined) request.caller = await options.gate.callerOf(request);
    };

    app.post(MCP_PATH, {
      schema: { hide: true },
      config: { rateLimitByAddressWithoutCaller: 'payment', ownOriginOnly: true },
      onRequest: checkToken,
      preHandler: async (request: FastifyRequest, reply: FastifyReply) => {
        if (!request.caller && !openToAll(request.body)) await options.gate.callerOf(request);
        const more = messagesIn(request.body) - 1;
        if (more > 0) await app.rateLimits.countMore(request, reply, more);
      },
      handler: async (request, reply) => {
        if (sessionIdOf(request) !== undefined) {
          const session = sessionNamed(request);
          return session ? serveInSession(session, request, reply) : sessionNotFound(reply);
        }
        const opened = request.caller && isInitializeRequest(request.body) ? await sessions.open(request.caller.agentId, serverWith) : undefined;
        if (!opened) return serveStateless(request, reply);
        await serveInSession(opened, request, reply);
        // An initialize the transport refused (a malformed one) started nothing to keep.
        if (opened.transport.sessionId === undefined) sessions.end(opened);
      },
    });

    // A session's stream (GET) and its end (DELETE); without a session, as before sessions: 405.
    const sessionRoute = async (request: FastifyRequest, reply: FastifyReply) => {
      if (sessionIdOf(request) === undefined) return notHere(reply);
      const session = sessionNamed(request);
      if (!session) return sessionNotFound(reply);
      if (request.method === 'GET') {
        sessions.streamOpened(session);
        reply.raw.on('close', () => sessions.streamClosed(session));
      } else {
        sessions.touch(session);
      }
      handOver(reply, options.durable);
      await session.transport.handleRequest(withAuth(request), reply.raw);
    };
    app.get(MCP_PATH, { schema: { hide: true }, config: { ownOriginOnly: true }, onRequest: checkToken }, sessionRoute);
    app.delete(MCP_PATH, { schema: { hide: true }, config: { ownOriginOnly: true }, onRequest: checkToken }, sessionRoute);

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
          resources: { ...options.reads, following: outsideSession(undefined), scope },
        }).catch((err: unknown) => {
          card = undefined;
          throw err;
        });
        return reply.header('cache-control', 'public, max-age=300').header('access-control-allow-origin', '*').send(await card);
      });
    }
  };
}

/**
 * The transport writes the answer itself: what the hooks set (request id, RateLimit-*) goes
 * first, and what it writes waits, as every other answer does, for what it may describe to be on disk.
 */
function handOver(reply: FastifyReply, durable: Durable): void {
  for (const [name, value] of Object.entries(reply.getHeaders())) if (value !== undefined) reply.raw.setHeader(name, value);
  rawAnswerAfterDurable(reply.raw, durable);
  reply.hijack();
}

function sessionIdOf(request: FastifyRequest): string | undefined {
  const value = request.headers[SESSION_HEADER];
  return typeof value === 'string' ? value : undefined;
}

function notHere(reply: FastifyReply) {
  return reply
    .code(405)
    .header('allow', 'POST')
    .send({ jsonrpc: '2.0', error: { code: -32000, message: 'Without a session (Mcp-Session-Id) this MCP endpoint is stateless: POST JSON-RPC requests to it. A session, opened by an initialize with an access token, streams on GET and ends with DELETE.' }, id: null });
}

/** As the SDK's transport answers an unknown session; a client then initializes again. */
function sessionNotFound(reply: FastifyReply) {
  return reply.code(404).send({ jsonrpc: '2.0', error: { code: -32001, message: 'Session not found: it ended (DELETE, idle, or this process restarted), or it is not this agent’s. Initialize again.' }, id: null });
}

/** The scope of the subscriptions' HTTP read (getSubscription), which the resources need as its tool does. */
function readScopeOf(operations: Operation[]): string {
  const scope = operations.find((operation) => operation.declaration.id === 'getSubscription')?.declaration.scope;
  if (!scope) throw new Error('The MCP resources read subscriptions as getSubscription does: serve it.');
  return scope;
}

/** JSON-RPC messages in a body: a batch's length, otherwise one. */
function messagesIn(body: unknown): number {
  return Array.isArray(body) ? Math.max(1, body.length) : 1;
}
