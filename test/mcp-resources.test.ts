// Longer than most files on purpose: the subscription resources end to end (listing, reading, news over a session, across processes) and every bound on the sessions, on both databases.
/**
 * Alert subscriptions as MCP resources, with the official MCP client over real HTTP: the
 * template, the caller's own list (paged), a read that is the HTTP read's subscription and its
 * news, and `notifications/resources/updated` on the session's stream when the news changes
 * (restock sent, click, order), also when the worker that sends the alert is another process.
 * Tenancy as the HTTP read decides it, the read's scope, the sessions' bounds and their tokens.
 */
import assert from 'node:assert/strict';
import { Client, InsufficientScopeError, ResourceNotFoundError, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { McpServer } from '@modelcontextprotocol/server';
import { after, before, describe, it } from './fixtures/suites.ts';
import { call, expectStatus, registerAnonymousAgent, storeWithAgent, uniqueEmail, type RegisteredAgent, type StoreAgent } from './fixtures/agents.ts';
import { dialectSkip, startListeningTestApp, testDialects, type TestApp } from './fixtures/app.ts';
import { failOnLeakedHandles } from './fixtures/leaks.ts';
import { registerAgent } from './fixtures/oauth.ts';
import { REDIS_URL, redisAvailable } from './fixtures/redis.ts';
import { changeChannels, startTwoProcesses, type TwoProcesses } from './fixtures/two-processes.ts';
import { RESOURCES_PER_PAGE, SUBSCRIPTION_URI_TEMPLATE, subscriptionUri, type Following } from '../src/mcp/resources.ts';
import { McpSessions, SESSION_LIMITS } from '../src/mcp/sessions.ts';

failOnLeakedHandles();

const redisUp = await redisAvailable();
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
let serial = 0;

/** A connected client, and the resource URIs the server said were updated, in order. */
interface Connected {
  client: Client;
  transport: StreamableHTTPClientTransport;
  updates: string[];
}

interface Clients {
  connect(origin: string, token: string, withProvider?: boolean): Promise<Connected>;
  closeAll(): Promise<void>;
}

function clients(): Clients {
  const open: Connected[] = [];
  return {
    async connect(origin, token, withProvider = false) {
      const client = new Client({ name: 'restock-resources-test', version: '1.0.0' });
      const url = new URL(`${origin}/mcp`);
      const transport = withProvider
        ? new StreamableHTTPClientTransport(url, { authProvider: { token: async () => token } })
        : new StreamableHTTPClientTransport(url, { requestInit: { headers: { authorization: `Bearer ${token}` } } });
      const updates: string[] = [];
      client.setNotificationHandler('notifications/resources/updated', (notification) => void updates.push(notification.params.uri));
      await client.connect(transport);
      const connected = { client, transport, updates };
      open.push(connected);
      return connected;
    },
    async closeAll() {
      await Promise.all(open.splice(0).map(({ client }) => client.close()));
    },
  };
}

/** Waits until the server said `uri` was updated after the first `seen` updates. */
async function updated(connected: Connected, uri: string, seen: number): Promise<number> {
  const until = Date.now() + 10_000;
  while (!connected.updates.slice(seen).includes(uri)) {
    if (Date.now() > until) assert.fail(`no notifications/resources/updated for ${uri}; heard ${JSON.stringify(connected.updates)}`);
    await sleep(20);
  }
  return connected.updates.length;
}

interface Document {
  subscriptionId: string;
  status: string;
  shop: string | null;
  email: string;
  news: Array<{ type: string; occurredAt: string; alertId?: string; attribution?: string }>;
}

async function read(client: Client, uri: string): Promise<Document> {
  const { contents } = await client.readResource({ uri });
  assert.equal(contents.length, 1);
  const [content] = contents as Array<{ uri: string; mimeType?: string; text: string }>;
  assert.equal(content!.uri, uri);
  assert.equal(content!.mimeType, 'application/json');
  return JSON.parse(content!.text) as Document;
}

/** A product the store says is sold out, to be subscribed to. */
async function soldOut(app: TestApp['app'], store: StoreAgent) {
  const productId = `gid://shopify/Product/${600 + ++serial}`;
  const variantId = `gid://shopify/ProductVariant/${800 + serial}`;
  expectStatus(await call(app, 'POST', `/api/v1/stores/${store.domain}/inventory`, { token: store.token, body: { items: [{ productId, variantId, available: 0, productTitle: 'Green mug' }] } }), 200);
  return { productId, variantId };
}

function restock(app: TestApp['app'], store: StoreAgent, product: { productId: string; variantId: string }) {
  return call(app, 'POST', `/api/v1/stores/${store.domain}/inventory`, { token: store.token, body: { items: [{ ...product, available: 5, productTitle: 'Green mug' }] } });
}

/** Subscribes a shopper through the subscribe_alert tool, as the agent. */
async function subscribeOverMcp(client: Client, store: StoreAgent, product: { productId: string; variantId: string }, email = uniqueEmail('shopper')) {
  const result = await client.callTool({ name: 'subscribe_alert', arguments: { ...product, email, shop: store.domain } });
  assert.equal(result.isError, undefined, JSON.stringify(result));
  return { subscriptionId: (result.structuredContent as { subscriptionId: string }).subscriptionId, email };
}

/** A JSON-RPC message POSTed as it is, with the headers given. */
async function rpc(origin: string, headers: Record<string, string>, body: unknown) {
  const res = await fetch(`${origin}/mcp`, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers }, body: typeof body === 'string' ? body : JSON.stringify(body) });
  const text = await res.text();
  return { status: res.status, headers: res.headers, text };
}

