import { ProtocolError, ProtocolErrorCode, requireScopes, ResourceNotFoundError, type McpServer, type ServerContext } from '@modelcontextprotocol/server';
import { subscriptionIdSchema, type Subscription } from '../alerts/schemas.ts';
import type { SubscriptionService } from '../alerts/service.ts';
import type { ConversionService } from '../conversions/service.ts';
import type { Caller } from '../core/http/caller.ts';
import { Problem } from '../core/problems.ts';
import { callerIn } from './caller.ts';

/** Each alert subscription the caller may read is a resource at this URI (an RFC 6570 template). */
export const SUBSCRIPTION_URI_TEMPLATE = 'restock://subscriptions/{subscriptionId}';
const SUBSCRIPTION_URI = /^restock:\/\/subscriptions\/([^/?#]*)$/;
/** Resources one `resources/list` answer names at most; the rest follow its `nextCursor`. */
export const RESOURCES_PER_PAGE = 50;
const JSON_TYPE = 'application/json';
/** Methods that read subscriptions, and so need the scope of their HTTP read (the template list only describes them). */
const READING_METHODS = new Set(['resources/list', 'resources/read', 'resources/subscribe', 'resources/unsubscribe']);

export function subscriptionUri(subscriptionId: string): string {
  return `restock://subscriptions/${subscriptionId}`;
}

/** The subscription a resource URI names; undefined for any other URI. */
export function subscriptionIdIn(uri: string): string | undefined {
  const id = SUBSCRIPTION_URI.exec(uri)?.[1];
  return id !== undefined && subscriptionIdSchema.safeParse(id).success ? id : undefined;
}

/** What the resources read; each service decides who may see what, from the caller it is given. */
export interface SubscriptionReads {
  subscriptions: Pick<SubscriptionService, 'getSubscription' | 'listSubscriptions'>;
  news: Pick<ConversionService, 'subscriptionNews'>;
}

/**
 * Where one connection's `resources/subscribe` and `resources/unsubscribe` land: its session,
 * which is told of the resource's updates, or, without a session, a refusal saying why.
 */
export interface Following {
  follow(uri: string): void;
  unfollow(uri: string): void;
}

export interface ResourceServing extends SubscriptionReads {
  following: Following;
  /** The scope of the subscriptions' HTTP read (getSubscription), which every reading method needs. */
  scope: string;
}

/**
 * Alert subscriptions as MCP resources: `resources/templates/list` names the template,
 * `resources/list` the caller's subscriptions a page at a time, `resources/read` answers one as
 * JSON (the HTTP read's subscription and its news so far), and `resources/subscribe` has the
 * session told of its updates (`notifications/resources/updated`, sent by the sessions).
 */
export function serveSubscriptionResources(server: McpServer, serving: ResourceServing): void {
  const { subscriptions, following } = serving;
  const low = server.server;
  low.registerCapabilities({ resources: { subscribe: true } });
  requireScopeToRead(server, serving.scope);

  low.setRequestHandler('resources/templates/list', () => ({
    resourceTemplates: [
      {
        uriTemplate: SUBSCRIPTION_URI_TEMPLATE,
        name: 'subscription',
        title: 'An alert subscription and its news',
        description: 'A back-in-stock alert subscription you may read (as get_subscription), with its news so far: the product back in stock for it, each alert sent, clicked, an order credited to it.',
        mimeType: JSON_TYPE,
      },
    ],
  }));

  low.setRequestHandler('resources/list', async (request, ctx) => {
    const after = cursorIn(request.params?.cursor);
    const page = await served(() => subscriptions.listSubscriptions(callerOf(ctx), after, RESOURCES_PER_PAGE));
    return { resources: page.subscriptions.map(resourceOf), ...(page.next === undefined ? {} : { nextCursor: page.next }) };
  });

  low.setRequestHandler('resources/read', async (request, ctx) => {
    const { uri } = request.params;
    const id = mustName(uri);
    const document = await served(() => documentOf(serving, callerOf(ctx), id), uri);
    return { contents: [{ uri, mimeType: JSON_TYPE, text: JSON.stringify(document) }] };
  });

  low.setRequestHandler('resources/subscribe', async (request, ctx) => {
    const { uri } = request.params;
    const id = mustName(uri);
    // Only what the caller may read: another's subscription answers as a missing one.
    await served(() => subscriptions.getSubscription(id, callerOf(ctx)), uri);
    following.follow(subscriptionUri(id));
    return {};
  });

  low.setRequestHandler('resources/unsubscribe', (request) => {
    following.unfollow(request.params.uri);
    return {};
  });
}

/**
 * The SDK asks a tool (`tools/call`) or a registered resource (`resources/read`) for its scope
 * challenge, nothing for listing or subscribing: every reading method here asks for the HTTP
 * read's scope, refused as a tool is (HTTP 403 `insufficient_scope`, from the transport).
 */
function requireScopeToRead(server: McpServer, scope: string): void {
  const others = server.resolveScopeChallenge;
  const needed = requireScopes(scope);
  server.resolveScopeChallenge = (context) => (READING_METHODS.has(context.request.method) ? needed(context) : others(context));
}

/** A subscription as its HTTP read answers it, with its news so far in its callbacks' words. */
async function documentOf({ subscriptions, news }: SubscriptionReads, caller: Caller, id: string) {
  const subscription = await subscriptions.getSubscription(id, caller);
  const told = await news.subscriptionNews(caller, id);
  return { ...subscription, news: told.map(({ type, occurredAt, data }) => ({ type, occurredAt, ...data })) };
}

function resourceOf(subscription: Subscription) {
  const product = subscription.variantId ?? subscription.productId;
  return {
    uri: subscriptionUri(subscription.subscriptionId),
    name: subscription.subscriptionId,
    title: subscription.shop ? `Alert for ${product} at ${subscription.shop}` : `Alert for ${product}`,
    description: `Status: ${subscription.status}`,
    mimeType: JSON_TYPE,
  };
}

/** The endpoint lets no request without a token reach a reading method (the route answers 401). */
function callerOf(ctx: ServerContext): Caller {
  const caller = callerIn(ctx);
  if (!caller) throw new ProtocolError(ProtocolErrorCode.InvalidRequest, 'Reading subscriptions needs an access token.');
  return caller;
}

function mustName(uri: string): string {
  const id = subscriptionIdIn(uri);
  if (id === undefined) throw new ResourceNotFoundError(uri);
  return id;
}

/** A cursor is the last subscription id of the page before; anything else was not given by us. */
function cursorIn(cursor: string | undefined): string | undefined {
  if (cursor === undefined || subscriptionIdSchema.safeParse(cursor).success) return cursor;
  throw new ProtocolError(ProtocolErrorCode.InvalidParams, 'This cursor was not given by resources/list: start again without one.');
}

/**
 * A service's refusal as a JSON-RPC error: not found (or not the caller's, which answers the
 * same) is the resource-not-found error; any other carries the API's problem details.
 */
async function served<T>(read: () => Promise<T>, uri?: string): Promise<T> {
  try {
    return await read();
  } catch (err) {
    if (!(err instanceof Problem)) throw err;
    if (err.status === 404 && uri !== undefined) throw new ResourceNotFoundError(uri);
    const code = err.status >= 500 ? ProtocolErrorCode.InternalError : ProtocolErrorCode.InvalidRequest;
    throw new ProtocolError(code, `${err.title}: ${err.detail}`, { type: err.slug, title: err.title, status: err.status, detail: err.detail });
  }
}
