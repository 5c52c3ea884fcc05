import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { after, before, describe, it } from './fixtures/suites.ts';
import type { LightMyRequestResponse } from 'fastify';
import { buildShopify } from '../src/shopify/feature.ts';
import { storefrontService } from '../src/storefront/feature.ts';
import { failOnLeakedHandles } from './fixtures/leaks.ts';
import { dialectSkip, startTestApp, testDialects, type TestApp } from './fixtures/app.ts';
import { deliverWebhook, installByTokenExchange, productUpdatePayload, shopifyTestApp, signWebhook, type ShopifyDelivery } from './fixtures/shopify-app.ts';
import { startShopifyAdmin, type FakeProduct, type RecordedRequest, type ShopifyAdminStandIn } from './fixtures/shopify-admin.ts';

failOnLeakedHandles();

const { apiKey: API_KEY, apiSecret: API_SECRET, scopes: SCOPES, env: ENV } = shopifyTestApp('restock-test-app');
const WEBHOOKS = '/webhooks/shopify';
/** The library answers OAuth requests from bots (by User-Agent) with 410; a merchant uses a browser. */
const BROWSER = { 'user-agent': 'Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Safari/605.1.15' };
const SUBSCRIBE = '/api/v1/alerts/subscribe';

let counter = 0;
const unique = () => `${Date.now() % 1_000_000}${++counter}`;
const newShop = () => `store-${unique()}.myshopify.com`;
const newId = () => Number(`${Date.now() % 1_000_000}${String(++counter).padStart(4, '0')}`);

const sign = (body: string, secret = API_SECRET) => signWebhook(body, secret);
const deliver = (t: TestApp, delivery: ShopifyDelivery) => deliverWebhook(t, API_SECRET, delivery);

function fakeProduct(overrides: Partial<FakeProduct> = {}, quantity = 0): FakeProduct {
  const id = newId();
  return {
    id,
    title: `Boots ${id}`,
    handle: `boots-${id}`,
    status: 'ACTIVE',
    publishedAt: '2024-01-01T00:00:00Z',
    imageUrl: `https://cdn.example.com/${id}.jpg`,
    variants: [{ id: newId(), title: 'Size 42', inventoryItemId: newId(), inventoryQuantity: quantity }],
    ...overrides,
  };
}

const productGid = (product: FakeProduct) => `gid://shopify/Product/${product.id}`;
const variantGid = (product: FakeProduct, index = 0) => `gid://shopify/ProductVariant/${product.variants[index]!.id}`;

async function subscribe(t: TestApp, product: FakeProduct, email: string, shop?: string) {
  const res = await t.post(SUBSCRIBE, { productId: productGid(product), variantId: variantGid(product), email, ...(shop ? { shop } : {}) });
  assert.equal(res.statusCode, 200, res.body);
  return res.json().subscriptionId as string;
}

/** A store with the app installed: Shopify sends webhooks only for those, and the worker may read its products. */
async function installedShop(t: TestApp, shopify: ShopifyAdminStandIn): Promise<string> {
  const shop = newShop();
  await installByTokenExchange(t, shopify, shop);
  return shop;
}

async function events(t: TestApp, shop: string) {
  return t.database.db.selectFrom('shopify_webhook_events').selectAll().where('store_domain', '=', shop).orderBy('received_at').execute();
}