for (const dialect of testDialects()) {
  describe(`MCP subscription resources on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    let t: TestApp;
    let base: string;
    let store: StoreAgent;
    let agent: RegisteredAgent;
    const peers = clients();

    before(async () => {
      ({ t, base } = await startListeningTestApp(dialect));
      store = await storeWithAgent(t.app, t.database, 'resources');
      agent = await registerAnonymousAgent(t.app);
    });
    after(async () => {
      await peers.closeAll();
      await t.close();
    });

    it("lists and reads an agent's subscription, and tells its session of the news: back in stock and sent, clicked, an order credited", async () => {
      const mcp = await peers.connect(base, agent.token);
      assert.ok(mcp.transport.sessionId, 'an initialize with a token opens a session');
      assert.equal(mcp.client.getServerCapabilities()?.resources?.subscribe, true);
      const { resourceTemplates } = await mcp.client.listResourceTemplates();
      assert.deepEqual(resourceTemplates.map((template) => [template.uriTemplate, template.mimeType]), [[SUBSCRIPTION_URI_TEMPLATE, 'application/json']]);

      const product = await soldOut(t.app, store);
      const { subscriptionId, email } = await subscribeOverMcp(mcp.client, store, product);
      const uri = subscriptionUri(subscriptionId);
      const { resources } = await mcp.client.listResources();
      assert.ok(resources.some((resource) => resource.uri === uri && resource.mimeType === 'application/json'), JSON.stringify(resources));

      // The document is the HTTP read's subscription, with its news so far: none yet.
      const waiting = await read(mcp.client, uri);
      const overHttp = expectStatus(await call(t.app, 'GET', `/api/v1/alerts/${subscriptionId}`, { token: agent.token }), 200);
      assert.deepEqual({ ...waiting, news: undefined }, { ...overHttp, news: undefined });
      assert.equal(waiting.status, 'active');
      assert.deepEqual(waiting.news, []);

      await mcp.client.subscribeResource({ uri });
      let seen = 0;
      expectStatus(await restock(t.app, store, product), 200);
      await t.runWorker();
      seen = await updated(mcp, uri, seen);
      const sent = await read(mcp.client, uri);
      assert.equal(sent.status, 'notified');
      assert.deepEqual(sent.news.map((news) => news.type), ['subscription.restocked', 'alert.sent']);
      const alertId = sent.news[1]!.alertId!;

      // The shopper clicks the alert's link, then buys: each is news, heard and read.
      const mail = await t.database.db.selectFrom('mail_outbox').selectAll().where('recipient', '=', email).execute();
      const link = mail.map((row) => /https?:\/\/[^\s"<>]*\/r\/[^\s"<>]+/.exec(`${row.text_body ?? ''} ${row.html_body ?? ''}`)?.[0]).find(Boolean);
      assert.ok(link, 'the alert carries a tracked link');
      const { pathname, search } = new URL(link!);
      const followed = await t.app.inject({ method: 'GET', url: `${pathname}${search}`, headers: { 'user-agent': 'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 Chrome/126.0 Safari/537.36' } });
      assert.equal(followed.statusCode, 302, followed.body);
      seen = await updated(mcp, uri, seen);
      assert.deepEqual((await read(mcp.client, uri)).news.map((news) => news.type), ['subscription.restocked', 'alert.sent', 'alert.clicked']);

      const order = { orderId: `resources-${serial}`, email, placedAt: new Date().toISOString(), currency: 'USD', lines: [{ lineId: 'l1', ...product, quantity: 1, amountMinor: 2500 }] };
      expectStatus(await call(t.app, 'POST', `/api/v1/stores/${store.domain}/orders`, { token: store.token, body: order }), 200);
      await updated(mcp, uri, seen);
      const converted = await read(mcp.client, uri);
      assert.deepEqual(converted.news.map((news) => news.type), ['subscription.restocked', 'alert.sent', 'alert.clicked', 'order.attributed']);
      assert.deepEqual(converted.news.slice(2).map((news) => [news.alertId, news.attribution]), [[alertId, undefined], [alertId, 'direct']]);
      for (const news of converted.news) assert.equal((news as Record<string, unknown>).email, undefined, 'no address in the news');
    });

    it('tells only the sessions that subscribed, and no longer after unsubscribing', async () => {
      const following = await peers.connect(base, agent.token);
      const other = await peers.connect(base, agent.token);
      const product = await soldOut(t.app, store);
      const { subscriptionId } = await subscribeOverMcp(following.client, store, product);
      const uri = subscriptionUri(subscriptionId);
      await following.client.subscribeResource({ uri });
      await following.client.unsubscribeResource({ uri });
      await following.client.subscribeResource({ uri });
      const unfollowing = await peers.connect(base, agent.token);
      await unfollowing.client.subscribeResource({ uri });
      await unfollowing.client.unsubscribeResource({ uri });
      expectStatus(await restock(t.app, store, product), 200);
      await t.runWorker();
      await updated(following, uri, 0);
      await sleep(200);
      assert.deepEqual(other.updates, [], 'a session that did not subscribe hears nothing');
      assert.deepEqual(unfollowing.updates, [], 'nor one that unsubscribed');
    });

    it('lets an agent bound to no store see only its own: another agent’s subscription is not found, as a missing one, and not listed', async () => {
      const mine = await peers.connect(base, agent.token);
      const { subscriptionId } = await subscribeOverMcp(mine.client, store, await soldOut(t.app, store));
      const uri = subscriptionUri(subscriptionId);
      const stranger = await registerAnonymousAgent(t.app);
      const theirs = await peers.connect(base, stranger.token);
      const missing = subscriptionUri('sub_00000000000000000000000000');
      const refusals: string[] = [];
      for (const target of [uri, missing]) {
        await assert.rejects(theirs.client.readResource({ uri: target }), (err: unknown) => {
          assert.ok(err instanceof ResourceNotFoundError, String(err));
          assert.equal(err.uri, target);
          refusals.push(err.message.replace(target, '<uri>'));
          return true;
        });
        await assert.rejects(theirs.client.subscribeResource({ uri: target }), ResourceNotFoundError);
      }
      assert.equal(refusals[0], refusals[1], "another's subscription answers exactly as a missing one");
      assert.ok(!(await theirs.client.listResources()).resources.some((resource) => resource.uri === uri));
      // The store's own agent sees its store's subscriptions, whoever made them.
      const storeSide = await peers.connect(base, store.token);
      assert.equal((await read(storeSide.client, uri)).subscriptionId, subscriptionId);
      assert.ok((await storeSide.client.listResources()).resources.some((resource) => resource.uri === uri));
    });

    it('lists a page at a time, with a cursor the server gave, and refuses one it did not', async () => {
      const lister = await registerAnonymousAgent(t.app);
      const made = new Set<string>();
      for (let i = 0; i <= RESOURCES_PER_PAGE; i++) {
        // Half for the store, half for no named store: an agent bound to no store holds at most 50 waiting subscriptions for each.
        const body = { productId: `gid://shopify/Product/${90_000 + i}`, email: uniqueEmail('paged'), ...(i % 2 === 0 ? { shop: store.domain } : {}) };
        made.add(expectStatus(await call(t.app, 'POST', '/api/v1/alerts/subscribe', { token: lister.token, body }), 200).subscriptionId);
      }
      const first = await rpc(base, { authorization: `Bearer ${lister.token}` }, { jsonrpc: '2.0', id: 1, method: 'resources/list', params: {} });
      const page = JSON.parse(first.text).result as { resources: Array<{ uri: string }>; nextCursor?: string };
      assert.equal(page.resources.length, RESOURCES_PER_PAGE);
      assert.ok(page.nextCursor);
      const mcp = await peers.connect(base, lister.token);
      const rest = await mcp.client.listResources({ cursor: page.nextCursor! });
      assert.equal(rest.resources.length, 1);
      assert.equal(rest.nextCursor, undefined);
      assert.deepEqual(new Set([...page.resources, ...rest.resources].map((resource) => resource.uri)), new Set([...made].map(subscriptionUri)));
      assert.deepEqual(new Set((await mcp.client.listResources()).resources.map((resource) => resource.uri)), new Set([...made].map(subscriptionUri)), 'the client walks every page');
      await assert.rejects(mcp.client.listResources({ cursor: '../../etc' }), /cursor was not given by resources\/list/);
      await assert.rejects(mcp.client.readResource({ uri: 'https://example.com/sub_1' }), ResourceNotFoundError);
    });

    it('needs the HTTP read’s scope for every reading method, refused as a tool is (403 insufficient_scope)', async () => {
      const writer = await registerAgent(t.app, { scope: 'api:write' });
      const mcp = await peers.connect(base, writer.token, true);
      const uri = subscriptionUri('sub_00000000000000000000000000');
      for (const attempt of [() => mcp.client.listResources(), () => mcp.client.readResource({ uri }), () => mcp.client.subscribeResource({ uri })]) {
        await assert.rejects(attempt(), (err: unknown) => err instanceof InsufficientScopeError && err.requiredScope === 'api:read' && String(err.resourceMetadataUrl).endsWith('/.well-known/oauth-protected-resource/mcp'));
      }
      // Learning the template needs nothing, not even a token.
      const anonymous = await rpc(base, {}, { jsonrpc: '2.0', id: 1, method: 'resources/templates/list', params: {} });
      assert.equal(anonymous.status, 200);
      assert.equal(JSON.parse(anonymous.text).result.resourceTemplates[0].uriTemplate, SUBSCRIPTION_URI_TEMPLATE);
      const listing = await rpc(base, {}, { jsonrpc: '2.0', id: 1, method: 'resources/list', params: {} });
      assert.equal(listing.status, 401);
    });

    it("checks a session's token on every request: none is 401, another agent's is 404, and a stateless request may not subscribe", async () => {
      const mcp = await peers.connect(base, agent.token);
      const sessionId = mcp.transport.sessionId!;
      const stranger = await registerAnonymousAgent(t.app);
      for (const method of ['GET', 'DELETE', 'POST'] as const) {
        const body = method === 'POST' ? JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }) : null;
        const headers = { 'mcp-session-id': sessionId, accept: 'application/json, text/event-stream', ...(body ? { 'content-type': 'application/json' } : {}) };
        const none = await fetch(`${base}/mcp`, { method, headers, body });
        assert.equal(none.status, 401, `${method} without a token`);
        assert.match(none.headers.get('www-authenticate') ?? '', /resource_metadata="[^"]+\/\.well-known\/oauth-protected-resource\/mcp"/);
        assert.match(none.headers.get('content-type') ?? '', /^application\/problem\+json/);
        await none.arrayBuffer();
        const another = await fetch(`${base}/mcp`, { method, headers: { ...headers, authorization: `Bearer ${stranger.token}` }, body });
        assert.equal(another.status, 404, `${method} with another agent's token`);
        assert.equal((await another.json()).error.code, -32001);
      }
      // The session still serves its own agent, and a malformed message in it is a JSON-RPC error, not a failure.
      assert.deepEqual(await mcp.client.ping(), {});
      const malformed = await rpc(base, { authorization: `Bearer ${agent.token}`, 'mcp-session-id': sessionId, 'mcp-protocol-version': mcp.transport.protocolVersion! }, { jsonrpc: '2.0', id: 7, method: 'resources/read', params: { uri: 42 } });
      assert.ok(malformed.status < 500, malformed.text);
      assert.ok(JSON.parse(malformed.text).error, malformed.text);
      const notJson = await rpc(base, { authorization: `Bearer ${agent.token}`, 'mcp-session-id': sessionId }, '{"jsonrpc":');
      assert.equal(notJson.status, 400);
      assert.match(notJson.headers.get('content-type') ?? '', /^application\/problem\+json/);
      // Without a session, a subscription has no stream to be told on: refused, saying how to get one.
      const { subscriptionId } = expectStatus(await call(t.app, 'POST', '/api/v1/alerts/subscribe', { token: agent.token, body: { productId: 'gid://shopify/Product/4711', email: uniqueEmail('stateless') } }), 200);
      const stateless = await rpc(base, { authorization: `Bearer ${agent.token}` }, { jsonrpc: '2.0', id: 1, method: 'resources/subscribe', params: { uri: subscriptionUri(subscriptionId) } });
      assert.equal(stateless.status, 200);
      assert.match(JSON.parse(stateless.text).error.message, /resources\/subscribe needs a session/);
    });

    it('bounds the sessions of one agent: beyond them a client is answered without a session, and told why when it subscribes', async () => {
      const busy = await registerAnonymousAgent(t.app);
      const held: Connected[] = [];
      for (let i = 0; i < SESSION_LIMITS.perAgent; i++) held.push(await peers.connect(base, busy.token));
      assert.equal(new Set(held.map((connected) => connected.transport.sessionId)).size, SESSION_LIMITS.perAgent, 'each its own session');
      const beyond = await peers.connect(base, busy.token);
      assert.equal(beyond.transport.sessionId, undefined, 'no session beyond the limit');
      assert.equal((await beyond.client.callTool({ name: 'get_health', arguments: {} })).isError, undefined, 'its tools still work, statelessly');
      const { subscriptionId } = await subscribeOverMcp(beyond.client, store, await soldOut(t.app, store));
      await assert.rejects(beyond.client.subscribeResource({ uri: subscriptionUri(subscriptionId) }), new RegExp(`holds ${SESSION_LIMITS.perAgent} MCP sessions, the most one agent may`));
      // Another agent is not held back by this one's sessions.
      assert.ok((await peers.connect(base, (await registerAnonymousAgent(t.app)).token)).transport.sessionId);
      // Ending one (DELETE) makes room.
      await held[0]!.transport.terminateSession();
      const next = await peers.connect(base, busy.token);
      assert.ok(next.transport.sessionId, 'a session again once one ended');
    });
  });

  // Not through SQLite alone: two processes on one file share no channel for news (docs/mcp.md#sessions), one process is the deployment then.
  for (const { channel, env } of changeChannels(dialect, redisUp, REDIS_URL).filter(({ channel }) => channel !== 'sqlite')) {
    describe(`MCP subscription news across processes on ${dialect}, through ${channel}`, { skip: dialectSkip(dialect) }, () => {
      let processes: TwoProcesses;
      const peers = clients();

      before(async () => {
        processes = await startTwoProcesses(dialect, env);
      });
      after(async () => {
        await peers.closeAll();
        await processes?.close();
      });

      it('tells the session one process holds of the alert another process sent', async () => {
        const { one, twoOrigin } = processes;
        const store = await storeWithAgent(one.app, one.database, 'across');
        const agent = await registerAnonymousAgent(one.app);
        const mcp = await peers.connect(twoOrigin, agent.token);
        const product = await soldOut(one.app, store);
        const { subscriptionId } = await subscribeOverMcp(mcp.client, store, product);
        const uri = subscriptionUri(subscriptionId);
        await mcp.client.subscribeResource({ uri });
        expectStatus(await restock(one.app, store, product), 200);
        // The first process's worker sends the alert; the second holds the session.
        await one.app.restock.worker.runUntilIdle();
        await updated(mcp, uri, 0);
        assert.equal((await read(mcp.client, uri)).status, 'notified');
      });
    });
  }
}

