import { Extensions, type AgentCard, type Message, type SendMessageRequest, type Task } from '@a2a-js/sdk';
import { LegacyJsonRpcTransportHandler } from '@a2a-js/sdk/compat/v0_3/server';
import { A2A_ERROR_CODE, RequestMalformedError, UnsupportedOperationError } from '@a2a-js/sdk/errors';
import { DefaultRequestHandler, JsonRpcTransportHandler, ServerCallContext, UnauthenticatedUser, validateVersion } from '@a2a-js/sdk/server';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { BearerGate } from '../agents/service.ts';
import { clientAddress } from '../core/http/rate-limit.ts';
import { Problem, problemTypeUri } from '../core/problems.ts';
import { agentCard, cardJson, legacyCardJson, X402_EXTENSION_URI, type OperationDescription } from './agent-card.ts';
import type { SubscriptionCallbacks } from '../core/events.ts';
import { CallerUser, dataParts, REQUEST_FACTS, RestockExecutor, taskHolderOf, type A2aPayments, type RequestFacts } from './executor.ts';
import { DurablePushStore, queuedPushSender } from './push.ts';
import { isRecord, namedSkill, readSkillCall, type Skill } from './skills.ts';
import { ExpiringTaskStore } from './task-store.ts';
import { clientPayment, X402_STATUS } from './x402.ts';

export const A2A_PATH = '/a2a';
/** A2A's well-known location of the agent card. */
export const AGENT_CARD_PATH = '/.well-known/agent-card.json';

export interface A2aOptions {
  gate: BearerGate;
  skills: Skill[];
  serviceName: string;
  baseUrl: string;
  payments: A2aPayments;
  /** Where a subscription's news is pushed from (the outgoing-webhooks queue); without it the card offers no push notifications. */
  callbacks?: SubscriptionCallbacks;
}

const SEND = new Set(['SendMessage', 'message/send']);
const STREAMING = new Set(['SendStreamingMessage', 'SubscribeToTask', 'message/stream', 'tasks/resubscribe']);
const VERSION_HEADER = 'a2a-version';
const EXTENSIONS_HEADER = 'a2a-extensions';
const LEGACY_EXTENSIONS_HEADER = 'x-a2a-extensions';
/**
 * Nesting a request may have: the deepest the protocol needs (an x402 payload in a message's
 * metadata) is under 10; the SDK copies a message recursively and would overflow its stack.
 */
const MAX_JSON_DEPTH = 32;
/** Tasks a message may reference: the SDK loads each (a copy each time) and no skill reads them. */
const MAX_REFERENCED_TASKS = 4;

/** Everything built from the card, once every route (and so the OpenAPI document) is known. */
interface Served {
  card: AgentCard;
  json: string;
  legacyJson: string;
  transport: JsonRpcTransportHandler;
  legacyTransport: LegacyJsonRpcTransportHandler;
}

/**
 * `/.well-known/agent-card.json` and the A2A JSON-RPC endpoint `/a2a` (A2A 1.0, and 0.3 for a
 * client that names no version, as the SDK's own handlers serve them), on the official SDK's
 * transport-neutral JSON-RPC handlers and request handler; Fastify carries the HTTP.
 *
 * Access, as for MCP (src/mcp/routes.ts), with the same BearerGate: a token sent is checked before
 * the body is read (401 `invalid_token`) and counts against its rate limit; the skill a message
 * names needs its HTTP twin's scope (403 `insufficient_scope`, the gate's own answer). Without a
 * token only one thing is let in: a message to a skill payable per call (or answering the task
 * that asked for the payment) from a client that activated the x402 extension, counted against
 * its address's `payment` limit; anything else is the gate's 401 pointing at the protected
 * resource metadata. Who may see or change what is the services' answer, given the caller.
 */
