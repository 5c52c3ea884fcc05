/**
 * /metrics and tracing, on real parts: the app over each database, requests through inject, a
 * restock through the worker, the text format parsed; an OTLP/HTTP receiver on loopback for spans.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import type { LightMyRequestResponse } from 'fastify';
import { after, before, describe, it } from './fixtures/suites.ts';
import { dialectSkip, startTestApp, testDialects, type TestApp } from './fixtures/app.ts';
import { failOnLeakedHandles } from './fixtures/leaks.ts';
import { onFreePort } from './fixtures/network.ts';

failOnLeakedHandles();

const TOKEN = 'metrics-test-token-0123456789abcdef';
const SOURCE = { kind: 'inventory-api', ref: 'agt_metrics_test', verified: false } as const;
let serial = 0;
const unique = () => `${Date.now() % 1_000_000}${++serial}`;

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** The Prometheus text format's samples (comments skipped). */
function parseExposition(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    assert.ok(match, `a sample line of the text format: ${line}`);
    const labels: Record<string, string> = {};
    for (const [, key, value] of match[2]?.matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g) ?? []) labels[key!] = value!.replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c));
    samples.push({ name: match[1]!, labels, value: Number(match[3]) });
  }
  return samples;
}

/** The value of the one sample with this name and (at least) these labels; undefined when absent. */
function valueOf(samples: Sample[], name: string, labels: Record<string, string> = {}): number | undefined {
  const found = samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
  assert.ok(found.length <= 1, `one ${name} sample for ${JSON.stringify(labels)}, found ${found.length}`);
  return found[0]?.value;
}

async function scrape(t: TestApp): Promise<Sample[]> {
  const res = await t.app.inject({ method: 'GET', url: '/metrics', headers: { authorization: `Bearer ${TOKEN}` } });
  assert.equal(res.statusCode, 200, res.body);
  assert.match(String(res.headers['content-type']), /^text\/plain; version=0\.0\.4/);
  return parseExposition(res.body);
}

function expectProblem(res: LightMyRequestResponse, status: number, slug: string): void {
  assert.equal(res.statusCode, status, res.body);
  assert.match(String(res.headers['content-type']), /^application\/problem\+json/);
  assert.equal(res.json().type, `http://restock.test/problems/${slug}`);
}

