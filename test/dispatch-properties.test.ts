/**
 * Property tests over the store endpoints an agent bound to a store may call: whatever body
 * reaches the inventory API, suppressions or the settings, and whatever query reaches the read
 * endpoints, the answer is below 500, has no stack trace, is problem+json when refused, and a
 * refused request stores nothing.
 *
 *   RESTOCK_PROPERTY_RUNS=1000 npm test -- test/dispatch-properties.test.ts
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import type { LightMyRequestResponse } from 'fastify';
import { startTestApp, testDialects, type TestApp } from './fixtures/app.ts';
import { call, storeWithAgent, type StoreAgent } from './fixtures/agents.ts';
import { failOnLeakedHandles } from './fixtures/leaks.ts';

failOnLeakedHandles();

const RUNS = Number(process.env.RESTOCK_PROPERTY_RUNS ?? 150);
const SEED = process.env.RESTOCK_PROPERTY_SEED === undefined ? undefined : Number(process.env.RESTOCK_PROPERTY_SEED);
const params = { numRuns: RUNS, ...(SEED === undefined ? {} : { seed: SEED }) };
const STACK = /\n\s*at \S|node:internal|node_modules|\.ts:\d+/;

const oddValue = fc.oneof(
  fc.string({ maxLength: 40 }),
  fc.constantFrom('', 'gid://shopify/Product/1', 'gid://shopify/ProductVariant/2', 'gid://shopify/Product/1\u0000', 'a@b.co', 'complaint', 'fr', 'https://x.test/p', 'javascript:x', '2026-01-01T00:00:00Z', 'smtp://u:p@h:25', '{{shop}}'),
  fc.integer(),
  fc.double(),
  fc.boolean(),
  fc.constant(null),
  fc.array(fc.string({ maxLength: 5 }), { maxLength: 3 }),
  fc.dictionary(fc.string({ maxLength: 8 }), fc.string({ maxLength: 8 }), { maxKeys: 3 }),
);

function bodyOf(keys: string[]) {
  return fc.dictionary(fc.oneof(fc.constantFrom(...keys), fc.string({ maxLength: 8 })), oddValue, { maxKeys: 7 });
}

const stockItem = bodyOf(['productId', 'variantId', 'available', 'published', 'productTitle', 'variantTitle', 'imageUrl', 'productUrl', 'updatedAt']);
const inventoryBody = fc.oneof(
  fc.record({ items: fc.array(stockItem, { maxLength: 4 }) }),
  bodyOf(['items']),
  fc.anything({ maxDepth: 3 }),
);
const suppressionBody = bodyOf(['email', 'reason', 'detail']);
const settingsBody = bodyOf(['batchMultiplier', 'batchIntervalSeconds', 'minStock', 'frequencyCapMinutes', 'locale', 'senderName', 'template', 'smtpUrl']);
const query = fc.oneof(
  fc.constant(''),
  fc.dictionary(fc.constantFrom('status', 'restockId', 'limit', 'productId', 'x'), fc.oneof(fc.string({ maxLength: 20 }), fc.integer().map(String)), { maxKeys: 3 }).map(
    (entries) => `?${new URLSearchParams(entries)}`,
  ),
);

function assertShape(res: LightMyRequestResponse, what: string) {
  const label = `${what}: ${res.statusCode} ${res.body.slice(0, 300)}`;
  assert.ok(res.statusCode < 500, label);
  assert.ok(!STACK.test(res.body), `stack trace: ${label}`);
  if (res.statusCode < 400) return;
  assert.match(String(res.headers['content-type']), /^application\/problem\+json/, label);
  const body = res.json() as Record<string, unknown>;
  assert.equal(body.status, res.statusCode, label);
}

for (const dialect of testDialects()) {
  describe(`store endpoints under arbitrary input on ${dialect}`, () => {
    let t: TestApp;
    let store: StoreAgent;
    before(async () => {
      // With the key, a store's own SMTP URL is accepted (sealed); without it, it is a 501 by design.
      t = await startTestApp(dialect, { RESTOCK_ENCRYPTION_KEY: randomBytes(32).toString('base64') });
      store = await storeWithAgent(t.app, t.database, 'props');
    });
    after(() => t.close());

    async function refusedChangesNothing(send: () => Promise<LightMyRequestResponse>, what: string) {
      const before = await t.tableDigests();
      const res = await send();
      assertShape(res, what);
      if (res.statusCode >= 400) assert.deepEqual(await t.tableDigests(), before, `refused yet stored: ${what}`);
    }

    it('answers any inventory report with a result or a problem', async () => {
      await fc.assert(
        fc.asyncProperty(inventoryBody, async (body) => {
          await refusedChangesNothing(() => call(t.app, 'POST', `/api/v1/stores/${store.domain}/inventory`, { token: store.token, body }), JSON.stringify(body));
        }),
        params,
      );
    });

    it('answers any suppression or settings change with a result or a problem', async () => {
      await fc.assert(
        fc.asyncProperty(suppressionBody, settingsBody, async (suppression, settings) => {
          await refusedChangesNothing(
            () => call(t.app, 'POST', `/api/v1/stores/${store.domain}/suppressions`, { token: store.token, body: suppression }),
            JSON.stringify(suppression),
          );
          await refusedChangesNothing(() => call(t.app, 'PATCH', `/api/v1/stores/${store.domain}`, { token: store.token, body: settings }), JSON.stringify(settings));
        }),
        params,
      );
    });

    it('answers any query on the read endpoints with a result or a problem', async () => {
      await fc.assert(
        fc.asyncProperty(fc.constantFrom('stock', 'queue', 'notifications', 'suppressions', 'outbox'), query, async (path, q) => {
          const res = await call(t.app, 'GET', `/api/v1/stores/${store.domain}/${path}${q}`, { token: store.token });
          assertShape(res, `${path}${q}`);
        }),
        params,
      );
    });

    it('runs the worker over whatever the reports left behind without failing', async () => {
      await t.runWorker();
    });
  });
}
