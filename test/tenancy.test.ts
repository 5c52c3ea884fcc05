/**
 * Tenancy, walked across the whole surface: store A's agent, holding every scope, calls each HTTP
 * operation, each MCP tool and each A2A skill with store B's domain and B's record ids, and is
 * refused (404 as if the record did not exist, 403 for a write naming B) with every table left as
 * it was. Operations come from the app's own /openapi.json, tools from tools/list and skills from
 * the agent card; each case is generated from the operation's declaration (its tenancy and its
 * example, aimed at B), so an operation added later is walked without a line here, and a route
 * outside the registry fails this file until it is listed. A second test keeps the tenancy rules
 * inside the services.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { after, before, describe, it } from './fixtures/suites.ts';
import { a2aClient, problemOf, skillMessage, withToken } from './fixtures/a2a.ts';
import { carriesBody, toolNameOf, type HttpMethod } from '../src/core/operations.ts';
import { declaredOperations } from '../src/operations.ts';
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

/**
 * Routes outside the operation registry: protocols with a wire format of their own, and pages.
 * Each either names no tenant's record (why) or is walked here by hand.
 */
const ROUTES_WITHOUT_TENANT: Record<string, string> = {
  registerAgent: 'makes a new agent; names nothing that exists',
  claimAgent: "takes no access token: a store is bound only with the code e-mailed to its owner (test/agents.test.ts)",
  token: "exchanges the caller's own identity assertion",
  revokeToken: 'RFC 7009: whoever holds a token may revoke it; it names no record',
  getStorefrontAvailability: "the storefront widget's public read for shoppers, no agent (test/storefront-api.test.ts)",
  subscribeShopper: "the storefront widget's public subscribe for shoppers, no agent (test/storefront-api.test.ts)",
  getPushPublicKey: "the service's VAPID public key, the same for every store (test/push.test.ts)",
};
/** Routes outside the registry that name a store (a CSV stream), walked by hand with these inputs. */
const ROUTES_WALKED: Record<string, Record<string, unknown>> = { exportCsv: { shop: 'any', kind: 'orders' }, exportPurchasingCsv: { shop: 'any' } };

/** B's value for each field an operation's input may name; any other field keeps its example's value. */
function valuesOfB(b: TenantB): Record<string, unknown> {
  return {
    shop: b.agent.domain,
    productId: b.productId,
    variantId: b.variantId,
    subscriptionId: b.subscriptionId,
    sessionId: b.sessionId,
    restockId: b.restockId,
    agentId: b.agent.registrationId,
    email: b.suppressed,
    endpointId: 'whe_0fnobody',
  };
}

/** A declaration's example aimed at store B: every field named after one of B's values takes it, at any depth. */
function aimedAtB(example: unknown, b: TenantB): Record<string, unknown> {
  const values = valuesOfB(b);
  const aim = (value: unknown): unknown => {
    if (Array.isArray(value)) return value.map(aim);
    if (typeof value !== 'object' || value === null) return value;
    return Object.fromEntries(Object.entries(value).map(([key, field]) => [key, Object.hasOwn(values, key) ? values[key] : aim(field)]));
  };
  return aim(example) as Record<string, unknown>;
}

const declarations = new Map(declaredOperations.map((declaration) => [declaration.id, declaration]));
const declarationOfTool = new Map(declaredOperations.map((declaration) => [toolNameOf(declaration.id), declaration]));

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

