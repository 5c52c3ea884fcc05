/**
 * Property tests over the payment headers of the paid operations: whatever arrives in
 * PAYMENT-SIGNATURE or `Authorization: Payment`, with whatever body, the answer is below 500
 * (503 only when a payment network is said to be unreachable), has no stack trace, is
 * problem+json when refused, and a refused request creates nothing.
 *
 *   RESTOCK_PROPERTY_RUNS=1000 npm test -- test/payments-properties.test.ts
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import { startTestApp, testDialects, type TestApp } from './fixtures/app.ts';
import { failOnLeakedHandles } from './fixtures/leaks.ts';

failOnLeakedHandles();

const RUNS = Number(process.env.RESTOCK_PROPERTY_RUNS ?? 150);
const SEED = process.env.RESTOCK_PROPERTY_SEED === undefined ? undefined : Number(process.env.RESTOCK_PROPERTY_SEED);
const params = { numRuns: RUNS, ...(SEED === undefined ? {} : { seed: SEED }) };
const STACK = /\n\s*at \S|node:internal|node_modules|\.ts:\d+/;

const base64Json = fc
  .oneof(fc.constantFrom(null, 0, 'x', [], true), fc.anything({ maxDepth: 3 }))
  .map((value) => Buffer.from(JSON.stringify(value) ?? 'null').toString('base64'));
const x402Like = fc
  .record({
    x402Version: fc.oneof(fc.constant(2), fc.constant(1), fc.integer()),
    accepted: fc.oneof(fc.constant({ scheme: 'exact', network: 'eip155:8453', amount: '50000', asset: '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913', payTo: '0x1111111111111111111111111111111111111111', maxTimeoutSeconds: 300, extra: { name: 'USD Coin', version: '2' } }), fc.anything({ maxDepth: 2 })),
    payload: fc.anything({ maxDepth: 3 }),
  })
  .map((value) => Buffer.from(JSON.stringify(value)).toString('base64'));
const mppLike = fc.oneof(
  fc.string({ maxLength: 60 }).map((s) => `Payment ${s}`),
  fc.anything({ maxDepth: 3 }).map((value) => `Payment ${Buffer.from(JSON.stringify(value) ?? 'null').toString('base64url')}`),
  fc.record({ challenge: fc.dictionary(fc.constantFrom('id', 'realm', 'method', 'intent', 'request', 'expires', 'opaque'), fc.string({ maxLength: 20 })), payload: fc.anything({ maxDepth: 2 }) }).map(
    (value) => `Payment ${Buffer.from(JSON.stringify(value)).toString('base64url')}`,
  ),
);
const headers = fc.oneof(
  fc.record({ 'payment-signature': fc.oneof(fc.string({ maxLength: 80 }).filter((s) => /^[\x21-\x7e]*$/.test(s)), base64Json, x402Like) }),
  fc.record({ authorization: mppLike.filter((s) => /^[\x20-\x7e]*$/.test(s)) }),
  fc.record({ 'x-payment': base64Json }),
);
const body = fc.oneof(
  fc.constant({ productId: 'gid://shopify/Product/5', email: 'prop@example.com' }),
  fc.constant({ plan: 'starter', shop: 'prop.myshopify.com' }),
  fc.anything({ maxDepth: 2 }),
);
const target = fc.constantFrom(['POST', '/api/v1/alerts/subscribe'], ['POST', '/api/v1/plans/checkout'], ['GET', '/api']) as fc.Arbitrary<[string, string]>;

for (const dialect of testDialects()) {
  describe(`payment headers under arbitrary input on ${dialect}`, () => {
    let t: TestApp;
    before(async () => {
      t = await startTestApp(dialect, {
        X402_PAY_TO: '0x1111111111111111111111111111111111111111',
        // Nothing listens here: a proof that reaches the facilitator finds it unreachable.
        X402_FACILITATOR_URL: 'http://127.0.0.1:9',
        STRIPE_SECRET_KEY: 'sk_test_property',
        STRIPE_NETWORK_ID: 'profile_property',
        STRIPE_API_URL: 'http://127.0.0.1:9',
        MPP_TEMPO_RECIPIENT: '0x2222222222222222222222222222222222222222',
        MPP_TEMPO_RPC_URL: 'http://127.0.0.1:9',
        PAYMENT_SETTLE_TIMEOUT_MS: '500',
      });
    });
    after(() => t.close());

    it('answers every payment header and body below 500, as problem+json, creating nothing', async () => {
      const start = await t.tableDigests();
      await fc.assert(
        fc.asyncProperty(target, headers, body, async ([method, url], extra, payload) => {
          const res = await t.app.inject({
            method: method as 'GET',
            url,
            headers: { ...extra, ...(method === 'POST' ? { 'content-type': 'application/json' } : {}) },
            ...(method === 'POST' ? { payload: JSON.stringify(payload) ?? 'null' } : {}),
          });
          const label = `${method} ${url} ${JSON.stringify(extra).slice(0, 200)}: ${res.statusCode} ${res.body.slice(0, 300)}`;
          assert.ok(res.statusCode < 500 || (res.statusCode === 503 && /payment-network-unreachable/.test(res.body)), label);
          assert.ok(!STACK.test(res.body), `stack trace: ${label}`);
          assert.ok(res.statusCode >= 400, label);
          assert.match(String(res.headers['content-type']), /^application\/problem\+json/, label);
        }),
        params,
      );
      assert.deepEqual(await t.tableDigests(), start);
    });
  });
}
