/**
 * Tenancy, walked across the whole surface: store A's agent, holding every scope, calls each HTTP
 * operation, each MCP tool and each A2A skill with store B's domain and B's record ids, and is
 * refused (404 as if the record did not exist, 403 for a write naming B) with every table left as
 * it was. Operations come from the app's own /openapi.json, tools from tools/list and skills from
 * the agent card, so one added later without a case here fails this file. A second test keeps
 * the tenancy rules inside the services.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { after, before, describe, it } from './fixtures/suites.ts';
import { a2aClient, problemOf, skillMessage, withToken } from './fixtures/a2a.ts';
import { call, expectStatus, storeWithAgent, uniqueEmail, type StoreAgent } from './fixtures/agents.ts';
import { dialectSkip, startListeningTestApp, testDialects, type TestApp } from './fixtures/app.ts';
import { failOnLeakedHandles } from './fixtures/leaks.ts';

failOnLeakedHandles();

const HTTP_METHODS = ['get', 'post', 'put', 'patch', 'delete', 'head', 'options', 'trace'] as const;
/** What the request fixture sends; an operation of another method fails the walk by name. */
type Method = Parameters<typeof call>[1];

/** What store B holds, by the names the operations' path parameters use. */
interface TenantB {
  agent: StoreAgent;
  productId: string;
  variantId: string;
  subscriptionId: string;
  sessionId: string;
  restockId: string;
  suppressed: string;
}

/** One operation called as A against B: the answer expected, and what to send besides the path. */
interface WalkCase {
  status: 403 | 404;
  query?: (b: TenantB) => Record<string, string>;
  body?: (b: TenantB) => unknown;
}

/** Every operation that names a store or a record, and how to aim it at store B. */
const HTTP_CASES: Record<string, WalkCase> = {
  getStore: { status: 404 },
  updateStoreSettings: { status: 404, body: () => ({ senderName: 'Not yours' }) },
  connectWooCommerce: { status: 404, body: () => ({ siteUrl: 'https://shop.example.com', consumerKey: `ck_${'1'.repeat(40)}`, consumerSecret: `cs_${'1'.repeat(40)}` }) },
  authorizeWooCommerce: { status: 404, body: () => ({ siteUrl: 'https://shop.example.com' }) },
  getWooCommerceConnection: { status: 404 },
  disconnectWooCommerce: { status: 404 },
  getBigCommerceConnection: { status: 404 },
  listStoreAgents: { status: 404 },
  revokeStoreAgent: { status: 404 },
  getStockStatus: { status: 404, query: (b) => ({ productId: b.productId }) },
  reportInventory: { status: 404, body: (b) => ({ items: [{ productId: b.productId, variantId: b.variantId, available: 0 }] }) },
  getAlertQueue: { status: 404 },
  listNotifications: { status: 404, query: (b) => ({ restockId: b.restockId }) },
  listSuppressions: { status: 404 },
  suppressAddress: { status: 404, body: () => ({ email: uniqueEmail('not-yours'), reason: 'manual' }) },
  unsuppressAddress: { status: 404 },
  listOutbox: { status: 404 },
  listPayments: { status: 404 },
  getSubscription: { status: 404 },
  cancelSubscription: { status: 404 },
  subscribeAlert: { status: 403, body: (b) => ({ productId: b.productId, email: uniqueEmail('shopper'), shop: b.agent.domain }) },
  getCheckoutSession: { status: 404 },
  checkoutPlan: { status: 403, body: (b) => ({ plan: 'starter', shop: b.agent.domain }) },
  reportOrder: { status: 404, body: (b) => ({ orderId: '1', email: uniqueEmail('buyer'), placedAt: new Date().toISOString(), currency: 'EUR', lines: [{ lineId: '1', productId: b.productId, quantity: 1, amountMinor: 100 }] }) },
  reportRefund: { status: 404, body: () => ({ refundId: '1', refundedAt: new Date().toISOString(), currency: 'EUR', lines: [{ lineId: '1', quantity: 1, amountMinor: 100 }] }) },
  reportCancellation: { status: 404, body: () => ({ cancelledAt: new Date().toISOString() }) },
  getPerformance: { status: 404 },
  exportCsv: { status: 404 },
  listWebhookEndpoints: { status: 404 },
  getWebhookEndpoint: { status: 404 },
  deleteWebhookEndpoint: { status: 404 },
  listWebhookDeliveries: { status: 404 },
  createWebhookEndpoint: { status: 404, body: () => ({ url: 'https://hooks.example.com/x' }) },
  updateWebhookEndpoint: { status: 404, body: () => ({ enabled: false }) },
};