/** The operation's path with the input's values for its parameters, and the rest of the input as its query or body. */
function requestFor(operation: Operation, input: Record<string, unknown>): { url: string; body?: unknown } {
  const rest = { ...input };
  const path = operation.path.replace(/\{([A-Za-z0-9_]+)\}/g, (_, name: string) => {
    const value = rest[name];
    assert.ok(value !== undefined, `${operation.operationId}: no value for the path parameter ${name}`);
    delete rest[name];
    return encodeURIComponent(String(value));
  });
  if (carriesBody(operation.method as HttpMethod)) return { url: path, body: rest };
  const query = new URLSearchParams(Object.entries(rest).map(([name, value]) => [name, String(value)]));
  return { url: query.size > 0 ? `${path}?${query}` : path };
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
      assertCovers([...declarations.keys(), ...Object.keys(ROUTES_WITHOUT_TENANT), ...Object.keys(ROUTES_WALKED)], operations.map((o) => o.operationId), 'operations');

      let walked = 0;
      for (const operation of operations) {
        const declaration = declarations.get(operation.operationId);
        if (declaration && 'none' in declaration.tenancy) continue;
        if (!declaration && !ROUTES_WALKED[operation.operationId]) continue;
        const status = declaration && 'refusal' in declaration.tenancy ? declaration.tenancy.refusal : 404;
        const { url, body } = requestFor(operation, aimedAtB(declaration?.example ?? ROUTES_WALKED[operation.operationId], b));
        const what = `${operation.operationId}: ${operation.method} ${url}`;
        const before = await t.tableDigests();
        const res = await call(t.app, operation.method, url, { token: a.token, ...(body === undefined ? {} : { body }) });
        assert.equal(res.statusCode, status, `${what} answered ${res.statusCode}: ${res.body}`);
        assert.match(String(res.headers['content-type']), /^application\/problem\+json/, what);
        assert.equal(res.json().status, status, what);
        assert.deepEqual(await t.tableDigests(), before, `${what} changed stored data`);
        walked++;
      }
      const refusing = declaredOperations.filter((declaration) => 'refusal' in declaration.tenancy).length;
      assert.equal(walked, refusing + Object.keys(ROUTES_WALKED).length, 'every declared operation that names a tenant was walked');
    });

    it("refuses every MCP tool called with store B's shop or ids to store A's agent, changing nothing", async () => {
      const client = new Client({ name: 'restock-tenancy-test', version: '1.0.0' });
      await client.connect(new StreamableHTTPClientTransport(new URL(`${base}/mcp`), { requestInit: { headers: { authorization: `Bearer ${a.token}` } } }));
      clients.push(client);
      const { tools } = await client.listTools();
      const offered = declaredOperations.filter((declaration) => declaration.tool).map((declaration) => toolNameOf(declaration.id));
      assertCovers(offered, tools.map((tool) => tool.name), 'MCP tools');

      for (const tool of tools) {
        const declaration = declarationOfTool.get(tool.name)!;
        if ('none' in declaration.tenancy) continue;
        const before = await t.tableDigests();
        const result = await client.callTool({ name: tool.name, arguments: aimedAtB(declaration.example, b) });
        assert.equal(result.isError, true, `${tool.name} answered ${JSON.stringify(result)}`);
        assert.equal((result.structuredContent as { status?: number } | undefined)?.status, declaration.tenancy.refusal, `${tool.name}: ${JSON.stringify(result)}`);
        assert.deepEqual(await t.tableDigests(), before, `${tool.name} changed stored data`);
      }
    });

    it("refuses every A2A skill sent with store B's shop or ids to store A's agent, changing nothing", async () => {
      const client = await a2aClient(base);
      const { skills } = await client.getAgentCard();
      assertCovers(declaredOperations.filter((declaration) => declaration.skill).map((declaration) => declaration.id), skills.map((skill) => skill.id), 'A2A skills');

      for (const skill of skills) {
        const declaration = declarations.get(skill.id)!;
        assert.ok('refusal' in declaration.tenancy, `${skill.id}: every skill names a store or a record`);
        const before = await t.tableDigests();
        const answer = await client.sendMessage({ tenant: '', message: skillMessage(skill.id, aimedAtB(declaration.example, b)), configuration: undefined, metadata: undefined }, withToken(a.token));
        assert.equal(problemOf(answer).status, declaration.tenancy.refusal, `${skill.id}: ${JSON.stringify(answer)}`);
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