export function a2aRoutes(options: A2aOptions) {
  const skills = new Map(options.skills.map((skill) => [skill.id, skill]));
  const endpoint = `${options.baseUrl}${A2A_PATH}`;
  return async function (app: FastifyInstance) {
    if (!app.hasDecorator('rateLimits')) throw new Error('The A2A endpoint counts requests without a token per address: register the rate-limit gate before it.');
    if (!app.hasDecorator('swagger')) throw new Error('The A2A card is generated from the OpenAPI document: register the discovery feature first.');
    // Made at the first request for the card or the endpoint, not as the app starts: the card is
    // generated from the OpenAPI document, and generating it is a tenth of a start.
    let served: Served | undefined;
    const serve = (): Served => {
      const card = agentCard({
        serviceName: options.serviceName,
        baseUrl: options.baseUrl,
        endpoint,
        skills: options.skills,
        operations: operationsOf(app.swagger() as unknown as OpenApiDocument),
        skillInputUri: `${options.baseUrl}/docs#a2a`,
        pushNotifications: options.callbacks !== undefined,
      });
      const push = options.callbacks ? { store: new DurablePushStore(options.callbacks), callbacks: options.callbacks } : undefined;
      const executor = new RestockExecutor(skills, options.baseUrl, options.payments, push);
      const handler = new RestockRequestHandler(card, new ExpiringTaskStore(taskHolderOf), executor, skills, options.baseUrl, push?.store);
      return {
        card,
        json: JSON.stringify(cardJson(card)),
        legacyJson: JSON.stringify(legacyCardJson(card)),
        transport: new JsonRpcTransportHandler(handler),
        legacyTransport: new LegacyJsonRpcTransportHandler(handler),
      };
    };
    const ready = () => (served ??= serve());

    app.get(AGENT_CARD_PATH, { schema: { hide: true } }, async (request, reply) => {
      const { json, legacyJson } = ready();
      return reply
        .header('cache-control', 'public, max-age=300')
        .header('access-control-allow-origin', '*')
        .header('vary', 'A2A-Version')
        .type('application/json')
        .send(isLegacy(headerOf(request, VERSION_HEADER)) ? legacyJson : json);
    });

    app.post(A2A_PATH, {
      schema: { hide: true },
      config: { rateLimitByAddressWithoutCaller: 'payment' },
      onRequest: async (request: FastifyRequest) => {
        // Without any Authorization, the message decides (preHandler); a token is checked at once.
        if (request.headers.authorization !== undefined) request.caller = await options.gate.callerOf(request);
      },
      preHandler: async (request: FastifyRequest) => authorize(request),
      handler: async (request, reply) => answer(request, reply),
    });

    async function authorize(request: FastifyRequest) {
      const rpc = rpcOf(request.body);
      const skill = rpc.send && rpc.message ? namedSkill(skills, rawDataParts(rpc.message, isLegacy(headerOf(request, VERSION_HEADER)))) : undefined;
      if (!request.caller) {
        const continuing = rpc.send && rpc.message !== undefined && taskIdOf(rpc.message) !== '' && isRecord(rpc.message.metadata) && typeof rpc.message.metadata[X402_STATUS] === 'string';
        const paying = rpc.send && (skill?.payableWithX402 === true || continuing);
        if (paying && requestedExtensions(request).includes(X402_EXTENSION_URI)) return;
        try {
          await options.gate.callerOf(request);
        } catch (err) {
          if (!paying || !(err instanceof Problem) || err.status !== 401) throw err;
          const how = `Without one, ${skill?.id ?? 'the task'} is paid per call with the x402 extension: name ${X402_EXTENSION_URI} in the A2A-Extensions header.`;
          throw new Problem('unauthorized', `${err.detail} ${how}`, { headers: err.headers, extensions: err.extensions });
        }
        return;
      }
      // The gate's own refusal, exactly as over HTTP: 403 insufficient_scope with its challenge.
      if (skill?.scope && !request.caller.scopes.has(skill.scope)) request.caller = await options.gate.callerOf(request, skill.scope);
    }

    async function answer(request: FastifyRequest, reply: FastifyReply) {
      const { card, transport, legacyTransport } = ready();
      const version = headerOf(request, VERSION_HEADER);
      const legacy = isLegacy(version);
      const mapError = legacy ? LegacyJsonRpcTransportHandler.mapToLegacyJSONRPCError : JsonRpcTransportHandler.mapToJSONRPCError;
      const rpc = rpcOf(request.body);
      const refuse = (err: Error) => reply.type('application/json').send({ jsonrpc: '2.0', id: rpc.id, error: mapError(err) });
      const context = new ServerCallContext({
        requestedExtensions: requestedExtensions(request, legacy),
        user: request.caller ? new CallerUser(request.caller) : new UnauthenticatedUser(),
        requestedVersion: version,
        state: new Map<string, unknown>([[REQUEST_FACTS, { requestId: request.id, log: request.log, address: clientAddress(request) } satisfies RequestFacts]]),
      });
      try {
        validateVersion(context.requestedVersion, card, 'JSONRPC');
      } catch (err) {
        return refuse(err as Error);
      }
      // One request object: a JSON string would be parsed again by the SDK, past the access check.
      if (!isRecord(request.body)) return refuse(new RequestMalformedError('The body must be one JSON-RPC 2.0 request object.'));
      if (nestsDeeper(request.body, MAX_JSON_DEPTH)) return refuse(new RequestMalformedError(`The request nests arrays and objects more than ${MAX_JSON_DEPTH} deep.`));
      if (STREAMING.has(rpc.method)) return refuse(new UnsupportedOperationError(`${rpc.method}: every skill answers at once; send the message with ${legacy ? 'message/send' : 'SendMessage'}.`));
      // The SDK reads parts without checking their shape; a malformed one is refused here, by name.
      const malformed = rpc.send && request.body.jsonrpc === '2.0' ? malformedMessage(rpc.message) : undefined;
      if (malformed) return refuse(new RequestMalformedError(malformed));
      const response = await (legacy ? legacyTransport : transport).handle(request.body, context);
      if (Symbol.asyncIterator in response) throw new Error('The A2A endpoint serves no streams.');
      // The SDK answers an error of its own with that error's message: logged here, not sent.
      if (isRecord(response.error) && response.error.code === A2A_ERROR_CODE.INTERNAL_ERROR) {
        request.log.error({ rpcError: response.error }, 'A2A request failed');
        response.error = { code: A2A_ERROR_CODE.INTERNAL_ERROR, message: `The request could not be answered (request ${request.id}).` };
      }
      const activated = context.activatedExtensions ?? [];
      if (activated.length > 0) reply.header(legacy ? LEGACY_EXTENSIONS_HEADER : EXTENSIONS_HEADER, Extensions.toServiceParameter(activated));
      return reply.type('application/json').send(response);
    }
  };
}