async function restocks(t: TestApp, product: FakeProduct): Promise<number> {
  const row = await t.database.db
    .selectFrom('restocks')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('product_id', '=', productGid(product))
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

async function stock(t: TestApp, shop: string, product: FakeProduct, index = 0) {
  return t.database.db
    .selectFrom('inventory_variants')
    .selectAll()
    .where('store_domain', '=', shop)
    .where('product_id', '=', productGid(product))
    .where('variant_id', '=', variantGid(product, index))
    .executeTakeFirst();
}

async function storeRow(t: TestApp, shop: string) {
  return t.database.db.selectFrom('stores').selectAll().where('domain', '=', shop).executeTakeFirst();
}

async function connectionRow(t: TestApp, shop: string) {
  return t.database.db.selectFrom('store_connections').selectAll().where('store_domain', '=', shop).where('platform', '=', 'shopify').executeTakeFirst();
}

function assertProblem(res: LightMyRequestResponse, status: number, slug: string) {
  assert.equal(res.statusCode, status, res.body);
  assert.match(res.headers['content-type'] as string, /^application\/problem\+json/);
  assert.equal(res.json().type, `http://restock.test/problems/${slug}`);
}

for (const dialect of testDialects()) {
  describe(`Shopify app on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    let t: TestApp;
    let shopify: ShopifyAdminStandIn;
    before(async () => {
      shopify = await startShopifyAdmin({ apiKey: API_KEY, apiSecret: API_SECRET, scopes: SCOPES });
      t = await startTestApp(dialect, ENV);
    });
    after(async () => {
      await t.close();
      await shopify.close();
    });

    it("runs the webhook queue, Flow's trigger queue, and reconciliation unless its interval is 0", () => {
      const jobs = t.app.restock.platforms.shopify!.jobs ?? [];
      assert.deepEqual(jobs.map((job) => job.name), ['shopify-webhooks', 'shopify-reconcile', 'shopify-flow-triggers']);
      assert.equal(jobs[0]!.everyMs, undefined, 'the queue is looked at on every turn');
      assert.equal(jobs[1]!.everyMs, 60_000, 'due stores are looked for every minute');
      const { stores, inventory, alerts, dispatch, billing, conversions } = t.app.restock;
      const mail = { kind: 'outbox' as const, send: async () => {}, close: async () => {} };
      const storefront = storefrontService({ stores, inventory, alerts });
      const deps = { database: t.database, log: t.app.log, mail, stores, inventory, alerts, dispatch, billing, storefront, orders: conversions };
      const never = buildShopify({ ...deps, config: { ...t.config, dispatch: { ...t.config.dispatch, reconcileIntervalMinutes: 0 } } });
      assert.deepEqual(never.jobs.map((job) => job.name), ['shopify-webhooks', 'shopify-flow-triggers']);
      assert.deepEqual(buildShopify({ ...deps, config: { ...t.config, platforms: { ...t.config.platforms, shopify: undefined } } }).jobs, []);
    });

    describe('webhook intake', () => {
      it('refuses a forged, a missing or a foreign-secret HMAC with 401 and stores nothing', async () => {
        const shop = newShop();
        const before = await t.tableDigests();
        const payload = productUpdatePayload(fakeProduct({}, 5), new Date().toISOString());
        const forged = await deliver(t, { topic: 'products/update', shop, payload, hmac: sign('something else') });
        assertProblem(forged, 401, 'invalid-webhook');
        assertProblem(await deliver(t, { topic: 'products/update', shop, payload, hmac: null }), 401, 'invalid-webhook');
        assertProblem(await deliver(t, { topic: 'products/update', shop, payload, hmac: sign(JSON.stringify(payload), 'another-apps-secret') }), 401, 'invalid-webhook');
        assertProblem(await deliver(t, { topic: 'products/update', shop, payload: '', hmac: sign('') }), 401, 'invalid-webhook');
        assert.deepEqual(await t.tableDigests(), before);
      });

      it('refuses a body that is not UTF-8, since what was signed is not what would be checked', async () => {
        const shop = newShop();
        const body = Buffer.concat([Buffer.from('{"a":"'), Buffer.from([0xff, 0xfe]), Buffer.from('"}')]);
        const res = await t.app.inject({
          method: 'POST',
          url: WEBHOOKS,
          headers: {
            'content-type': 'application/json',
            'x-shopify-topic': 'products/update',
            'x-shopify-shop-domain': shop,
            'x-shopify-api-version': '2026-07',
            'x-shopify-webhook-id': 'wh-bytes',
            'x-shopify-hmac-sha256': createHmac('sha256', API_SECRET).update(body).digest('base64'),
          },
          payload: body,
        });
        assertProblem(res, 401, 'invalid-webhook');
        assert.equal((await events(t, shop)).length, 0);
      });

      it('queues a valid delivery and answers 200 at once, doing no stock work in the request', async () => {
        const shop = await installedShop(t, shopify);
        const product = fakeProduct({}, 5);
        shopify.setProduct(shop, product);
        const stockBefore = (await t.counts()).inventory_variants;
        const shopifyCalls = shopify.requests.length;
        const res = await deliver(t, { topic: 'products/update', shop, payload: productUpdatePayload(product, new Date().toISOString()), eventId: 'ev-queued-1' });
        assert.equal(res.statusCode, 200, res.body);
        assert.deepEqual(res.json(), { status: 'queued' });
        // Answered before any work: the event is untouched by a worker and nobody asked Shopify anything.
        const rows = await events(t, shop);
        assert.equal(rows.length, 1);
        assert.equal(rows[0]!.status, 'queued');
        assert.equal(rows[0]!.attempts, 0, 'no worker has taken it yet');
        assert.equal(shopify.requests.length, shopifyCalls, 'the request itself calls no Shopify API');
        assert.equal(rows[0]!.topic, 'PRODUCTS_UPDATE');
        assert.equal(rows[0]!.event_id, 'ev-queued-1');
        assert.equal((await t.counts()).inventory_variants, stockBefore, 'the request itself reports no stock');
        await t.runWorker();
        assert.equal((await events(t, shop))[0]!.status, 'done');
        assert.equal((await stock(t, shop, product))?.available, 5);
      });

      it('checks the bytes as sent, whatever the Content-Type says', async () => {
        const shop = newShop();
        const product = fakeProduct();
        const res = await deliver(t, { topic: 'products/update', shop, payload: productUpdatePayload(product, new Date().toISOString()), headers: { 'content-type': 'text/plain; charset=utf-8' } });
        assert.equal(res.statusCode, 200, res.body);
        const body = `  ${JSON.stringify(productUpdatePayload(product, new Date().toISOString()))}\n`;
        const spaced = await deliver(t, { topic: 'products/update', shop, payload: body });
        assert.equal(spaced.statusCode, 200, 'whitespace a JSON parser would drop is part of what was signed');
        await t.runWorker();
      });

      it('keys by the webhook id when a delivery has no event id', async () => {
        const shop = newShop();
        const res = await deliver(t, { topic: 'products/update', shop, payload: productUpdatePayload(fakeProduct(), new Date().toISOString()), eventId: null, webhookId: 'wh-only-1' });
        assert.equal(res.statusCode, 200);
        assert.equal((await events(t, shop))[0]!.event_id, 'wh-only-1');
        await t.runWorker();
      });

      it('takes payloads beyond the API body limit, up to 1 MiB', async () => {
        const shop = newShop();
        const product = fakeProduct();
        product.variants = Array.from({ length: 100 }, (_, i) => ({ id: newId(), title: `Size ${i} ${'x'.repeat(200)}`, inventoryItemId: newId(), inventoryQuantity: 0 }));
        const payload = productUpdatePayload(product, new Date().toISOString());
        assert.ok(JSON.stringify(payload).length > t.config.bodyLimitBytes);
        assert.equal((await deliver(t, { topic: 'products/update', shop, payload })).statusCode, 200);
        const tooLarge = await deliver(t, { topic: 'products/update', shop, payload: { padding: 'x'.repeat(1024 * 1024) } });
        assertProblem(tooLarge, 413, 'payload-too-large');
        assert.equal(tooLarge.json().limitBytes, 1024 * 1024);
        assert.equal((await events(t, shop)).length, 1);
        await t.runWorker();
      });

      it('records a topic it does not act on as done, and answers 200', async () => {
        const shop = newShop();
        const res = await deliver(t, { topic: 'orders/updated', shop, payload: { id: 1 } });
        assert.equal(res.statusCode, 200);
        assert.deepEqual(res.json(), { status: 'ignored' });
        const [row] = await events(t, shop);
        assert.equal(row!.status, 'done');
        assert.equal(row!.topic, 'ORDERS_UPDATED');
      });

      it('refuses a signed delivery whose shop header is not a store domain', async () => {
        const res = await deliver(t, { topic: 'products/update', shop: 'evil.example.com', payload: { id: 1 } });
        assertProblem(res, 400, 'malformed-request');
      });
    });

    describe('products/update', () => {
      it('deduplicates by event id: the same event delivered twice is one row and one restock', async () => {
        const shop = await installedShop(t, shopify);
        const product = fakeProduct({}, 5);
        shopify.setProduct(shop, product);
        await subscribe(t, product, `dup-${unique()}@example.com`);
        const eventId = `ev-${unique()}`;
        const payload = productUpdatePayload(product, new Date().toISOString(), 5);
        assert.deepEqual((await deliver(t, { topic: 'products/update', shop, payload, eventId })).json(), { status: 'queued' });
        assert.deepEqual((await deliver(t, { topic: 'products/update', shop, payload, eventId })).json(), { status: 'duplicate' });
        await t.runWorker();
        assert.deepEqual((await deliver(t, { topic: 'products/update', shop, payload, eventId })).json(), { status: 'duplicate' }, 'still a duplicate once handled');
        await t.runWorker();
        assert.equal((await events(t, shop)).length, 1);
        assert.equal(await restocks(t, product), 1);
      });

      it('a variant going from 0 to 5 with a waiting subscriber makes one restock', async () => {
        const shop = await installedShop(t, shopify);
        const product = fakeProduct();
        shopify.setProduct(shop, product);
        await subscribe(t, product, `restock-${unique()}@example.com`);
        await deliver(t, { topic: 'products/update', shop, payload: productUpdatePayload(product, new Date().toISOString(), 0) });
        await t.runWorker();
        assert.equal((await stock(t, shop, product))?.available, 0);
        assert.equal(await restocks(t, product), 0);
        // Shopify has the new stock when it says so; the worker reads it before alerting anyone.
        product.variants[0]!.inventoryQuantity = 5;
        shopify.setProduct(shop, product);
        await deliver(t, { topic: 'products/update', shop, payload: productUpdatePayload(product, new Date(Date.now() + 1000).toISOString(), 5) });
        await t.runWorker();
        const row = await stock(t, shop, product);
        assert.equal(row?.available, 5);
        assert.equal(row?.inventory_item_id, `gid://shopify/InventoryItem/${product.variants[0]!.inventoryItemId}`);
        assert.equal(row?.product_url, `https://${shop}/products/${product.handle}`);
        assert.equal(row?.image_url, product.imageUrl);
        assert.equal(row?.variant_title, 'Size 42');
        assert.equal(await restocks(t, product), 1);
      });

      it('drops a stale update: an older updated_at than one applied changes nothing', async () => {
        const shop = await installedShop(t, shopify);
        const product = fakeProduct();
        shopify.setProduct(shop, product);
        await subscribe(t, product, `stale-${unique()}@example.com`);
        const now = Date.now();
        await deliver(t, { topic: 'products/update', shop, payload: productUpdatePayload(product, new Date(now).toISOString(), 0) });
        await t.runWorker();
        await deliver(t, { topic: 'products/update', shop, payload: productUpdatePayload(product, new Date(now - 3600_000).toISOString(), 9) });
        await t.runWorker();
        assert.equal((await stock(t, shop, product))?.available, 0);
        assert.equal(await restocks(t, product), 0);
        assert.ok((await events(t, shop)).every((row) => row.status === 'done'));
      });

      it('an unpublished or draft product is not on sale, so its stock is no restock', async () => {
        const shop = await installedShop(t, shopify);
        const product = fakeProduct({ status: 'DRAFT' }, 5);
        shopify.setProduct(shop, product);
        await subscribe(t, product, `draft-${unique()}@example.com`);
        await deliver(t, { topic: 'products/update', shop, payload: productUpdatePayload(product, '2025-03-01T10:00:00Z', 5) });
        await t.runWorker();
        assert.equal((await stock(t, shop, product))?.published, 0);
        assert.equal(await restocks(t, product), 0);
      });

      it('fails an event whose payload does not fit its topic at once, with the reason', async () => {
        const shop = newShop();
        await deliver(t, { topic: 'products/update', shop, payload: { id: 1, title: 'no ids' } });
        await t.runWorker();
        const [row] = await events(t, shop);
        assert.equal(row!.status, 'failed');
        assert.match(row!.error ?? '', /admin_graphql_api_id/);
      });
    });

    describe('installation', () => {
      /** Webhooks are declared in the app's configuration: installing subscribes nothing by API. */
      const subscriptionCalls = (shop: string) => shopify.requests.filter((request) => request.shop === shop && request.field === 'webhookSubscriptionCreate').length;

      it('token exchange installs the store with a sealed token and subscribes nothing (webhooks are in the app configuration)', async () => {
        const shop = newShop();
        const res = await installByTokenExchange(t, shopify, shop, 'Owner@Example.COM');
        assert.deepEqual(res.json(), {
          shop,
          status: 'installed',
          scopes: SCOPES,
        });
        const row = await storeRow(t, shop);
        const token = shopify.accessToken(shop)!;
        assert.ok(token);
        assert.equal(row?.status, 'active');
        assert.equal(row?.platform, 'shopify');
        assert.equal(row?.owner_email, 'Owner@example.com');
        const connection = await connectionRow(t, shop);
        assert.equal(connection?.scopes, SCOPES);
        assert.ok(connection?.credentials_sealed);
        assert.ok(!connection.credentials_sealed.includes(token), 'the token is sealed');
        assert.ok(!connection.credentials_sealed.includes(token.slice(6)), 'not even its random part is visible');
        assert.equal(subscriptionCalls(shop), 0);

        // Opening the app again exchanges again.
        const again = await t.app.inject({ method: 'POST', url: '/shopify/token-exchange', headers: { authorization: `Bearer ${await shopify.sessionToken(shop)}` } });
        assert.equal(again.statusCode, 200, again.body);
        assert.equal(subscriptionCalls(shop), 0);
      });

      it('refuses a session token not signed for this app, without calling Shopify', async () => {
        const shop = newShop();
        shopify.addShop(shop, { email: `owner@${shop}` });
        const calls = shopify.requests.length;
        const foreign = await t.app.inject({
          method: 'POST',
          url: '/shopify/token-exchange',
          headers: { authorization: `Bearer ${await shopify.sessionToken(shop, { aud: 'another-app' })}` },
        });
        assertProblem(foreign, 401, 'invalid-token');
        const mismatched = await t.app.inject({
          method: 'POST',
          url: '/shopify/token-exchange',
          headers: { authorization: `Bearer ${await shopify.sessionToken(shop, { iss: 'https://other-store.myshopify.com/admin' })}` },
        });
        assertProblem(mismatched, 401, 'invalid-token');
        assertProblem(await t.app.inject({ method: 'POST', url: '/shopify/token-exchange' }), 401, 'invalid-token');
        assert.equal(shopify.requests.length, calls);
        assert.equal(await storeRow(t, shop), undefined);
      });

      it('answers 502 and stores nothing when Shopify fails during the install', async () => {
        const steps: Array<[string, (request: RecordedRequest) => boolean]> = [
          ['the token exchange', (request) => request.path === '/admin/oauth/access_token'],
          ['reading the shop', (request) => request.field === 'shop'],
        ];
        for (const [step, when] of steps) {
          const shop = newShop();
          shopify.addShop(shop, { email: `owner@${shop}` });
          shopify.failNext(1, (request) => request.shop === shop && when(request));
          const res = await t.app.inject({ method: 'POST', url: '/shopify/token-exchange', headers: { authorization: `Bearer ${await shopify.sessionToken(shop)}` } });
          assertProblem(res, 502, 'upstream-failed');
          assert.match(res.json().detail, /HTTP 500/);
          assert.equal(await storeRow(t, shop), undefined, `nothing stored when ${step} failed`);
        }
      });

      it('OAuth: begin sets the signed state cookie and redirects; the signed callback installs the store', async () => {
        const shop = newShop();
        shopify.addShop(shop, { email: `oauth@${shop}` });
        const begin = await t.app.inject({ method: 'GET', url: `/shopify/install?shop=${shop}`, headers: BROWSER });
        assert.equal(begin.statusCode, 302, begin.body);
        const location = new URL(begin.headers.location as string);
        assert.equal(location.origin, `https://${shop}`);
        assert.equal(location.pathname, '/admin/oauth/authorize');
        assert.equal(location.searchParams.get('client_id'), API_KEY);
        assert.equal(location.searchParams.get('scope'), SCOPES);
        assert.equal(location.searchParams.get('redirect_uri'), 'http://restock.test/shopify/callback');
        const state = location.searchParams.get('state')!;
        const cookies = cookieHeader(begin);
        assert.match(cookies, new RegExp(`shopify_app_state=${state}`));
        assert.match(cookies, /shopify_app_state\.sig=/);

        // Shopify's redirect back: its query signed with the app secret (hex HMAC of the sorted query).
        const query = signedCallbackQuery({ code: shopify.grantCode(shop), host: Buffer.from(`${shop}/admin`).toString('base64url'), shop, state, timestamp: String(Math.floor(Date.now() / 1000)) });
        const callback = await t.app.inject({ method: 'GET', url: `/shopify/callback?${query}`, headers: { ...BROWSER, cookie: cookies } });
        assert.equal(callback.statusCode, 302, callback.body);
        assert.equal(callback.headers.location, `https://${shop}/admin/apps/${API_KEY}`);
        assert.match(String(callback.headers['set-cookie']), /shopify_app_state=;/, 'the state cookie is cleared');
        const row = await storeRow(t, shop);
        assert.equal(row?.status, 'active');
        assert.equal(row?.owner_email, `oauth@${shop}`);
        const connection = await connectionRow(t, shop);
        assert.ok(connection?.credentials_sealed && !connection.credentials_sealed.includes(shopify.accessToken(shop)!));
        assert.equal(subscriptionCalls(shop), 0);
      });

      it('OAuth: a callback with a wrong signature, a wrong state or no cookie installs nothing', async () => {
        const shop = newShop();
        shopify.addShop(shop, { email: `oauth@${shop}` });
        const begin = await t.app.inject({ method: 'GET', url: `/shopify/install?shop=${shop}`, headers: BROWSER });
        const state = new URL(begin.headers.location as string).searchParams.get('state')!;
        const cookies = cookieHeader(begin);
        const fields = { code: shopify.grantCode(shop), shop, state, timestamp: String(Math.floor(Date.now() / 1000)) };
        const tampered = signedCallbackQuery(fields).replace(/hmac=[0-9a-f]+/, `hmac=${'0'.repeat(64)}`);
        const cases = [
          { url: `/shopify/callback?${tampered}`, cookie: cookies },
          { url: `/shopify/callback?${signedCallbackQuery({ ...fields, state: 'forged-state' })}`, cookie: cookies },
          { url: `/shopify/callback?${signedCallbackQuery(fields)}`, cookie: '' },
          { url: `/shopify/callback?${signedCallbackQuery(fields)}`, cookie: cookies.replace(/shopify_app_state=[^;]+/, 'shopify_app_state=forged-state') },
        ];
        for (const { url, cookie } of cases) {
          const res = await t.app.inject({ method: 'GET', url, headers: cookie ? { ...BROWSER, cookie } : BROWSER });
          assertProblem(res, 403, 'forbidden');
        }
        assert.equal(await storeRow(t, shop), undefined);
        assert.equal(shopify.accessToken(shop), undefined, 'the code was never traded');
      });

      it('the app URL opened in the admin with its id_token installs by token exchange, then only shows the app', async () => {
        const shop = newShop();
        shopify.addShop(shop, { email: `embedded@${shop}` });
        const appUrl = async (tokenShop = shop) =>
          `/shopify/install?${new URLSearchParams({ embedded: '1', host: Buffer.from(`admin.shopify.com/store/${shop}`).toString('base64url'), id_token: await shopify.sessionToken(tokenShop), shop, timestamp: String(Math.floor(Date.now() / 1000)) })}`;
        const first = await t.app.inject({ method: 'GET', url: await appUrl(), headers: BROWSER });
        assert.equal(first.statusCode, 303, first.body);
        assert.match(first.headers.location as string, /^\/dashboard\?embedded=1&shop=[^&]+&host=[^&]+&id_token=/, 'inside the admin the app is the dashboard');
        assert.equal(first.headers['content-security-policy'], `frame-ancestors https://${shop} https://admin.shopify.com`);
        const dashboard = await t.app.inject({ method: 'GET', url: first.headers.location as string, headers: BROWSER });
        assert.equal(dashboard.statusCode, 200, dashboard.body);
        assert.match(dashboard.body, new RegExp(shop.replace(/\./g, '\\.')));
        assert.equal(dashboard.headers['content-security-policy'], `frame-ancestors https://${shop} https://admin.shopify.com`);
        assert.equal((await storeRow(t, shop))?.status, 'active');
        assert.equal(subscriptionCalls(shop), 0);

        const exchanges = () => shopify.requests.filter((request) => request.shop === shop && request.path === '/admin/oauth/access_token').length;
        const before = exchanges();
        const again = await t.app.inject({ method: 'GET', url: await appUrl(), headers: BROWSER });
        assert.equal(again.statusCode, 303);
        assert.equal(exchanges(), before, 'a connected store is not exchanged again');

        const other = newShop();
        shopify.addShop(other, { email: `other@${other}` });
        const foreign = await t.app.inject({ method: 'GET', url: await appUrl(other), headers: { ...BROWSER, accept: 'application/json' } });
        assertProblem(foreign, 401, 'invalid-token');
        assert.equal(await storeRow(t, other), undefined);
      });

      it('the signed app URL of a connected store shows the app instead of starting OAuth again', async () => {
        const shop = newShop();
        await installByTokenExchange(t, shopify, shop);
        const fields = { host: Buffer.from(`${shop}/admin`).toString('base64url'), shop, timestamp: String(Math.floor(Date.now() / 1000)) };
        const signed = await t.app.inject({ method: 'GET', url: `/shopify/install?${signedCallbackQuery(fields)}`, headers: BROWSER });
        assert.equal(signed.statusCode, 200, signed.body);
        assert.match(signed.body, /Restock is connected/);
        const unsigned = await t.app.inject({ method: 'GET', url: `/shopify/install?${new URLSearchParams(fields)}`, headers: BROWSER });
        assert.equal(unsigned.statusCode, 302, 'without Shopify\'s signature it is only the start of an install');
      });

      it('OAuth: install refuses a shop that is not a store domain', async () => {
        const res = await t.app.inject({ method: 'GET', url: '/shopify/install?shop=evil.example.com', headers: { accept: 'application/json' } });
        assertProblem(res, 400, 'validation-failed');
      });
    });

    describe('inventory_levels/update', () => {
      it('maps an unknown inventory item through the Admin API and reports its variant', async () => {
        const shop = newShop();
        await installByTokenExchange(t, shopify, shop);
        const product = fakeProduct({}, 7);
        shopify.setProduct(shop, product);
        await subscribe(t, product, `level-${unique()}@example.com`);
        const item = product.variants[0]!.inventoryItemId;
        await deliver(t, {
          topic: 'inventory_levels/update',
          shop,
          payload: { inventory_item_id: item, location_id: 555, available: 7, updated_at: new Date().toISOString() },
        });
        await t.runWorker();
        assert.ok(shopify.requests.some((request) => request.shop === shop && request.field === 'inventoryItem'), 'looked up at Shopify');
        const row = await stock(t, shop, product);
        assert.equal(row?.available, 7);
        assert.equal(row?.inventory_item_id, `gid://shopify/InventoryItem/${item}`);
        assert.equal(row?.product_title, product.title);
        assert.equal(await restocks(t, product), 1);

        // Mapped now: the next level is applied without asking Shopify.
        const lookups = shopify.requests.filter((request) => request.field === 'inventoryItem').length;
        await deliver(t, { topic: 'inventory_levels/update', shop, payload: { inventory_item_id: item, location_id: 555, available: 0, updated_at: new Date(Date.now() + 1000).toISOString() } });
        await t.runWorker();
        assert.equal(shopify.requests.filter((request) => request.field === 'inventoryItem').length, lookups);
        assert.equal((await stock(t, shop, product))?.available, 0);
      });

      it('retries later, with the error recorded, when the store has no token yet', async () => {
        const shop = newShop();
        await deliver(t, { topic: 'inventory_levels/update', shop, payload: { inventory_item_id: newId(), location_id: 1, available: 3, updated_at: new Date().toISOString() } });
        await t.runWorker();
        const [row] = await events(t, shop);
        assert.equal(row!.status, 'queued');
        assert.equal(row!.attempts, 1);
        assert.match(row!.error ?? '', /token/);
        assert.ok(Date.parse(row!.lease_until!) > Date.now(), 'backs off before the next attempt');

        // The eighth attempt is the last: then the event fails for good, its error kept.
        await t.database.db
          .updateTable('shopify_webhook_events')
          .set({ attempts: 7, lease_until: new Date(Date.now() - 1000).toISOString() })
          .where('event_id', '=', row!.event_id)
          .execute();
        await t.runWorker();
        const [last] = await events(t, shop);
        assert.equal(last!.status, 'failed');
        assert.equal(last!.attempts, 8);
        assert.match(last!.error ?? '', /token/);
        assert.ok(last!.processed_at);
      });

      it('retakes an event whose worker never finished once its lease has run out', async () => {
        const shop = await installedShop(t, shopify);
        const product = fakeProduct({}, 3);
        shopify.setProduct(shop, product);
        await deliver(t, { topic: 'products/update', shop, payload: productUpdatePayload(product, new Date().toISOString(), 3) });
        const [queued] = await events(t, shop);
        // As a worker that claimed it and died would leave it.
        await t.database.db
          .updateTable('shopify_webhook_events')
          .set({ status: 'processing', attempts: 1, lease_until: new Date(Date.now() - 1000).toISOString() })
          .where('event_id', '=', queued!.event_id)
          .execute();
        await t.runWorker();
        const [row] = await events(t, shop);
        assert.equal(row!.status, 'done');
        assert.equal(row!.attempts, 2);
        assert.equal((await stock(t, shop, product))?.available, 3);
      });

      it('retries when Shopify fails, then succeeds', async () => {
        const shop = newShop();
        await installByTokenExchange(t, shopify, shop);
        const product = fakeProduct({}, 2);
        shopify.setProduct(shop, product);
        shopify.failNext(1, (request) => request.shop === shop && request.field === 'inventoryItem');
        await deliver(t, { topic: 'inventory_levels/update', shop, payload: { inventory_item_id: product.variants[0]!.inventoryItemId, location_id: 9, available: 2, updated_at: new Date().toISOString() } });
        await t.runWorker();
        let [row] = await events(t, shop);
        assert.equal(row!.status, 'queued');
        assert.match(row!.error ?? '', /inventory item/i);
        // The back-off is over: take it again.
        await t.database.db.updateTable('shopify_webhook_events').set({ lease_until: new Date(Date.now() - 1000).toISOString() }).where('event_id', '=', row!.event_id).execute();
        await t.runWorker();
        [row] = await events(t, shop);
        assert.equal(row!.status, 'done');
        assert.equal(row!.attempts, 2);
        assert.equal((await stock(t, shop, product))?.available, 2);
      });
    });

    describe('app/uninstalled and compliance topics', () => {
      it('app/uninstalled stops the store and drops its token', async () => {
        const shop = newShop();
        await installByTokenExchange(t, shopify, shop);
        await deliver(t, { topic: 'app/uninstalled', shop, payload: { id: 1, myshopify_domain: shop, domain: shop } });
        await t.runWorker();
        const row = await storeRow(t, shop);
        assert.equal(row?.status, 'uninstalled');
        assert.equal((await connectionRow(t, shop))?.credentials_sealed, null);
        assert.ok(row?.uninstalled_at);
      });

      it('customers/redact erases that customer of that store only, and keeps no copy of the request', async () => {
        const shop = newShop();
        const product = fakeProduct();
        const gone = `gone-${unique()}@example.com`;
        const stays = `stays-${unique()}@example.com`;
        await subscribe(t, product, gone, shop);
        await subscribe(t, product, stays, shop);
        const elsewhere = newShop();
        await subscribe(t, product, gone, elsewhere);
        await deliver(t, { topic: 'customers/redact', shop, payload: { shop_id: 1, shop_domain: shop, customer: { id: 2, email: gone }, orders_to_redact: [] } });
        await t.runWorker();
        const left = await t.database.db.selectFrom('subscriptions').select(['email', 'store_domain']).where('store_domain', 'in', [shop, elsewhere]).execute();
        assert.deepEqual(left.map((row) => `${row.email} ${row.store_domain}`).sort(), [`${gone} ${elsewhere}`, `${stays} ${shop}`].sort());
        const [event] = await events(t, shop);
        assert.equal(event!.status, 'done');
        assert.ok(!event!.payload.includes(gone), 'the handled request no longer names the customer');
      });

      it('a compliance payload about another shop than its header is refused, erasing nothing', async () => {
        const shop = newShop();
        const product = fakeProduct();
        const email = `victim-${unique()}@example.com`;
        await subscribe(t, product, email, shop);
        await deliver(t, { topic: 'customers/redact', shop, payload: { shop_domain: 'other-store.myshopify.com', customer: { email } } });
        await t.runWorker();
        const [event] = await events(t, shop);
        assert.equal(event!.status, 'failed');
        assert.match(event!.error ?? '', /other-store/);
        assert.equal((await t.database.db.selectFrom('subscriptions').select('id').where('email', '=', email).execute()).length, 1);
      });

      it('customers/data_request e-mails the store owner what is held about the customer', async () => {
        const shop = newShop();
        await installByTokenExchange(t, shopify, shop, `boss@${shop}`);
        const product = fakeProduct();
        const email = `asks-${unique()}@example.com`;
        const subscriptionId = await subscribe(t, product, email, shop);
        await deliver(t, { topic: 'customers/data_request', shop, payload: { shop_id: 1, shop_domain: shop, customer: { id: 3, email }, data_request: { id: 77 } } });
        await t.runWorker();
        const mails = await t.database.db.selectFrom('mail_outbox').selectAll().where('purpose', '=', 'shopify-data-request').where('store_domain', '=', shop).execute();
        assert.equal(mails.length, 1);
        const mail = mails[0]!;
        assert.equal(mail.recipient, `boss@${shop}`);
        const text = mail.text_body;
        assert.match(text, new RegExp(email.replace(/[.+]/g, '\\$&')));
        assert.match(text, new RegExp(subscriptionId));
        assert.match(text, /request 77/);
        assert.equal((await events(t, shop))[0]!.status, 'done');
      });

      it('shop/redact erases the store, its subscriptions, its stock and its events', async () => {
        const shop = newShop();
        await installByTokenExchange(t, shopify, shop);
        const product = fakeProduct();
        shopify.setProduct(shop, product);
        await subscribe(t, product, `shopper-${unique()}@example.com`, shop);
        await deliver(t, { topic: 'products/update', shop, payload: productUpdatePayload(product, new Date().toISOString(), 0) });
        await t.runWorker();
        assert.ok(await stock(t, shop, product));
        await deliver(t, { topic: 'shop/redact', shop, payload: { shop_id: 1, shop_domain: shop } });
        await t.runWorker();
        assert.equal(await storeRow(t, shop), undefined);
        assert.equal(await stock(t, shop, product), undefined);
        assert.equal((await t.database.db.selectFrom('subscriptions').select('id').where('store_domain', '=', shop).execute()).length, 0);
        const left = await events(t, shop);
        assert.deepEqual(left.map((row) => [row.topic, row.status, row.payload]), [['SHOP_REDACT', 'done', '{}']]);
      });
    });
  });

  describe(`Shopify reconciliation on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    let t: TestApp;
    let shopify: ShopifyAdminStandIn;
    before(async () => {
      shopify = await startShopifyAdmin({ apiKey: API_KEY, apiSecret: API_SECRET, scopes: SCOPES });
      t = await startTestApp(dialect, ENV);
    });
    after(async () => {
      await t.close();
      await shopify.close();
    });

    it('reports the stock of the products shoppers wait for, as the Admin API has it', async () => {
      // A fresh worker runs reconciliation on its first turn, so nothing here runs the worker before.
      const shop = newShop();
      await installByTokenExchange(t, shopify, shop);
      const waited = fakeProduct({}, 4);
      const soldOut = fakeProduct({}, 0);
      const notWaited = fakeProduct({}, 8);
      for (const product of [waited, soldOut, notWaited]) shopify.setProduct(shop, product);
      await subscribe(t, waited, `w1-${unique()}@example.com`, shop);
      await subscribe(t, soldOut, `w2-${unique()}@example.com`, shop);
      await t.runWorker();
      assert.ok(shopify.requests.some((request) => request.shop === shop && request.field === 'nodes'));
      assert.equal((await stock(t, shop, waited))?.available, 4);
      assert.equal((await stock(t, shop, soldOut))?.available, 0);
      assert.equal(await stock(t, shop, notWaited), undefined, 'only products someone waits for are read');
      assert.equal(await restocks(t, waited), 1);
      assert.equal(await restocks(t, soldOut), 0);
      assert.ok((await connectionRow(t, shop))?.reconciled_at);
      const restock = await t.database.db.selectFrom('restocks').selectAll().where('product_id', '=', productGid(waited)).executeTakeFirstOrThrow();
      assert.equal(restock.source, 'reconciliation');
    });
  });

  describe(`Shopify app not configured on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    let t: TestApp;
    before(async () => {
      t = await startTestApp(dialect);
    });
    after(() => t.close());

    it('keeps its addresses and answers 501 naming the settings', async () => {
      for (const [method, url] of [
        ['POST', WEBHOOKS],
        ['GET', '/shopify/install?shop=a.myshopify.com'],
        ['GET', '/shopify/callback'],
        ['POST', '/shopify/token-exchange'],
      ] as const) {
        const res = await t.app.inject({ method, url, headers: { accept: 'application/json', 'content-type': 'application/json' }, payload: method === 'POST' ? '{"not":"read"}' : undefined });
        assertProblem(res, 501, 'not-configured');
        assert.match(res.json().detail, /SHOPIFY_API_KEY/);
        assert.match(res.json().detail, /SHOPIFY_API_SECRET/);
      }
    });
  });
}

function cookieHeader(res: LightMyRequestResponse): string {
  const setCookie = res.headers['set-cookie'];
  const lines = Array.isArray(setCookie) ? setCookie : setCookie ? [setCookie] : [];
  return lines.map((line) => line.split(';')[0]).join('; ');
}

/** The query Shopify redirects back with: sorted fields, `hmac` the hex HMAC-SHA256 of the rest. */
function signedCallbackQuery(fields: Record<string, string>): string {
  const message = new URLSearchParams(Object.entries(fields).sort(([a], [b]) => a.localeCompare(b))).toString();
  const hmac = createHmac('sha256', API_SECRET).update(message).digest('hex');
  return `${message}&hmac=${hmac}`;
}
