/**
 * Finding 6 of the second red team: DNS rebinding. Every route answered a request naming any host (and
 * carrying any site's Origin) with 200, so a page whose name an attacker pointed at the service
 * (or at a copy of it on a developer's loopback) could drive it. Now the Host must name the
 * service (BASE_URL's host, its loopback twins, ALLOWED_HOSTS), and another site's Origin is
 * refused at /mcp and wherever a request would change something outside the API open to other
 * sites' pages. Each test of a refusal failed on the code before (200, or the route's own answer).
 */
import assert from 'node:assert/strict';
import type { FastifyInstance, InjectOptions, LightMyRequestResponse } from 'fastify';
import { buildApp } from '../../src/app.ts';
import { ConfigError, loadConfig } from '../../src/config.ts';
import { Database } from '../../src/core/db/database.ts';
import { createTestDatabase, dialectSkip, tableDigests, testConfig, testDialects, type TestDatabase } from '../fixtures/app.ts';
import { failOnLeakedHandles } from '../fixtures/leaks.ts';
import { after, before, describe, it } from '../fixtures/suites.ts';

failOnLeakedHandles();

const BASE_URL = 'https://restock.example';
const HOST = 'restock.example';
const EVIL = 'evil.example.com';
const INITIALIZE = JSON.stringify({
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'host-origin-test', version: '1.0.0' } },
});
const MCP_HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
const FORM = { 'content-type': 'application/x-www-form-urlencoded' };

let counter = 0;
const unique = () => `${Date.now() % 1_000_000}${++counter}`;

interface Served {
  app: FastifyInstance;
  database: Database;
  /** Injects with the given Host (app.inject's own default is localhost:80, not a name of this service). */
  as(host: string, options: InjectOptions): Promise<LightMyRequestResponse>;
  close(): Promise<void>;
}

/** The app over the file's database, with only the names `env` gives it (no test aliases). */
async function serve(testDatabase: TestDatabase, env: Record<string, string> = {}): Promise<Served> {
  const config = testConfig(testDatabase.url, { BASE_URL, ALLOWED_HOSTS: '', ...env });
  const database = Database.open(config.database);
  const app = await buildApp(config, database);
  await app.ready();
  return {
    app,
    database,
    as: (host, options) => app.inject({ ...options, headers: { ...options.headers, host } }),
    async close() {
      await app.close();
      await database.close();
    },
  };
}

/**
 * A refusal of this type. The OAuth endpoints answer every refusal in RFC 6749's form (400, JSON
 * with `error`) carrying the problem's type; a HEAD answer has no body.
 */
function assertProblem(res: LightMyRequestResponse, status: number, slug: string, what: string, route?: InjectOptions): void {
  const oauth = route?.url?.toString().startsWith('/oauth/');
  assert.equal(res.statusCode, oauth ? 400 : status, `${what}: ${res.statusCode} ${res.body.slice(0, 300)}`);
  if (route?.method === 'HEAD') return;
  assert.match(res.headers['content-type'] as string, oauth ? /^application\/json/ : /^application\/problem\+json/, what);
  assert.equal(res.json().type, `${BASE_URL}/problems/${slug}`, what);
}

/** One request of each kind the service takes: agents, the API, the widget, pages, webhooks, discovery. */
const ROUTES: InjectOptions[] = [
  { method: 'POST', url: '/mcp', headers: MCP_HEADERS, payload: INITIALIZE },
  { method: 'GET', url: '/mcp' },
  { method: 'POST', url: '/a2a', headers: { 'content-type': 'application/json' }, payload: '{}' },
  { method: 'GET', url: '/api/health' },
  { method: 'POST', url: '/api/agent/register', headers: { 'content-type': 'application/json' }, payload: '{"type":"anonymous"}' },
  { method: 'OPTIONS', url: '/api/v1/alerts/subscribe', headers: { origin: 'https://shop.example', 'access-control-request-method': 'POST' } },
  { method: 'GET', url: '/storefront/v1/availability?shop=a.myshopify.com&productId=gid%3A%2F%2Fshopify%2FProduct%2F1' },
  { method: 'POST', url: '/storefront/v1/subscribe', headers: { 'content-type': 'application/json' }, payload: '{}' },
  { method: 'GET', url: '/widget.js' },
  { method: 'GET', url: '/dashboard' },
  { method: 'POST', url: '/dashboard/sign-in', headers: FORM, payload: 'shop=a.myshopify.com' },
  { method: 'POST', url: '/oauth/token', headers: FORM, payload: 'grant_type=client_credentials' },
  { method: 'POST', url: '/webhooks/stripe', headers: { 'content-type': 'application/json' }, payload: '{}' },
  { method: 'POST', url: '/webhooks/shopify', headers: { 'content-type': 'application/json' }, payload: '{}' },
  { method: 'GET', url: '/.well-known/oauth-protected-resource' },
  { method: 'GET', url: '/' },
  { method: 'GET', url: '/no-such-page' },
];