for (const dialect of testDialects()) {
  describe(`metrics on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    let t: TestApp;
    before(async () => {
      t = await startTestApp(dialect, { METRICS_TOKEN: TOKEN, FREQUENCY_CAP_MINUTES: '0', BATCH_INTERVAL_SECONDS: '0', REGISTRATION_LIMIT_PER_HOUR: '3' });
    });
    after(async () => {
      await t?.close();
    });

    it('times requests by route pattern and status, never by the requested path', async () => {
      const subscribed = await t.post('/api/v1/alerts/subscribe', { productId: `gid://shopify/Product/${unique()}`, email: `shopper-${unique()}@example.com` });
      assert.equal(subscribed.statusCode, 200, subscribed.body);
      const id = subscribed.json().subscriptionId as string;
      assert.equal((await t.inject({ method: 'GET', url: `/api/v1/alerts/${id}` })).statusCode, 200);
      assert.equal((await t.inject({ method: 'GET', url: `/no/such/path/${id}` })).statusCode, 404);

      const samples = await scrape(t);
      const count = (labels: Record<string, string>) => valueOf(samples, 'restock_http_request_duration_seconds_count', labels);
      assert.equal(count({ method: 'POST', route: '/api/v1/alerts/subscribe', status: '200' }), 1, 'the subscribe counted once under its route');
      assert.equal(count({ method: 'GET', route: '/api/v1/alerts/:subscriptionId', status: '200' }), 1, 'the read counted under its pattern');
      assert.equal(count({ method: 'GET', route: 'unmatched', status: '404' }), 1, 'an unknown path counted as unmatched');
      const raw = samples.filter((s) => s.name.startsWith('restock_http_request_duration_seconds') && (s.labels.route ?? '').includes(id));
      assert.deepEqual(raw, [], 'no label carries a subscription id');
      const sum = valueOf(samples, 'restock_http_request_duration_seconds_sum', { method: 'POST', route: '/api/v1/alerts/subscribe', status: '200' });
      assert.ok(sum !== undefined && sum > 0 && sum < 10, `a plausible duration in seconds: ${sum}`);
    });

    it('counts a restock’s alerts planned and sent by store, and its detection → first alert, then reads the queue at scrape time', async () => {
      const shop = `metrics-${unique()}.myshopify.com`;
      const productId = `gid://shopify/Product/${unique()}`;
      await t.app.restock.stores.createStore(shop, `owner-${unique()}@example.com`);
      await t.app.restock.inventory.reportStock(shop, [{ productId, variantId: null, available: 0, productTitle: 'Metrics mug' }], SOURCE);
      for (const who of ['a', 'b']) {
        const res = await t.app.inject({
          method: 'POST',
          url: '/storefront/v1/subscribe',
          headers: { 'content-type': 'application/json', origin: 'https://shop.example' },
          payload: JSON.stringify({ shop, productId, email: `${who}-${unique()}@example.com` }),
        });
        assert.ok(res.statusCode < 300, `the storefront subscribe is taken: ${res.statusCode} ${res.body}`);
      }
      const before = await scrape(t);
      assert.equal(valueOf(before, 'restock_alerts_settled_total', { store: shop, outcome: 'sent' }), undefined, 'nothing sent for the store yet');
      const firstAlertsBefore = valueOf(before, 'restock_restock_to_first_alert_seconds_count') ?? 0;

      await t.app.restock.inventory.reportStock(shop, [{ productId, variantId: null, available: 5 }], SOURCE);
      await t.runWorker();

      const after = await scrape(t);
      assert.equal(valueOf(after, 'restock_alerts_planned_total', { store: shop }), 2, 'both shoppers planned');
      assert.equal(valueOf(after, 'restock_alerts_settled_total', { store: shop, outcome: 'sent' }), 2, 'both alerts sent');
      assert.equal(valueOf(after, 'restock_restock_to_first_alert_seconds_count'), firstAlertsBefore + 1, 'one restock measured once');
      assert.equal(valueOf(after, 'restock_alert_queue_depth', { status: 'queued' }), 0, 'the queue is empty');
      assert.equal(valueOf(after, 'restock_alert_queue_oldest_due_age_seconds'), 0, 'no due alert waits');
      assert.ok((valueOf(after, 'restock_db_pool_max') ?? 0) >= 1, 'the pool size is read at scrape time');
      assert.ok((valueOf(after, 'restock_db_pool_connections', { state: 'total' }) ?? 0) >= 1, 'open connections are read at scrape time');

      // An alert due two minutes ago that no worker has taken: the queue gauges see it at once.
      const sent = await t.database.db.selectFrom('notifications').selectAll().where('store_domain', '=', shop).executeTakeFirstOrThrow();
      const dueAt = new Date(Date.now() - 120_000).toISOString();
      await t.database.write((trx) => trx.insertInto('notifications').values({ ...sent, id: `ntf_metrics_${unique()}`, kind: 'reminder', reminder_of: sent.id, status: 'queued', next_attempt_at: dueAt, sent_at: null }).execute());
      const waiting = await scrape(t);
      assert.equal(valueOf(waiting, 'restock_alert_queue_depth', { status: 'queued' }), 1, 'the waiting alert is counted');
      assert.equal(valueOf(waiting, 'restock_alert_queue_due'), 1, 'and it is due');
      const age = valueOf(waiting, 'restock_alert_queue_oldest_due_age_seconds') ?? 0;
      assert.ok(age >= 119 && age < 300, `the oldest due alert's age is about two minutes: ${age}`);
      await t.database.write((trx) => trx.deleteFrom('notifications').where('store_domain', '=', shop).where('kind', '=', 'reminder').execute());
    });

    it('counts payment challenges and rate-limit refusals', async () => {
      const paid = await t.app.inject({ method: 'POST', url: '/api/v1/alerts/subscribe', headers: { 'content-type': 'application/json' }, payload: '{}' });
      assert.equal(paid.statusCode, 402, paid.body);
      let refused = 0;
      for (let i = 0; i < 5; i++) {
        const res = await t.app.inject({ method: 'POST', url: '/api/agent/register', payload: { type: 'anonymous' } });
        if (res.statusCode === 429) refused++;
      }
      assert.ok(refused >= 2, `registrations over the limit are refused: ${refused}`);
      const samples = await scrape(t);
      assert.ok((valueOf(samples, 'restock_payment_outcomes_total', { protocol: 'none', outcome: 'challenged' }) ?? 0) >= 1, 'the 402 counted as a challenge');
      assert.equal(valueOf(samples, 'restock_rate_limit_refusals_total', { limit: 'registration' }), refused, 'each 429 counted under its limit');
    });

    it('answers 401 problem+json without the token, with a wrong one, and with an agent’s access token', async () => {
      expectProblem(await t.app.inject({ method: 'GET', url: '/metrics' }), 401, 'metrics-unauthorized');
      expectProblem(await t.app.inject({ method: 'GET', url: '/metrics', headers: { authorization: `Bearer ${TOKEN}x` } }), 401, 'metrics-unauthorized');
      expectProblem(await t.app.inject({ method: 'GET', url: '/metrics', headers: { authorization: `Basic ${TOKEN}` } }), 401, 'metrics-unauthorized');
      expectProblem(await t.inject({ method: 'GET', url: '/metrics' }), 401, 'metrics-unauthorized');
    });
  });

  describe(`metrics switched off, or on a port of their own, on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    it('answers 404 at /metrics when neither METRICS_TOKEN nor METRICS_PORT is set', async () => {
      const t = await startTestApp(dialect);
      try {
        expectProblem(await t.app.inject({ method: 'GET', url: '/metrics', headers: { authorization: `Bearer ${TOKEN}` } }), 404, 'not-found');
      } finally {
        await t.close();
      }
    });

    it('serves METRICS_PORT on 127.0.0.1 only, without a token, and not on the service’s port', async () => {
      const t = await onFreePort((port) => startTestApp(dialect, { METRICS_PORT: String(port) }));
      try {
        const url = metricsUrlOf(t);
        assert.match(url, /^http:\/\/127\.0\.0\.1:\d+\/metrics$/);
        assert.equal((await t.inject({ method: 'GET', url: '/api/health' })).statusCode, 200);
        const res = await fetch(url);
        assert.equal(res.status, 200);
        const samples = parseExposition(await res.text());
        assert.equal(valueOf(samples, 'restock_http_request_duration_seconds_count', { method: 'GET', route: '/api/health', status: '200' }), 1, 'the health check counted');
        const wrongPath = await fetch(url.replace('/metrics', '/other'));
        assert.equal(wrongPath.status, 404);
        assert.match(String(wrongPath.headers.get('content-type')), /^application\/problem\+json/);
        assert.equal((await fetch(url, { method: 'POST' })).status, 405);
        expectProblem(await t.app.inject({ method: 'GET', url: '/metrics' }), 404, 'not-found');
        const port = Number(new URL(url).port);
        const external = Object.values(os.networkInterfaces()).flat().find((address) => address && address.family === 'IPv4' && !address.internal);
        if (external) assert.equal(await connects(external.address, port), false, `nothing listens on ${external.address}:${port}`);
      } finally {
        await t.close();
      }
    });
  });
}

/** The listener's address, as the observability feature reports it. */
function metricsUrlOf(t: TestApp): string {
  return `http://127.0.0.1:${t.config.observability.metricsPort}/metrics`;
}