/**
 * The SDK's request handler, with the messages checked first: a new message must name a skill
 * with an input its schema takes, and a message answering a task must carry the payment (or
 * decline it). A refusal is the JSON-RPC error "invalid params" naming what is wrong; nothing is
 * run, stored or remembered.
 */
class RestockRequestHandler extends DefaultRequestHandler {
  constructor(
    card: AgentCard,
    store: ExpiringTaskStore,
    executor: RestockExecutor,
    private readonly skills: Map<string, Skill>,
    private readonly baseUrl: string,
    pushStore?: DurablePushStore,
  ) {
    // No task is left running, and a task waiting for payment needs no live event bus. Pushes go
    // through the outgoing-webhooks queue (its guard, signatures, retries), never the SDK's fetch.
    super(card, store, executor, undefined, pushStore, pushStore ? queuedPushSender : undefined, undefined, undefined, { keepBusAliveStates: [] });
  }

  override async sendMessage(params: SendMessageRequest, context: ServerCallContext): Promise<Message | Task> {
    const message = params.message;
    if ((message?.referenceTaskIds?.length ?? 0) > MAX_REFERENCED_TASKS) {
      throw new RequestMalformedError(`A message may reference at most ${MAX_REFERENCED_TASKS} tasks (referenceTaskIds); no skill reads them.`);
    }
    if (message?.taskId) {
      const payment = clientPayment(message.metadata);
      if (payment.kind === 'none') throw new RequestMalformedError(`A message naming a task answers its request for payment: send x402.payment.status "payment-submitted" with x402.payment.payload, or "payment-rejected".`);
      if (payment.kind === 'malformed') throw new RequestMalformedError(payment.message);
    } else if (message) {
      const call = readSkillCall(this.skills, dataParts(message));
      if (!call.ok) {
        const problem = call.errors ? 'validation-failed' : 'malformed-request';
        throw new RequestMalformedError({
          message: call.message,
          metadata: { problemType: problemTypeUri(this.baseUrl, problem), ...(call.errors ? { pointers: call.errors.map((e) => e.pointer).join(' ') } : {}) },
        });
      }
    }
    return super.sendMessage(params, context);
  }
}