const describeRoute = (route: InjectOptions) => `${route.method} ${route.url}`;

for (const dialect of testDialects()) {
  describe(`finding 6: Host and Origin on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    let testDatabase: TestDatabase;
    let s: Served;

    before(async () => {
      testDatabase = await createTestDatabase(dialect);
      s = await serve(testDatabase);
    });
    after(async () => {
      await s?.close();
      await testDatabase?.drop();
    });

    it('finding 6: a request naming another host is refused with 421 on every route, and changes nothing', async () => {
      const before = await tableDigests(s.database);
      for (const host of [EVIL, `${EVIL}:443`, `${HOST}.${EVIL}`, `${HOST}:8443`, `${HOST}:80`, 'localhost:443', '127.0.0.1', `${HOST}@${EVIL}`, `${HOST}:0`, `${HOST}:`.repeat(2)]) {
        for (const route of ROUTES) assertProblem(await s.as(host, route), 421, 'misdirected-request', `Host ${host}: ${describeRoute(route)}`, route);
      }
      // What the conformance suite's DNS-rebinding scenario sends: both headers naming the attacker.
      const rebound = await s.as(EVIL, { method: 'POST', url: '/mcp', headers: { ...MCP_HEADERS, origin: `http://${EVIL}` }, payload: INITIALIZE });
      assertProblem(rebound, 421, 'misdirected-request', 'the rebinding scenario');
      assert.deepEqual(await tableDigests(s.database), before, 'nothing stored');
    });

    it('finding 6: BASE_URL’s host is served in any case, with or without its default port, with a trailing dot', async () => {
      for (const host of [HOST, HOST.toUpperCase(), `${HOST}:443`, `${HOST}.`, `${HOST}.:443`]) {
        const res = await s.as(host, { method: 'GET', url: '/api/health' });
        assert.equal(res.statusCode, 200, `Host ${host}: ${res.body}`);
      }
      const mcp = await s.as(HOST, { method: 'POST', url: '/mcp', headers: MCP_HEADERS, payload: INITIALIZE });
      assert.equal(mcp.statusCode, 200, mcp.body);
      assert.ok(JSON.parse(mcp.body).result.serverInfo, 'initialized');
    });

    it('finding 6: ALLOWED_HOSTS adds names: with a port, that port only; without, any port', async () => {
      const aliased = await serve(testDatabase, { ALLOWED_HOSTS: 'restock-internal:8080, API.restock.example' });
      try {
        for (const host of ['restock-internal:8080', 'api.restock.example', 'api.restock.example:3000', HOST]) {
          const res = await aliased.as(host, { method: 'GET', url: '/api/health' });
          assert.equal(res.statusCode, 200, `Host ${host}: ${res.body}`);
        }
        for (const host of ['restock-internal', 'restock-internal:8081', 'other.restock.example']) {
          assertProblem(await aliased.as(host, { method: 'GET', url: '/api/health' }), 421, 'misdirected-request', `Host ${host}`);
        }
      } finally {
        await aliased.close();
      }
    });

    it('finding 6: a loopback BASE_URL answers to every loopback name on its port, and to none on another', async () => {
      for (const base of ['http://localhost:3000', 'http://127.0.0.1:3000', 'http://[::1]:3000']) {
        const local = await serve(testDatabase, { BASE_URL: base });
        try {
          for (const host of ['localhost:3000', 'LocalHost:3000', '127.0.0.1:3000', '[::1]:3000']) {
            const res = await local.as(host, { method: 'POST', url: '/mcp', headers: { ...MCP_HEADERS, origin: `http://${host}` }, payload: INITIALIZE });
            assert.equal(res.statusCode, 200, `${base}, Host and Origin ${host}: ${res.body}`);
          }
          assert.equal((await local.as('[0:0:0:0:0:0:0:1]:3000', { method: 'GET', url: '/api/health' })).statusCode, 200, 'IPv6 written out in full');
          for (const host of ['localhost:3001', '127.0.0.1', 'localhost', '127.0.0.2:3000', '[::2]:3000', `${EVIL}:3000`]) {
            assert.equal((await local.as(host, { method: 'GET', url: '/api/health' })).statusCode, 421, `${base}, Host ${host}`);
          }
        } finally {
          await local.close();
        }
      }
    });

    it('finding 6: the Host header is the name checked, behind a trusted proxy too; X-Forwarded-Host is not', async () => {
      // Shopify's app proxy forwards the shop's own domain as X-Forwarded-Host.
      const relayed = { 'x-forwarded-host': 'blue-mug.myshopify.com' };
      for (const served of [s, await serve(testDatabase, { TRUST_PROXY: '127.0.0.1' })]) {
        const res = await served.as(HOST, { method: 'GET', url: '/api/health', headers: relayed });
        assert.equal(res.statusCode, 200, res.body);
        assertProblem(await served.as('backend:3000', { method: 'GET', url: '/api/health', headers: { 'x-forwarded-host': HOST } }), 421, 'misdirected-request', 'a rewritten Host');
        if (served !== s) await served.close();
      }
      // A proxy that rewrites Host says so in ALLOWED_HOSTS.
      const named = await serve(testDatabase, { TRUST_PROXY: '127.0.0.1', ALLOWED_HOSTS: 'backend:3000' });
      try {
        assert.equal((await named.as('backend:3000', { method: 'GET', url: '/api/health', headers: { 'x-forwarded-host': HOST } })).statusCode, 200);
      } finally {
        await named.close();
      }
    });

    it('finding 6: the MCP endpoint refuses another site’s Origin with 403, whatever the method', async () => {
      for (const origin of [`http://${EVIL}`, `https://${HOST}.${EVIL}`, `http://${HOST}`, `https://${HOST}:8443`, 'null', 'https://restock.example/path', `https://${HOST}, https://${EVIL}`]) {
        const post = await s.as(HOST, { method: 'POST', url: '/mcp', headers: { ...MCP_HEADERS, origin }, payload: INITIALIZE });
        assertProblem(post, 403, 'foreign-origin', `POST /mcp from ${origin}`);
        for (const method of ['GET', 'HEAD', 'DELETE'] as const) {
          const route: InjectOptions = { method, url: '/mcp', headers: { origin } };
          assertProblem(await s.as(HOST, route), 403, 'foreign-origin', `${method} /mcp from ${origin}`, route);
        }
      }
      for (const origin of [BASE_URL, 'HTTPS://RESTOCK.EXAMPLE', `${BASE_URL}:443`, undefined]) {
        const res = await s.as(HOST, { method: 'POST', url: '/mcp', headers: { ...MCP_HEADERS, ...(origin ? { origin } : {}) }, payload: INITIALIZE });
        assert.equal(res.statusCode, 200, `from ${origin ?? 'a program (no Origin)'}: ${res.body}`);
      }
    });

    it('finding 6: another site’s page may not post to the service’s own pages, forms and agent endpoints, and nothing changes', async () => {
      const before = await tableDigests(s.database);
      const posts: InjectOptions[] = [
        { method: 'POST', url: '/dashboard/sign-in', headers: FORM, payload: 'shop=a.myshopify.com' },
        { method: 'POST', url: '/dashboard/sign-in/some-link-token', headers: FORM, payload: '' },
        { method: 'POST', url: '/my/some-page-token/erase', headers: FORM, payload: '' },
        { method: 'POST', url: '/unsubscribe/some-token', headers: FORM, payload: 'List-Unsubscribe=One-Click' },
        { method: 'POST', url: '/checkout/cs_1/accept', headers: FORM, payload: '' },
        { method: 'POST', url: '/oauth/token', headers: FORM, payload: 'grant_type=client_credentials' },
        { method: 'POST', url: '/a2a', headers: { 'content-type': 'application/json' }, payload: '{"jsonrpc":"2.0","id":1,"method":"message/send","params":{}}' },
        { method: 'POST', url: '/shopify/token-exchange', headers: { 'content-type': 'application/json' }, payload: '{}' },
      ];
      const foreign: Array<Record<string, string>> = [
        { origin: `https://${EVIL}` },
        { origin: `http://${HOST}` },
        { origin: 'null' },
        { 'sec-fetch-site': 'cross-site' },
        { 'sec-fetch-site': 'same-site', origin: `https://shop.${HOST}` },
        // Only a rebound page says same-origin with another origin; its Host is refused first anyway.
        { 'sec-fetch-site': 'same-origin', origin: `https://${EVIL}` },
      ];
      for (const route of posts) {
        for (const sent of foreign) {
          assertProblem(await s.as(HOST, { ...route, headers: { ...route.headers, ...sent } }), 403, 'foreign-origin', `${describeRoute(route)} with ${JSON.stringify(sent)}`, route);
        }
      }
      assert.deepEqual(await tableDigests(s.database), before, 'nothing stored');
      const own: Array<Record<string, string>> = [
        { origin: BASE_URL },
        // A page of ours whose referrer policy hides its origin: the browser still says same-origin.
        { origin: 'null', 'sec-fetch-site': 'same-origin' },
        { 'sec-fetch-site': 'none' },
        {},
      ];
      for (const route of posts) {
        for (const sent of own) {
          const res = await s.as(HOST, { ...route, headers: { ...route.headers, ...sent } });
          assert.ok(res.statusCode !== 403 && res.statusCode !== 421, `${describeRoute(route)} with ${JSON.stringify(sent)} reaches its route: ${res.statusCode} ${res.body.slice(0, 200)}`);
        }
      }
    });

    it('finding 6: the API and the storefront widget still take other sites’ pages', async () => {
      const shop = `origin-${unique()}.myshopify.com`;
      await s.app.restock.stores.createStore(shop, `owner-${unique()}@example.com`);
      const origin = { origin: 'https://blue-mug.example' };
      const subscribed = await s.as(HOST, {
        method: 'POST',
        url: '/storefront/v1/subscribe',
        headers: { 'content-type': 'application/json', ...origin },
        payload: JSON.stringify({ shop, productId: `gid://shopify/Product/${unique()}`, email: `shopper-${unique()}@example.com` }),
      });
      assert.equal(subscribed.statusCode, 201, subscribed.body);
      assert.equal(subscribed.headers['access-control-allow-origin'], '*');
      const preflight = await s.as(HOST, { method: 'OPTIONS', url: '/storefront/v1/subscribe', headers: { ...origin, 'access-control-request-method': 'POST' } });
      assert.equal(preflight.statusCode, 204);
      const registered = await s.as(HOST, { method: 'POST', url: '/api/agent/register', headers: { 'content-type': 'application/json', ...origin }, payload: '{"type":"anonymous"}' });
      assert.equal(registered.statusCode, 201, registered.body);
      // Shopify's app proxy relays the widget's post from the shop's own domain, with its Origin.
      const relayed = await s.as(HOST, {
        method: 'POST',
        url: `/shopify/proxy/subscriptions?shop=${shop}&timestamp=1&signature=00`,
        headers: { 'content-type': 'application/json', origin: `https://${shop}` },
        payload: '{}',
      });
      assert.ok(![403, 421].includes(relayed.statusCode), `the app proxy route answers for itself: ${relayed.statusCode} ${relayed.body.slice(0, 200)}`);
      for (const url of ['/widget.js', '/.well-known/mcp/server-card.json', '/api/health']) {
        const res = await s.as(HOST, { method: 'GET', url, headers: origin });
        assert.equal(res.statusCode, 200, `GET ${url} from a store’s page: ${res.body.slice(0, 200)}`);
      }
    });

    it('finding 6: webhooks and programs, which send no Origin, reach their routes', async () => {
      const stripe = await s.as(HOST, { method: 'POST', url: '/webhooks/stripe', headers: { 'content-type': 'application/json' }, payload: '{}' });
      assert.ok(![403, 421].includes(stripe.statusCode), `the webhook reaches its own check: ${stripe.statusCode} ${stripe.body}`);
      const shopify = await s.as(HOST, { method: 'POST', url: '/webhooks/shopify', headers: { 'content-type': 'application/json' }, payload: '{}' });
      assert.ok(![403, 421].includes(shopify.statusCode), `the webhook reaches its own check: ${shopify.statusCode} ${shopify.body}`);
      const token = await s.as(HOST, { method: 'POST', url: '/oauth/token', headers: FORM, payload: 'grant_type=client_credentials' });
      assert.ok(![403, 421].includes(token.statusCode), `the token endpoint answers for itself: ${token.statusCode} ${token.body}`);
    });
  });
}

