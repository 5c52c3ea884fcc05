import assert from 'node:assert/strict';
import { after, before, describe, it } from './fixtures/suites.ts';
import { failOnLeakedHandles } from './fixtures/leaks.ts';
import { dialectSkip, startTestApp, testDialects, type TestApp } from './fixtures/app.ts';

failOnLeakedHandles();

const SUBSCRIBE = '/api/v1/alerts/subscribe';
const CHECKOUT = '/api/v1/plans/checkout';
let n = 0;
const key = () => `key-${process.pid}-${++n}-${Date.now()}`;
const body = () => ({ productId: 'gid://shopify/Product/7', email: `idem${++n}.${Date.now()}@example.com` });

for (const dialect of testDialects()) {
  describe(`Idempotency-Key on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    let t: TestApp;
    before(async () => {
      t = await startTestApp(dialect);
    });
    after(() => t.close());

    it('replays the stored answer for the same key and body', async () => {
      const k = key();
      const first = await t.post(CHECKOUT, { plan: 'starter', shop: 'idem.myshopify.com' }, { 'idempotency-key': k });
      const before = await t.tableDigests();
      const again = await t.post(CHECKOUT, { shop: 'idem.myshopify.com', plan: 'starter' }, { 'idempotency-key': k });
      assert.equal(first.statusCode, 200);
      assert.equal(again.statusCode, 200);
      assert.equal(again.body, first.body, 'same session, not a second one');
      assert.equal(again.headers['idempotent-replayed'], 'true');
      assert.equal(first.headers['idempotent-replayed'], undefined);
      assert.match(again.headers['content-type'] as string, /^application\/json/);
      assert.deepEqual(await t.tableDigests(), before, 'a replay stores nothing');
    });

    it('accepts the key as an RFC 8941 string too', async () => {
      const k = key();
      const b = body();
      const first = await t.post(SUBSCRIBE, b, { 'idempotency-key': `"${k}"` });
      const again = await t.post(SUBSCRIBE, b, { 'idempotency-key': k });
      assert.equal(again.headers['idempotent-replayed'], 'true');
      assert.equal(again.body, first.body);
    });

    it('refuses the same key with another body (422) and stores nothing', async () => {
      const k = key();
      await t.post(SUBSCRIBE, body(), { 'idempotency-key': k });
      const before = await t.tableDigests();
      const other = await t.post(SUBSCRIBE, body(), { 'idempotency-key': k });
      assert.equal(other.statusCode, 422);
      assert.equal(other.json().type, 'http://restock.test/problems/idempotency-key-reused');
      assert.deepEqual(await t.tableDigests(), before);
    });

    it('keeps keys apart per operation', async () => {
      const k = key();
      const sub = await t.post(SUBSCRIBE, body(), { 'idempotency-key': k });
      const checkout = await t.post(CHECKOUT, { plan: 'growth', shop: 'apart.myshopify.com' }, { 'idempotency-key': k });
      assert.equal(sub.statusCode, 200);
      assert.equal(checkout.statusCode, 200);
      assert.ok(checkout.json().checkoutUrl);
    });

    it('keeps only successes: a refused request leaves the key free and changes nothing', async () => {
      const k = key();
      const invalid = await t.post(SUBSCRIBE, { productId: 'nope', email: 'a@example.com' }, { 'idempotency-key': k });
      assert.equal(invalid.statusCode, 400);
      const valid = await t.post(SUBSCRIBE, body(), { 'idempotency-key': k });
      assert.equal(valid.statusCode, 200, 'a rejected request does not use up the key');

      const { subscriptionId } = (await t.post(SUBSCRIBE, body())).json();
      const { unsubscribeUrl } = (await t.inject({ method: 'GET', url: `/api/v1/alerts/${subscriptionId}` })).json();
      await t.inject({ method: 'POST', url: new URL(unsubscribeUrl).pathname });
      const k2 = key();
      const before = await t.tableDigests();
      const conflict = await t.inject({ method: 'DELETE', url: `/api/v1/alerts/${subscriptionId}`, headers: { 'idempotency-key': k2 } });
      assert.equal(conflict.statusCode, 409);
      assert.deepEqual(await t.tableDigests(), before);
      const again = await t.inject({ method: 'DELETE', url: `/api/v1/alerts/${subscriptionId}`, headers: { 'idempotency-key': k2 } });
      assert.equal(again.statusCode, 409);
      assert.equal(again.headers['idempotent-replayed'], undefined, 'ran again rather than replayed');
    });

    it('replays a successful DELETE', async () => {
      const { subscriptionId } = (await t.post(SUBSCRIBE, body())).json();
      const k = key();
      const cancel = await t.inject({ method: 'DELETE', url: `/api/v1/alerts/${subscriptionId}`, headers: { 'idempotency-key': k } });
      const cancelAgain = await t.inject({ method: 'DELETE', url: `/api/v1/alerts/${subscriptionId}`, headers: { 'idempotency-key': k } });
      assert.equal(cancel.statusCode, 200);
      assert.equal(cancelAgain.headers['idempotent-replayed'], 'true');
      assert.equal(cancelAgain.body, cancel.body);
    });

    it('concurrent requests with one key run the operation once', async () => {
      const k = key();
      const b = { plan: 'starter', shop: 'race.myshopify.com' };
      const before = await t.counts();
      const answers = await Promise.all(Array.from({ length: 10 }, () => t.post(CHECKOUT, b, { 'idempotency-key': k })));
      const ok = answers.filter((r) => r.statusCode === 200);
      const busy = answers.filter((r) => r.statusCode === 409);
      assert.equal(ok.length + busy.length, answers.length, answers.map((r) => r.statusCode).join(','));
      assert.ok(ok.length >= 1);
      assert.equal(new Set(ok.map((r) => r.json().sessionId)).size, 1);
      for (const r of busy) {
        assert.equal(r.json().type, 'http://restock.test/problems/idempotency-key-in-use');
        assert.equal(r.headers['retry-after'], '1');
      }
      assert.equal((await t.counts()).checkout_sessions, before.checkout_sessions + 1);
      const later = await t.post(CHECKOUT, b, { 'idempotency-key': k });
      assert.equal(later.json().sessionId, ok[0]!.json().sessionId);
    });

    it('a claim abandoned by a crashed process is taken over after a minute', async () => {
      const k = key();
      const b = body();
      await t.database.db
        .insertInto('idempotency_keys')
        .values({
          scope: `anyone POST ${SUBSCRIBE}`, key: k, fingerprint: 'whatever', state: 'processing',
          status_code: null, content_type: null, body: null,
          created_at: new Date(Date.now() - 120_000).toISOString(), expires_at: new Date(Date.now() + 3_600_000).toISOString(),
        })
        .execute();
      const res = await t.post(SUBSCRIBE, b, { 'idempotency-key': k });
      assert.equal(res.statusCode, 200);
    });

    it('an expired key is free again, whatever it was used for', async () => {
      const k = key();
      const first = await t.post(SUBSCRIBE, body(), { 'idempotency-key': k });
      assert.equal(first.statusCode, 200);
      await t.database.db.updateTable('idempotency_keys').set({ expires_at: '2020-01-01T00:00:00.000Z' }).where('key', '=', k).execute();
      const other = await t.post(SUBSCRIBE, body(), { 'idempotency-key': k });
      assert.equal(other.statusCode, 200, 'not 422: the old record has expired');
      assert.equal(other.headers['idempotent-replayed'], undefined);
      assert.notEqual(other.json().subscriptionId, first.json().subscriptionId);
    });

    it('routes that do not opt in ignore the header', async () => {
      const res = await t.inject({ method: 'GET', url: '/api/health', headers: { 'idempotency-key': 'tab\there' } });
      assert.equal(res.statusCode, 200);
    });

    for (const bad of ['', ' ', 'a'.repeat(256), 'tab\there', 'ünïcode']) {
      it(`rejects the malformed key ${JSON.stringify(bad.slice(0, 12))} with 400`, async () => {
        const before = await t.tableDigests();
        const res = await t.inject({
          method: 'POST', url: SUBSCRIBE,
          headers: { 'content-type': 'application/json', 'idempotency-key': Buffer.from(bad, 'latin1').toString('latin1') },
          payload: JSON.stringify(body()),
        });
        assert.equal(res.statusCode, 400, res.body);
        assert.ok(res.json().errors.some((e: { pointer: string }) => e.pointer === '/headers/idempotency-key'));
        assert.deepEqual(await t.tableDigests(), before);
      });
    }
  });
}