function connects(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

describe('tracing over OTLP/HTTP', () => {
  it('exports a span per request, named by method and route, to OTEL_EXPORTER_OTLP_ENDPOINT, flushed at close', async () => {
    const bodies: Array<{ path: string; type: string; body: string }> = [];
    const receiver = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        bodies.push({ path: `${req.method} ${req.url}`, type: String(req.headers['content-type']), body: Buffer.concat(chunks).toString('utf8') });
        res.writeHead(200, { 'content-type': 'application/json', connection: 'close' });
        res.end('{}');
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    const { port } = receiver.address() as net.AddressInfo;
    try {
      const t = await startTestApp(testDialects()[0]!, { OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}`, OTEL_SERVICE_NAME: 'restock-under-test' });
      try {
        assert.equal((await t.inject({ method: 'GET', url: '/api/health' })).statusCode, 200);
      } finally {
        await t.close();
      }
      assert.ok(bodies.length > 0, 'the exporter posted at least once by the time the app closed');
      assert.ok(bodies.every((b) => b.path === 'POST /v1/traces'), `posts go to /v1/traces: ${bodies.map((b) => b.path).join(', ')}`);
      assert.ok(bodies.every((b) => b.type.startsWith('application/json')), `JSON bodies: ${bodies.map((b) => b.type).join(', ')}`);
      const spans = bodies.flatMap((b) => (JSON.parse(b.body) as OtlpTraces).resourceSpans.flatMap((r) => r.scopeSpans.flatMap((s) => s.spans.map((span) => ({ ...span, resource: r.resource })))));
      const health = spans.find((span) => span.name === 'GET /api/health');
      assert.ok(health, `a span named after the route: ${spans.map((s) => s.name).join(', ')}`);
      const serviceName = health.resource.attributes.find((a) => a.key === 'service.name')?.value.stringValue;
      assert.equal(serviceName, 'restock-under-test');
      const route = health.attributes.find((a) => a.key === 'http.route')?.value.stringValue;
      assert.equal(route, '/api/health');
    } finally {
      await new Promise((resolve) => receiver.close(resolve));
    }
  });
});

interface OtlpAttribute {
  key: string;
  value: { stringValue?: string };
}

interface OtlpTraces {
  resourceSpans: Array<{
    resource: { attributes: OtlpAttribute[] };
    scopeSpans: Array<{ spans: Array<{ name: string; attributes: OtlpAttribute[] }> }>;
  }>;
}