describe('finding 6: ALLOWED_HOSTS', () => {
  const base = { DATA_DIR: '/tmp', LOG_LEVEL: 'silent' };

  it('finding 6: ALLOWED_HOSTS is read into host names and ports at start-up', () => {
    assert.deepEqual(loadConfig(base).allowedHosts, []);
    assert.deepEqual(loadConfig({ ...base, ALLOWED_HOSTS: ' a.example, B.Example:8080 ,[0:0::1]:3000,10.0.0.5,internal_name., ' }).allowedHosts, [
      { hostname: 'a.example', port: 'any' },
      { hostname: 'b.example', port: 8080 },
      { hostname: '[::1]', port: 3000 },
      { hostname: '10.0.0.5', port: 'any' },
      { hostname: 'internal_name', port: 'any' },
    ]);
  });

  it('finding 6: a malformed ALLOWED_HOSTS stops the start with the setting named', () => {
    for (const value of ['https://a.example', 'a.example/path', 'user@a.example', '*.example.com', 'a.example:99999', 'a.example:0', '[::g]:80', 'a example', '::1', 'a.example:80:81']) {
      assert.throws(
        () => loadConfig({ ...base, ALLOWED_HOSTS: value }),
        (err: Error) => err instanceof ConfigError && err.message.includes('ALLOWED_HOSTS'),
        value,
      );
    }
  });
});