/** Operations that name no tenant's record, and why they are not walked. */
const HTTP_WITHOUT_TENANT: Record<string, string> = {
  getHealth: 'service health',
  getApiIndex: 'the index of operations',
  listPlans: 'the public catalogue of plans',
  registerAgent: 'makes a new agent; names nothing that exists',
  claimAgent: "takes no access token: a store is bound only with the code e-mailed to its owner (test/agents.test.ts)",
  token: "exchanges the caller's own identity assertion",
  revokeToken: 'RFC 7009: whoever holds a token may revoke it; it names no record',
  getAgent: 'the calling agent itself',
  getStorefrontAvailability: "the storefront widget's public read for shoppers, no agent (test/storefront-api.test.ts)",
  subscribeShopper: "the storefront widget's public subscribe for shoppers, no agent (test/storefront-api.test.ts)",
  getPushPublicKey: "the service's VAPID public key, the same for every store (test/push.test.ts)",
};

/** Every MCP tool that names a store or a record, with B's values. */
const TOOL_CASES: Record<string, { status: 403 | 404; args: (b: TenantB) => Record<string, unknown> }> = {
  subscribe_alert: { status: 403, args: (b) => ({ productId: b.productId, email: uniqueEmail('shopper'), shop: b.agent.domain }) },
  get_subscription: { status: 404, args: (b) => ({ subscriptionId: b.subscriptionId }) },
  cancel_subscription: { status: 404, args: (b) => ({ subscriptionId: b.subscriptionId }) },
  checkout_plan: { status: 403, args: (b) => ({ plan: 'starter', shop: b.agent.domain }) },
  get_stock_status: { status: 404, args: (b) => ({ shop: b.agent.domain }) },
  get_alert_queue: { status: 404, args: (b) => ({ shop: b.agent.domain }) },
  get_performance: { status: 404, args: (b) => ({ shop: b.agent.domain }) },
  report_inventory: { status: 404, args: (b) => ({ shop: b.agent.domain, items: [{ productId: b.productId, variantId: b.variantId, available: 0 }] }) },
};

const TOOLS_WITHOUT_TENANT: Record<string, string> = {
  get_health: 'service health',
};

/** Every A2A skill names a store or a record; each is its MCP tool's twin, so it takes the tool's case. */
const SKILL_CASES: Record<string, (typeof TOOL_CASES)[string]> = {
  subscribeAlert: TOOL_CASES.subscribe_alert!,
  getSubscription: TOOL_CASES.get_subscription!,
  cancelSubscription: TOOL_CASES.cancel_subscription!,
  checkoutPlan: TOOL_CASES.checkout_plan!,
  getStockStatus: TOOL_CASES.get_stock_status!,
  getAlertQueue: TOOL_CASES.get_alert_queue!,
};

interface Operation {
  operationId: string;
  method: Method;
  /** The OpenAPI path, `{name}` for each parameter. */
  path: string;
}

function operationsOf(document: { paths: Record<string, Record<string, { operationId?: string }>> }): Operation[] {
  const operations: Operation[] = [];
  for (const [route, item] of Object.entries(document.paths)) {
    for (const method of HTTP_METHODS) {
      const operation = item[method];
      if (!operation) continue;
      assert.ok(operation.operationId, `${method.toUpperCase()} ${route} has no operationId`);
      assert.ok(['get', 'post', 'put', 'patch', 'delete'].includes(method), `${operation.operationId}: the walk cannot send ${method.toUpperCase()} yet`);
      operations.push({ operationId: operation.operationId, method: method.toUpperCase() as Method, path: route });
    }
  }
  return operations;
}

/** The operation's path with B's values for its parameters. */
function pathFor(operation: Operation, b: TenantB): string {
  const values: Record<string, string> = {
    domain: b.agent.domain,
    subscriptionId: b.subscriptionId,
    sessionId: b.sessionId,
    agentId: b.agent.registrationId,
    email: b.suppressed,
    orderId: '1',
    kind: 'orders',
    endpointId: 'whe_0fnobody',
  };
  return operation.path.replace(/\{([A-Za-z0-9_]+)\}/g, (_, name: string) => {
    const value = values[name];
    assert.ok(value, `${operation.operationId}: no value of store B for the path parameter ${name}`);
    return encodeURIComponent(value);
  });
}

