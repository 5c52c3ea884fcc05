/**
 * The MCP endpoint with the official MCP client (same SDK line) over real HTTP: tools listed
 * with the API's schemas, each called with the right scope, the wrong one (403), no token (401
 * with the metadata), and bad arguments (a tool error, nothing stored).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from './fixtures/suites.ts';
import { Client, InsufficientScopeError, StreamableHTTPClientTransport, UnauthorizedError } from '@modelcontextprotocol/client';
import { AccessTokens } from '../src/agents/access-tokens.ts';
import { expectStatus, storeWithAgent, uniqueDomain, uniqueEmail, type StoreAgent } from './fixtures/agents.ts';
import { dialectSkip, tableDigests, testDialects } from './fixtures/app.ts';
import { failOnLeakedHandles } from './fixtures/leaks.ts';
import { registerAgent, startListeningApp, storedSigningKeys, type ListeningApp } from './fixtures/oauth.ts';

failOnLeakedHandles();

const TOOLS = ['cancel_subscription', 'checkout_plan', 'get_alert_queue', 'get_health', 'get_performance', 'get_purchasing_view', 'get_stock_status', 'get_subscription', 'report_inventory', 'subscribe_alert'];

for (const dialect of testDialects()) {
  describe(`MCP on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    let service: ListeningApp;
    let writer: string;
    let reader: string;
    let store: StoreAgent;
    const clients: Client[] = [];

    before(async () => {
      service = await startListeningApp(dialect);
      writer = (await registerAgent(service.app)).token;
      reader = (await registerAgent(service.app, { scope: 'api:read' })).token;
      store = await storeWithAgent(service.app, service.database, 'mcp');
    });
    after(async () => {
      await Promise.all(clients.map((c) => c.close()));
      await service.close();
    });

    async function connect(token?: string, withProvider = false): Promise<Client> {
      const client = new Client({ name: 'restock-test', version: '1.0.0' });
      const url = new URL(`${service.baseUrl}/mcp`);
      const transport = withProvider
        ? new StreamableHTTPClientTransport(url, { authProvider: { token: async () => token } })
        : new StreamableHTTPClientTransport(url, token ? { requestInit: { headers: { authorization: `Bearer ${token}` } } } : {});
      await client.connect(transport);
      clients.push(client);
      return client;
    }

    it('initialises and lists every tool with input schemas from the API', async () => {
      const client = await connect(writer);
      const { tools } = await client.listTools();
      assert.deepEqual(tools.map((t) => t.name).sort(), TOOLS);
      const subscribe = tools.find((t) => t.name === 'subscribe_alert')!;
      assert.deepEqual([...(subscribe.inputSchema.required as string[])].sort(), ['email', 'productId']);
      assert.match(JSON.stringify(subscribe.inputSchema), /gid:\/\/shopify\/Product/);
      assert.ok(subscribe.outputSchema, 'results are structured');
    });

    it('subscribes over MCP, and the same subscription over HTTP is the same one', async () => {
      const client = await connect(writer);
      const args = { productId: 'gid://shopify/Product/4242', email: uniqueEmail('mcp') };
      const result = await client.callTool({ name: 'subscribe_alert', arguments: args });
      assert.equal(result.isError, undefined, JSON.stringify(result));
      const { subscriptionId, status } = result.structuredContent as { subscriptionId: string; status: string };
      assert.equal(status, 'active');
      const http = await fetch(`${service.baseUrl}/api/v1/alerts/subscribe`, {
        method: 'POST',
        headers: { authorization: `Bearer ${writer}`, 'content-type': 'application/json' },
        body: JSON.stringify(args),
      });
      assert.equal((await http.json()).subscriptionId, subscriptionId);
      const read = await client.callTool({ name: 'get_subscription', arguments: { subscriptionId } });
      assert.equal((read.structuredContent as { email: string }).email, args.email);
      const cancelled = await client.callTool({ name: 'cancel_subscription', arguments: { subscriptionId } });
      assert.equal((cancelled.structuredContent as { status: string }).status, 'cancelled');
    });

    it('checks out a plan, reads health, and gives store-bound agents their stock and queue and inventory reports', async () => {
      const client = await connect(store.token);
      const checkout = await client.callTool({ name: 'checkout_plan', arguments: { plan: 'starter', shop: store.domain } });
      assert.match((checkout.structuredContent as { checkoutUrl: string }).checkoutUrl, /\/checkout\/cs_/);
      const health = await client.callTool({ name: 'get_health', arguments: {} });
      assert.equal((health.structuredContent as { status: string }).status, 'ok');
      const productId = 'gid://shopify/Product/5151';
      const report = await client.callTool({ name: 'report_inventory', arguments: { shop: store.domain, items: [{ productId, available: 4 }] } });
      assert.equal(report.isError, undefined, JSON.stringify(report));
      const stock = await client.callTool({ name: 'get_stock_status', arguments: { shop: store.domain } });
      assert.ok((stock.structuredContent as { items: Array<{ productId: string }> }).items.some((i) => i.productId === productId));
      const queue = await client.callTool({ name: 'get_alert_queue', arguments: { shop: store.domain } });
      assert.equal(typeof (queue.structuredContent as { totalWaiting: number }).totalWaiting, 'number');
      // Another store's data answers as HTTP does: not found.
      const foreign = await client.callTool({ name: 'get_stock_status', arguments: { shop: uniqueDomain('foreign') } });
      assert.equal(foreign.isError, true);
      assert.equal((foreign.structuredContent as { status: number }).status, 404);
    });

    it('refuses a tool the token has no scope for with 403 insufficient_scope', async () => {
      const client = await connect(reader, true);
      const ok = await client.callTool({ name: 'get_health', arguments: {} });
      assert.equal(ok.isError, undefined);
      await assert.rejects(
        client.callTool({ name: 'subscribe_alert', arguments: { productId: 'gid://shopify/Product/1', email: uniqueEmail('x') } }),
        (err: unknown) => err instanceof InsufficientScopeError && err.requiredScope === 'api:write' && String(err.resourceMetadataUrl).endsWith('/.well-known/oauth-protected-resource/mcp'),
      );
      const writerClient = await connect(writer, true);
      await assert.rejects(
        writerClient.callTool({ name: 'report_inventory', arguments: { shop: store.domain, items: [{ productId: 'gid://shopify/Product/2', available: 1 }] } }),
        (err: unknown) => err instanceof InsufficientScopeError && err.requiredScope === 'inventory:alerts',
      );
    });

    it('without a token answers 401 pointing to the protected resource metadata, except to learn the tools and pay', async () => {
      const res = await fetch(`${service.baseUrl}/mcp`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'get_health', arguments: {} } }),
      });
      assert.equal(res.status, 401);
      assert.match(res.headers.get('www-authenticate') ?? '', /^Bearer .*resource_metadata="http:\/\/127\.0\.0\.1:\d+\/\.well-known\/oauth-protected-resource\/mcp"/);
      await res.arrayBuffer();
      // The official client without a token: it may list the tools (the paid ones are for it)...
      const anonymous = await connect(undefined, true);
      assert.equal((await anonymous.listTools()).tools.length, TOOLS.length);
      // ...and is told to authenticate for any other.
      await assert.rejects(anonymous.callTool({ name: 'get_stock_status', arguments: { shop: store.domain } }), (err: unknown) => err instanceof UnauthorizedError);
      const forged = await fetch(`${service.baseUrl}/mcp`, { method: 'POST', headers: { authorization: 'Bearer not.a.token', 'content-type': 'application/json' }, body: '{}' });
      assert.equal(forged.status, 401);
      assert.match(forged.headers.get('www-authenticate') ?? '', /error="invalid_token"/);
      await forged.arrayBuffer();
    });

    it('is listed in the API index and the OpenAPI document, with its metadata at its own path too', async () => {
      const index = expectStatus(await service.app.inject({ method: 'GET', url: '/api', headers: { authorization: `Bearer ${reader}` } }), 200);
      assert.deepEqual(index.mcp, { url: `${service.baseUrl}/mcp`, transport: 'streamable-http', authorization: `${service.baseUrl}/.well-known/oauth-protected-resource` });
      const doc = expectStatus(await service.app.inject({ method: 'GET', url: '/openapi.json' }), 200);
      assert.equal(doc['x-service-info'].mcp.url, `${service.baseUrl}/mcp`);
      // The endpoint is a resource of its own (RFC 9728 §3.3), protected as the API is.
      const root = expectStatus(await service.app.inject({ method: 'GET', url: '/.well-known/oauth-protected-resource' }), 200);
      const own = expectStatus(await service.app.inject({ method: 'GET', url: '/.well-known/oauth-protected-resource/mcp' }), 200);
      assert.deepEqual(own, { ...root, resource: `${service.baseUrl}/mcp`, resource_name: `${root.resource_name} MCP server` });
    });

    it('accepts only tokens issued for this API', async () => {
      // Signed with our own key, for our agent, but for another resource (RFC 8707 audience).
      const { keys } = await storedSigningKeys(service.database, service.config);
      const agentId = (await registerAgent(service.app)).id;
      const { token: elsewhere } = await new AccessTokens(keys, service.config.baseUrl, 'https://another.example/mcp').issue({ agentId, scopes: ['api:read', 'api:write'], ttlSeconds: 300 });
      // The same, minted for this API, is accepted: only the audience differs.
      const { token: here } = await new AccessTokens(keys, service.config.baseUrl, service.config.baseUrl).issue({ agentId, scopes: ['api:read', 'api:write'], ttlSeconds: 300 });
      const accepted = await connect(here);
      assert.equal((await accepted.callTool({ name: 'get_health', arguments: {} })).isError, undefined);
      const res = await fetch(`${service.baseUrl}/mcp`, { method: 'POST', headers: { authorization: `Bearer ${elsewhere}`, 'content-type': 'application/json' }, body: '{}' });
      assert.equal(res.status, 401);
      assert.match(res.headers.get('www-authenticate') ?? '', /error="invalid_token"/);
      await res.arrayBuffer();
    });

    /** Each tool, the scope docs/mcp.md says it needs, arguments it accepts, and arguments it must refuse. */
    function toolCases() {
      const shop = store.domain;
      const sub = 'sub_00000000000000000000000000';
      return [
        { name: 'subscribe_alert', scope: 'api:write', good: { productId: 'gid://shopify/Product/1', email: uniqueEmail('m') }, bad: [{ productId: 'not-a-gid', email: 'a@b.co' }, { productId: 'gid://shopify/Product/1', email: 'nope' }, { email: 'a@b.co' }] },
        { name: 'get_subscription', scope: 'api:read', good: { subscriptionId: sub }, bad: [{}, { subscriptionId: 42 }, { subscriptionId: '../etc' }] },
        { name: 'cancel_subscription', scope: 'api:write', good: { subscriptionId: sub }, bad: [{}, { subscriptionId: null }, { subscriptionId: 'sub_' + 'x'.repeat(500) }] },
        { name: 'checkout_plan', scope: 'api:write', good: { plan: 'starter', shop }, bad: [{ plan: 'platinum', shop }, { plan: 'starter', shop: 'not a shop' }, { plan: 'starter' }] },
        { name: 'get_stock_status', scope: 'api:read', good: { shop }, bad: [{}, { shop: 'evil_example.com' }, { shop: 7 }] },
        { name: 'get_alert_queue', scope: 'api:read', good: { shop }, bad: [{}, { shop: '' }, { shop: ['a'] }] },
        { name: 'get_performance', scope: 'api:read', good: { shop, days: 7 }, bad: [{}, { shop, days: 0 }, { shop, days: 'week' }] },
        { name: 'get_purchasing_view', scope: 'api:read', good: { shop, limit: 10 }, bad: [{}, { shop, limit: 0 }, { shop, cursor: 'not a cursor' }] },
        {
          name: 'report_inventory',
          scope: 'inventory:alerts',
          good: { shop, items: [{ productId: 'gid://shopify/Product/9', available: 1 }] },
          bad: [{ shop, items: [] }, { shop, items: [{ productId: 'gid://shopify/Product/9', available: 'lots' }] }, { shop, items: [{ productId: 'gid://shopify/Product/9', available: 1 }], extra: true }],
        },
      ];
    }

    it('covers every tool but get_health (which needs no scope and takes nothing) in the scope and argument checks', async () => {
      assert.deepEqual([...toolCases().map((c) => c.name), 'get_health'].sort(), TOOLS);
    });

    it('refuses every tool to a token without its scope, naming the scope, and changes nothing', async () => {
      // For each scope, an agent holding every other one the tools use.
      const lacking: Record<string, string> = {
        'api:write': reader,
        'api:read': (await registerAgent(service.app, { scope: 'api:write' })).token,
        'inventory:alerts': writer,
      };
      const before = await tableDigests(service.database);
      for (const { name, scope, good } of toolCases()) {
        const client = await connect(lacking[scope], true);
        await assert.rejects(
          client.callTool({ name, arguments: good }),
          (err: unknown) => err instanceof InsufficientScopeError && err.requiredScope === scope,
          `${name} without ${scope}`,
        );
      }
      assert.deepEqual(await tableDigests(service.database), before);
    });

    it('answers bad arguments to every tool with a tool error and stores nothing', async () => {
      const client = await connect(store.token);
      const before = await tableDigests(service.database);
      for (const { name, bad } of toolCases()) {
        for (const args of bad) {
          const result = await client.callTool({ name, arguments: args });
          assert.equal(result.isError, true, `${name} ${JSON.stringify(args)}: ${JSON.stringify(result)}`);
        }
      }
      assert.deepEqual(await tableDigests(service.database), before);
      expectStatus(await service.app.inject({ method: 'GET', url: '/mcp' }), 405);
    });
  });
}
