/**
 * The widget's calls through Shopify's app proxy: `/shopify/proxy/*` answers only requests signed
 * as shopify.dev documents the proxy's signature, takes the store from the signed query, and
 * answers what the storefront routes answer, under the same per-address limits.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import type { LightMyRequestResponse } from 'fastify';
import { after, before, describe, it } from './fixtures/suites.ts';
import { dialectSkip, startTestApp, testDialects, type TestApp } from './fixtures/app.ts';
import { failOnLeakedHandles } from './fixtures/leaks.ts';
import { forwardedQuery, signProxyQuery } from './fixtures/shopify-app-proxy.ts';

failOnLeakedHandles();

const SECRET = `shpss_${randomBytes(16).toString('hex')}`;
const ENV = {
  SHOPIFY_API_KEY: 'restock-proxy-test',
  SHOPIFY_API_SECRET: SECRET,
  RESTOCK_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
};
const PRODUCT = 'gid://shopify/Product/7001';
const SOLD_OUT = 'gid://shopify/ProductVariant/7101';
const IN_STOCK = 'gid://shopify/ProductVariant/7102';

let counter = 0;
const newShop = () => `proxy-${Date.now() % 1_000_000}${++counter}.myshopify.com`;

function assertProblem(res: LightMyRequestResponse, status: number, slug: string) {
  assert.equal(res.statusCode, status, res.body);
  assert.match(res.headers['content-type'] as string, /^application\/problem\+json/);
  assert.equal(res.json().type, `http://restock.test/problems/${slug}`);
}

const availability = (t: TestApp, query: string) => t.app.inject({ method: 'GET', url: `/shopify/proxy/availability?${query}` });
const subscribe = (t: TestApp, query: string, body: unknown) =>
  t.app.inject({
    method: 'POST',
    url: `/shopify/proxy/subscriptions?${query}`,
    headers: { 'content-type': 'application/json' },
    payload: typeof body === 'string' ? body : JSON.stringify(body),
  });

async function storeWithStock(t: TestApp): Promise<string> {
  const shop = newShop();
  await t.app.restock.stores.createStore(shop, `owner@${shop}`);
  await t.app.restock.inventory.reportStock(
    shop,
    [
      { productId: PRODUCT, variantId: SOLD_OUT, available: 0 },
      { productId: PRODUCT, variantId: IN_STOCK, available: 4 },
    ],
    { kind: 'inventory-api', ref: 'app proxy test', verified: false },
  );
  return shop;
}

describe('the app proxy signature', () => {
  it('is computed as in shopify.dev’s worked example (secret "hush", extra=1&extra=2)', () => {
    const params = new URLSearchParams(
      'extra=1&extra=2&shop=shop-name.myshopify.com&logged_in_customer_id=1&path_prefix=%2Fapps%2Fawesome_reviews&timestamp=1317327555',
    );
    assert.equal(signProxyQuery(params, 'hush'), '4c68c8624d737112c91818c11017d24d334b524cb5c2b8ba08daa056f7395ddb');
  });
});

for (const dialect of testDialects()) {
  describe(`the storefront through Shopify's app proxy on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    let t: TestApp;
    before(async () => {
      t = await startTestApp(dialect, ENV);
    });
    after(async () => {
      await t?.close();
    });

    it('answers availability for the signed store exactly as the storefront route does', async () => {
      const shop = await storeWithStock(t);
      const res = await availability(t, forwardedQuery(shop, `productId=${encodeURIComponent(PRODUCT)}`, SECRET));
      assert.equal(res.statusCode, 200, res.body);
      const direct = await t.app.inject({ method: 'GET', url: `/storefront/v1/availability?shop=${shop}&productId=${encodeURIComponent(PRODUCT)}` });
      assert.deepEqual(res.json(), direct.json());
      assert.equal(res.json().soldOut, false);
      assert.equal(res.headers['cache-control'], 'public, max-age=30');
    });

    it('signs a repeated parameter with its values joined by commas, as Shopify does', async () => {
      const shop = await storeWithStock(t);
      const res = await availability(t, forwardedQuery(shop, `productId=${encodeURIComponent(PRODUCT)}&extra=1&extra=2`, SECRET));
      assert.equal(res.statusCode, 200, res.body);
    });

    it('subscribes a shopper for the signed store, whatever store the body names, keeping country and language', async () => {
      const shop = await storeWithStock(t);
      const other = await storeWithStock(t);
      const res = await subscribe(t, forwardedQuery(shop, '', SECRET, { customerId: '42' }), {
        shop: other,
        productId: PRODUCT,
        variantId: SOLD_OUT,
        email: 'Proxy.Shopper@example.com',
        locale: 'de',
        country: 'DE',
      });
      assert.equal(res.statusCode, 201, res.body);
      assert.deepEqual(res.json(), { status: 'subscribed', confirmBy: ['email'] }, 'a shopper in Germany confirms by e-mail first');
      const rows = await t.database.db.selectFrom('subscriptions').selectAll().where('email', '=', 'Proxy.Shopper@example.com').execute();
      assert.deepEqual(
        rows.map((row) => [row.store_domain, row.variant_id, row.locale, row.country, row.status]),
        [[shop, SOLD_OUT, 'de', 'DE', 'pending']],
      );
    });

    it('answers as the storefront does: a store that takes no alerts is 404, a bad address 400, both changing nothing', async () => {
      const shop = await storeWithStock(t);
      const before = await t.tableDigests();
      assertProblem(await subscribe(t, forwardedQuery(newShop(), '', SECRET), { productId: PRODUCT, email: 'a@example.com' }), 404, 'not-found');
      const invalid = await subscribe(t, forwardedQuery(shop, '', SECRET), { productId: PRODUCT, email: 'not an address' });
      assertProblem(invalid, 400, 'validation-failed');
      assert.deepEqual(invalid.json().errors.map((error: { pointer: string }) => error.pointer), ['/body/email']);
      assert.deepEqual(await t.tableDigests(), before);
    });

    describe('refuses with 401 and changes nothing', () => {
      const body = { productId: PRODUCT, variantId: SOLD_OUT, email: 'forger@example.com' };
      const now = () => Math.floor(Date.now() / 1000);

      it('a request without a signature, before reading its body', async () => {
        const shop = await storeWithStock(t);
        const before = await t.tableDigests();
        const unsigned = `shop=${shop}&logged_in_customer_id=&path_prefix=%2Fapps%2Frestock&timestamp=${now()}`;
        assertProblem(await subscribe(t, unsigned, body), 401, 'invalid-proxy-signature');
        assertProblem(await subscribe(t, unsigned, '{not json'), 401, 'invalid-proxy-signature');
        assertProblem(await availability(t, `${unsigned}&productId=${encodeURIComponent(PRODUCT)}`), 401, 'invalid-proxy-signature');
        assertProblem(await availability(t, ''), 401, 'invalid-proxy-signature');
        assert.deepEqual(await t.tableDigests(), before);
      });

      it('a signature made with another secret, or over another query', async () => {
        const shop = await storeWithStock(t);
        const before = await t.tableDigests();
        assertProblem(await subscribe(t, forwardedQuery(shop, '', `shpss_${randomBytes(16).toString('hex')}`), body), 401, 'invalid-proxy-signature');
        const signed = forwardedQuery(shop, '', SECRET);
        const otherShop = signed.replace(`shop=${shop}`, `shop=${newShop()}`);
        assertProblem(await subscribe(t, otherShop, body), 401, 'invalid-proxy-signature');
        assertProblem(await subscribe(t, `${signed}&productId=gid%3A%2F%2Fshopify%2FProduct%2F1`, body), 401, 'invalid-proxy-signature');
        assertProblem(await subscribe(t, signed.replace(/signature=[0-9a-f]+/, 'signature=%E2%9C%93'), body), 401, 'invalid-proxy-signature');
        assert.deepEqual(await t.tableDigests(), before);
      });

      it('a signature over 90 seconds old or ahead, or over a query with no timestamp', async () => {
        const shop = await storeWithStock(t);
        const before = await t.tableDigests();
        assertProblem(await subscribe(t, forwardedQuery(shop, '', SECRET, { timestamp: now() - 120 }), body), 401, 'invalid-proxy-signature');
        assertProblem(await subscribe(t, forwardedQuery(shop, '', SECRET, { timestamp: now() + 120 }), body), 401, 'invalid-proxy-signature');
        const params = new URLSearchParams({ shop, logged_in_customer_id: '', path_prefix: '/apps/restock' });
        params.append('signature', signProxyQuery(params, SECRET));
        const untimed = await subscribe(t, params.toString(), body);
        assertProblem(untimed, 401, 'invalid-proxy-signature');
        assert.match(untimed.json().detail, /timestamp/);
        assert.deepEqual(await t.tableDigests(), before);
      });
    });

    it('refuses a signed query that names more than one store with 400, changing nothing', async () => {
      const shop = await storeWithStock(t);
      const before = await t.tableDigests();
      const res = await subscribe(t, forwardedQuery(shop, `shop=${newShop()}`, SECRET), { productId: PRODUCT, email: 'twice@example.com' });
      assertProblem(res, 400, 'malformed-request');
      assert.deepEqual(await t.tableDigests(), before);
    });

    it('answers 501 not-configured without SHOPIFY_API_KEY, like the other Shopify routes', async () => {
      const bare = await startTestApp(dialect);
      try {
        assertProblem(await bare.app.inject({ method: 'GET', url: '/shopify/proxy/availability?productId=1' }), 501, 'not-configured');
        const post = await bare.app.inject({ method: 'POST', url: '/shopify/proxy/subscriptions', headers: { 'content-type': 'application/json' }, payload: '{}' });
        assertProblem(post, 501, 'not-configured');
      } finally {
        await bare.close();
      }
    });

    it('keeps the storefront routes’ per-address limits', async () => {
      const limited = await startTestApp(dialect, { ...ENV, STOREFRONT_LIMIT_PER_HOUR: '1', STOREFRONT_READ_LIMIT_PER_MINUTE: '1' });
      try {
        const shop = await storeWithStock(limited);
        const read = () => availability(limited, forwardedQuery(shop, `productId=${encodeURIComponent(PRODUCT)}`, SECRET));
        assert.equal((await read()).statusCode, 200);
        assertProblem(await read(), 429, 'rate-limited');
        const signUp = (email: string) => subscribe(limited, forwardedQuery(shop, '', SECRET), { productId: PRODUCT, email });
        assert.equal((await signUp('first@example.com')).statusCode, 201);
        assertProblem(await signUp('second@example.com'), 429, 'rate-limited');
      } finally {
        await limited.close();
      }
    });
  });
}