/** Fails naming the keys of one table missing from, or left over in, the other. */
function assertCovers(listed: string[], actual: string[], what: string): void {
  const missing = actual.filter((name) => !listed.includes(name));
  const stale = listed.filter((name) => !actual.includes(name));
  assert.deepEqual(missing, [], `${what} without a tenancy case or a reason it names no tenant: ${missing.join(', ')}`);
  assert.deepEqual(stale, [], `${what} listed here that no longer exist: ${stale.join(', ')}`);
}

for (const dialect of testDialects()) {
  describe(`tenancy across every operation on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    let t: TestApp;
    let base: string;
    let a: StoreAgent;
    let b: TenantB;
    const clients: Client[] = [];

    before(async () => {
      // The BigCommerce app configured, so that its operations are in the document too.
      ({ t, base } = await startListeningTestApp(dialect, {
        BATCH_INTERVAL_SECONDS: '0',
        FREQUENCY_CAP_MINUTES: '0',
        BIGCOMMERCE_CLIENT_ID: 'tenancy-walk',
        BIGCOMMERCE_CLIENT_SECRET: 'tenancy-walk-secret',
        RESTOCK_ENCRYPTION_KEY: Buffer.alloc(32, 7).toString('base64'),
      }));
      a = await storeWithAgent(t.app, t.database, 'tenant-a');
      b = await recordsOfStoreB(await storeWithAgent(t.app, t.database, 'tenant-b'));
    });
    after(async () => {
      await Promise.all(clients.map((client) => client.close()));
      await t.close();
    });

    /** B's agent makes a record of every kind: a subscription, stock and the restock it starts, an alert sent, a suppression, a checkout. */
    async function recordsOfStoreB(agent: StoreAgent): Promise<TenantB> {
      const productId = 'gid://shopify/Product/7301';
      const variantId = 'gid://shopify/ProductVariant/7302';
      const as = (method: Method, url: string, body?: unknown) => call(t.app, method, url, { token: agent.token, ...(body === undefined ? {} : { body }) });
      const store = `/api/v1/stores/${agent.domain}`;
      const { subscriptionId } = expectStatus(await as('POST', '/api/v1/alerts/subscribe', { productId, variantId, email: uniqueEmail('waiting'), shop: agent.domain }), 200);
      const reported = expectStatus(await as('POST', `${store}/inventory`, { items: [{ productId, variantId, available: 5, productTitle: 'Tenant mug' }] }), 200);
      const restockId = reported.items[0].restockId as string;
      assert.ok(restockId, 'the report starts a restock');
      await t.runWorker();
      const suppressed = uniqueEmail('suppressed');
      expectStatus(await as('POST', `${store}/suppressions`, { email: suppressed, reason: 'complaint' }), 200);
      const { sessionId } = expectStatus(await as('POST', '/api/v1/plans/checkout', { plan: 'starter', shop: agent.domain }), 200);

      // Each read below must then find something of B's to withhold from A.
      assert.equal(expectStatus(await as('GET', `${store}/notifications?restockId=${restockId}`), 200).items.length, 1, 'an alert was sent');
      assert.ok(expectStatus(await as('GET', `${store}/outbox`), 200).items.length > 0, 'the alert is in the outbox');
      assert.ok(expectStatus(await as('GET', `${store}/stock`), 200).items.length > 0);
      assert.equal(expectStatus(await as('GET', `${store}/suppressions`), 200).items.length, 1);
      return { agent, productId, variantId, subscriptionId, sessionId, restockId, suppressed };
    }

    it("refuses every HTTP operation that names store B or one of its records to store A's agent, changing nothing", async () => {
      const document = expectStatus(await call(t.app, 'GET', '/openapi.json'), 200);
      const operations = operationsOf(document);
      assertCovers([...Object.keys(HTTP_CASES), ...Object.keys(HTTP_WITHOUT_TENANT)], operations.map((o) => o.operationId), 'operations');

      for (const operation of operations.filter((o) => HTTP_CASES[o.operationId])) {
        const walk = HTTP_CASES[operation.operationId]!;
        const query = walk.query ? `?${new URLSearchParams(walk.query(b))}` : '';
        const url = pathFor(operation, b) + query;
        const what = `${operation.operationId}: ${operation.method} ${url}`;
        const before = await t.tableDigests();
        const res = await call(t.app, operation.method, url, { token: a.token, ...(walk.body ? { body: walk.body(b) } : {}) });
        assert.equal(res.statusCode, walk.status, `${what} answered ${res.statusCode}: ${res.body}`);
        assert.match(String(res.headers['content-type']), /^application\/problem\+json/, what);
        assert.equal(res.json().status, walk.status, what);
        assert.deepEqual(await t.tableDigests(), before, `${what} changed stored data`);
      }
    });

    it("refuses every MCP tool called with store B's shop or ids to store A's agent, changing nothing", async () => {
      const client = new Client({ name: 'restock-tenancy-test', version: '1.0.0' });
      await client.connect(new StreamableHTTPClientTransport(new URL(`${base}/mcp`), { requestInit: { headers: { authorization: `Bearer ${a.token}` } } }));
      clients.push(client);
      const { tools } = await client.listTools();
      assertCovers([...Object.keys(TOOL_CASES), ...Object.keys(TOOLS_WITHOUT_TENANT)], tools.map((tool) => tool.name), 'MCP tools');

      for (const tool of tools.filter((candidate) => TOOL_CASES[candidate.name])) {
        const walk = TOOL_CASES[tool.name]!;
        const before = await t.tableDigests();
        const result = await client.callTool({ name: tool.name, arguments: walk.args(b) });
        assert.equal(result.isError, true, `${tool.name} answered ${JSON.stringify(result)}`);
        assert.equal((result.structuredContent as { status?: number } | undefined)?.status, walk.status, `${tool.name}: ${JSON.stringify(result)}`);
        assert.deepEqual(await t.tableDigests(), before, `${tool.name} changed stored data`);
      }
    });

    it("refuses every A2A skill sent with store B's shop or ids to store A's agent, changing nothing", async () => {
      const client = await a2aClient(base);
      const { skills } = await client.getAgentCard();
      assertCovers(Object.keys(SKILL_CASES), skills.map((skill) => skill.id), 'A2A skills');

      for (const skill of skills) {
        const walk = SKILL_CASES[skill.id]!;
        const before = await t.tableDigests();
        const answer = await client.sendMessage({ tenant: '', message: skillMessage(skill.id, walk.args(b)), configuration: undefined, metadata: undefined }, withToken(a.token));
        assert.equal(problemOf(answer).status, walk.status, `${skill.id}: ${JSON.stringify(answer)}`);
        assert.deepEqual(await t.tableDigests(), before, `${skill.id} changed stored data`);
      }
    });

    it("still serves store B's own agent, so the refusals above were tenancy and not breakage", async () => {
      const as = (url: string) => call(t.app, 'GET', url, { token: b.agent.token });
      const store = `/api/v1/stores/${b.agent.domain}`;
      for (const url of [store, `${store}/agents`, `${store}/queue`, `${store}/stock`, `${store}/suppressions`, `${store}/outbox`, `/api/v1/alerts/${b.subscriptionId}`, `/api/v1/plans/checkout/${b.sessionId}`]) {
        expectStatus(await as(url), 200);
      }
    });
  });
}

describe('where tenancy is decided', () => {
  const RULES = /\b(ownStore|canSee|storeForWrite)\b/;
  const root = path.join(import.meta.dirname, '..', 'src');

  function sourceFiles(dir: string): string[] {
    return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) return sourceFiles(full);
      return entry.name.endsWith('.ts') ? [full] : [];
    });
  }

  // The dashboard's service only reads other features for its owner's caller: it decides nothing.
  const isDeciding = (file: string) => file === 'core/http/caller.ts' || (file.endsWith('/service.ts') && file !== 'dashboard/service.ts');

  it('only the services (and the file that defines them) name the tenancy rules: no route, MCP tool or dashboard page decides for itself', () => {
    const deciding = sourceFiles(root)
      .map((file) => path.relative(root, file).split(path.sep).join('/'))
      .filter((file) => !isDeciding(file))
      .filter((file) => RULES.test(readFileSync(path.join(root, file), 'utf8')));
    assert.deepEqual(deciding, [], `these name ownStore/canSee/storeForWrite; pass the caller to a service instead: ${deciding.join(', ')}`);
  });
});