describe('the bounds of MCP sessions in memory', () => {
  /** A session whose server is a bare one, its following handed back to the test. */
  async function openIn(sessions: McpSessions, agentId: string) {
    let following: Following | undefined;
    const session = await sessions.open(agentId, (given) => {
      following = given;
      return new McpServer({ name: 'bounds-test', version: '1.0.0' });
    });
    return { session, following: following! };
  }

  it('holds at most its total and per-agent sessions, follows a bounded number of resources, and ends idle sessions unless a stream is open', async () => {
    const sessions = new McpSessions({ total: 3, perAgent: 2, followedPerSession: 2, idleMs: 40 });
    try {
      const first = await openIn(sessions, 'agt_a');
      const second = await openIn(sessions, 'agt_a');
      assert.ok(first.session && second.session);
      assert.equal((await openIn(sessions, 'agt_a')).session, undefined, 'per agent');
      assert.match(sessions.refusal('agt_a')!, /holds 2 MCP sessions/);
      assert.ok((await openIn(sessions, 'agt_b')).session);
      assert.equal((await openIn(sessions, 'agt_c')).session, undefined, 'in all');
      assert.match(sessions.refusal('agt_c')!, /holds 3 MCP sessions, the most it may/);
      assert.equal(sessions.find(first.session!.id, 'agt_b'), undefined, "another agent's session is not found");

      first.following.follow('restock://subscriptions/sub_1');
      first.following.follow('restock://subscriptions/sub_1');
      first.following.follow('restock://subscriptions/sub_2');
      assert.throws(() => first.following.follow('restock://subscriptions/sub_3'), /follows 2 resources, the most one session may/);
      first.following.unfollow('restock://subscriptions/sub_2');
      first.following.follow('restock://subscriptions/sub_3');

      sessions.streamOpened(first.session!);
      await sleep(100);
      assert.ok(sessions.find(first.session!.id, 'agt_a'), 'a session with its stream open stays');
      assert.equal(sessions.find(second.session!.id, 'agt_a'), undefined, 'an idle one ended');
      sessions.streamClosed(first.session!);
      await sleep(100);
      assert.equal(sessions.find(first.session!.id, 'agt_a'), undefined, 'idle once its stream closed');
      assert.equal(sessions.refusal('agt_a'), undefined, 'room again');
    } finally {
      sessions.close();
    }
  });
});