interface OpenApiDocument {
  paths?: Record<string, Record<string, { operationId?: string; tags?: string[]; security?: Array<Record<string, string[]>> }>>;
}

/** The operations of the app's OpenAPI document, by `operationId`. */
function operationsOf(document: OpenApiDocument): Map<string, OperationDescription> {
  const operations = new Map<string, OperationDescription>();
  for (const [path, item] of Object.entries(document.paths ?? {})) {
    for (const [method, operation] of Object.entries(item)) {
      if (!operation.operationId) continue;
      const scope = operation.security?.map((requirement) => Object.values(requirement)[0]?.[0]).find(Boolean);
      operations.set(operation.operationId, { method: method.toUpperCase(), path, tags: operation.tags ?? [], ...(scope ? { scope } : {}) });
    }
  }
  return operations;
}

/** A JSON-RPC request as far as the access check needs it, read without trusting its shape. */
function rpcOf(body: unknown): { id: string | number | null; method: string; send: boolean; message?: Record<string, unknown> } {
  const rpc = isRecord(body) ? body : {};
  const method = typeof rpc.method === 'string' ? rpc.method : '';
  const id = typeof rpc.id === 'string' || typeof rpc.id === 'number' ? rpc.id : null;
  const message = isRecord(rpc.params) && isRecord(rpc.params.message) ? rpc.params.message : undefined;
  return { id, method, send: SEND.has(method), ...(message ? { message } : {}) };
}

/**
 * The data parts of a message on the wire, read as the SDK will read them: `{"kind": "data",
 * "data": ...}` in 0.3; in 1.0 a part with `data` and none of the content fields read before it.
 */
function rawDataParts(message: Record<string, unknown>, legacy: boolean): unknown[] {
  const parts = Array.isArray(message.parts) ? message.parts.filter(isRecord) : [];
  const set = (value: unknown) => value !== null && value !== undefined;
  const isData = (part: Record<string, unknown>) => (legacy ? part.kind === 'data' : set(part.data) && !set(part.text) && !set(part.raw) && !set(part.url));
  return parts.filter(isData).map((part) => part.data);
}

function taskIdOf(message: Record<string, unknown>): string {
  const id = message.taskId ?? message.task_id;
  return typeof id === 'string' ? id : '';
}

/** Why a message cannot be read at all, before the SDK reads it. */
function malformedMessage(message: Record<string, unknown> | undefined): string | undefined {
  if (!message) return 'params.message is required: a message with one data part {"skill": "<skill id>", "input": {...}}.';
  if (!Array.isArray(message.parts) || message.parts.length === 0) return 'message.parts must be a non-empty array of parts.';
  const bad = message.parts.findIndex((part) => !isRecord(part));
  if (bad >= 0) return `message.parts[${bad}] must be an object (a text or data part).`;
  if (message.metadata !== undefined && !isRecord(message.metadata)) return 'message.metadata must be an object.';
  return undefined;
}

/** Whether a parsed JSON value nests arrays and objects more than `limit` deep, found without recursion. */
function nestsDeeper(value: unknown, limit: number): boolean {
  const pending: Array<{ value: object; depth: number }> = [];
  if (typeof value === 'object' && value !== null) pending.push({ value, depth: 1 });
  for (let next = pending.pop(); next; next = pending.pop()) {
    if (next.depth > limit) return true;
    for (const child of Object.values(next.value)) {
      if (typeof child === 'object' && child !== null) pending.push({ value: child, depth: next.depth + 1 });
    }
  }
  return false;
}

function headerOf(request: FastifyRequest, name: string): string | undefined {
  const value = request.headers[name];
  const first = Array.isArray(value) ? value[0] : value;
  return first?.trim() || undefined;
}

/** A client that names no version speaks 0.3 (the 1.0 specification says so, and the SDK serves it so). */
function isLegacy(version: string | undefined): boolean {
  return version === undefined || version === '0.3' || version.startsWith('0.');
}

function requestedExtensions(request: FastifyRequest, legacy = isLegacy(headerOf(request, VERSION_HEADER))): string[] {
  const value = legacy ? (headerOf(request, LEGACY_EXTENSIONS_HEADER) ?? headerOf(request, EXTENSIONS_HEADER)) : headerOf(request, EXTENSIONS_HEADER);
  return Extensions.parseServiceParameter(value);
}