describe('which store events are news of a subscription on the change bus', () => {
  it('a sign-up confirmed after it waited is news; a new one, which no session can follow yet, costs no message', async () => {
    const { LocalChangeBus } = await import('../src/core/changes/bus.ts');
    const { SUBSCRIPTION_NEWS, subscriptionNewsKey } = await import('../src/core/changes/topics.ts');
    const { subscriptionNewsOnBus } = await import('../src/core/events.ts');
    const bus = new LocalChangeBus();
    const heard: string[] = [];
    bus.listen(SUBSCRIPTION_NEWS, { changed: (key) => heard.push(key), reset: () => {} });
    const created = (subscriptionId: string, confirmedAt: string | null) => ({
      storeDomain: 'news.myshopify.com',
      type: 'subscription.created' as const,
      id: `evt_news_${subscriptionId}`,
      occurredAt: '2026-11-30T00:00:00.000Z',
      data: { subscriptionId, confirmedAt },
    });
    const sink = subscriptionNewsOnBus(bus);
    await sink.announce(created('sub_new', null));
    assert.deepEqual(heard, []);
    await sink.announce(created('sub_confirmed', '2026-11-30T00:00:00.000Z'));
    assert.deepEqual(heard, [subscriptionNewsKey('sub_confirmed')]);
  });
});
