import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, it } from './fixtures/suites.ts';
import { gunzipSync } from 'node:zlib';
import fc from 'fast-check';
import type { LightMyRequestResponse } from 'fastify';
import { failOnLeakedHandles } from './fixtures/leaks.ts';
import { dialectSkip, rowsIn, startTestApp, testDialects, type TestApp } from './fixtures/app.ts';
import { MailOutboxRepository } from '../src/core/mail/outbox-repository.ts';
import { appendedTo, widgetSource } from '../src/storefront/widget-asset.ts';

failOnLeakedHandles();

const RUNS = Number(process.env.RESTOCK_PROPERTY_RUNS ?? 100);
const SEED = process.env.RESTOCK_PROPERTY_SEED === undefined ? undefined : Number(process.env.RESTOCK_PROPERTY_SEED);

// Every request of a file comes from the same address; the limit gets a test of its own.
const UNLIMITED = { STOREFRONT_LIMIT_PER_HOUR: '1000000' };
const SUBSCRIBE = '/storefront/v1/subscribe';
const SOURCE = { kind: 'inventory-api', ref: 'agt_storefront_test', verified: false } as const;
/** The fixture's BODY_LIMIT_BYTES default. */
const BODY_LIMIT = 16 * 1024;

let counter = 0;
const unique = () => `${Date.now() % 1_000_000}${++counter}`;
const newShop = () => `front-${unique()}.myshopify.com`;
const newEmail = () => `shopper-${unique()}@example.com`;
const productGid = () => `gid://shopify/Product/${unique()}`;
const variantGid = () => `gid://shopify/ProductVariant/${unique()}`;

function subscribe(t: TestApp, body: unknown, headers: Record<string, string> = {}): Promise<LightMyRequestResponse> {
  return t.app.inject({
    method: 'POST',
    url: SUBSCRIBE,
    headers: { 'content-type': 'application/json', origin: 'https://blue-mug.example', ...headers },
    payload: typeof body === 'string' ? body : JSON.stringify(body),
  });
}

function availability(t: TestApp, shop: string, productId: string): Promise<LightMyRequestResponse> {
  return t.app.inject({
    method: 'GET',
    url: `/storefront/v1/availability?${new URLSearchParams({ shop, productId })}`,
    headers: { origin: 'https://blue-mug.example' },
  });
}

function assertProblem(res: LightMyRequestResponse, status: number, slug: string) {
  assert.equal(res.statusCode, status, res.body);
  assert.match(res.headers['content-type'] as string, /^application\/problem\+json/);
  assert.equal(res.json().type, `http://restock.test/problems/${slug}`);
}

function assertPointer(res: LightMyRequestResponse, pointer: string) {
  const errors: Array<{ pointer: string }> = res.json().errors ?? [];
  assert.ok(errors.some((e) => e.pointer === pointer), `${pointer} in ${JSON.stringify(errors)}`);
}

async function createStore(t: TestApp, shop = newShop()) {
  await t.app.restock.stores.createStore(shop, `owner-${unique()}@example.com`);
  return shop;
}

async function subscriptionsOf(t: TestApp, shop: string) {
  return t.database.db.selectFrom('subscriptions').selectAll().where('store_domain', '=', shop).execute();
}

for (const dialect of testDialects()) {
  describe(`storefront API on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    let t: TestApp;
    before(async () => {
      t = await startTestApp(dialect, UNLIMITED);
    });
    after(() => t.close());

    describe('availability', () => {
      it('knows nothing of a product never reported: soldOut null, no variants', async () => {
        const shop = await createStore(t);
        const productId = productGid();
        const res = await availability(t, shop, productId);
        assert.equal(res.statusCode, 200, res.body);
        assert.match(res.headers['content-type'] as string, /^application\/json/);
        assert.equal(res.headers['cache-control'], 'public, max-age=30');
        assert.deepEqual(res.json(), { shop, productId, soldOut: null, variants: [], channels: { sms: false, push: false } });
      });

      it('tells sold-out variants from those in stock, and never discloses quantities', async () => {
        const shop = await createStore(t);
        const productId = productGid();
        const [inStock, soldOut, negative] = [variantGid(), variantGid(), variantGid()];
        await t.app.restock.inventory.reportStock(
          shop,
          [
            { productId, variantId: inStock, available: 1234, productTitle: 'Blue mug' },
            { productId, variantId: soldOut, available: 0 },
            { productId, variantId: negative, available: -3 },
          ],
          SOURCE,
        );
        const res = await availability(t, shop, productId);
        assert.equal(res.statusCode, 200, res.body);
        const body = res.json();
        body.variants.sort((a: { variantId: string }, b: { variantId: string }) => a.variantId.localeCompare(b.variantId));
        const expected = [
          { variantId: inStock, soldOut: false },
          { variantId: soldOut, soldOut: true },
          { variantId: negative, soldOut: true },
        ].sort((a, b) => a.variantId.localeCompare(b.variantId));
        assert.deepEqual(body, { shop, productId, soldOut: false, variants: expected, channels: { sms: false, push: true } }, 'one variant sold out: the form may offer push (no SMS sender here)');
        // As a number of its own: a random variant id may hold the same digits.
        assert.doesNotMatch(res.body, /(?<![\w/])1234(?!\w)/, 'no quantity in the answer');
        assert.ok(!res.body.includes('Blue mug'), 'nothing but availability');

        await t.app.restock.inventory.reportStock(shop, [{ productId, variantId: inStock, available: 0 }], SOURCE);
        const gone = (await availability(t, shop, productId)).json();
        assert.equal(gone.soldOut, true, 'every variant sold out');
        assert.ok(gone.variants.every((v: { soldOut: boolean }) => v.soldOut));
      });

      it('counts an unpublished product as sold out, whatever its stock', async () => {
        const shop = await createStore(t);
        const productId = productGid();
        const variantId = variantGid();
        await t.app.restock.inventory.reportStock(shop, [{ productId, variantId, available: 50, published: false }], SOURCE);
        assert.deepEqual((await availability(t, shop, productId)).json(), { shop, productId, soldOut: true, variants: [{ variantId, soldOut: true }], channels: { sms: false, push: true } });
        await t.app.restock.inventory.reportStock(shop, [{ productId, variantId, published: true }], SOURCE);
        assert.equal((await availability(t, shop, productId)).json().soldOut, false);
      });

      it('answers for a product reported as a whole, without variants', async () => {
        const shop = await createStore(t);
        const productId = productGid();
        await t.app.restock.inventory.reportStock(shop, [{ productId, variantId: null, available: 0 }], SOURCE);
        assert.deepEqual((await availability(t, shop, productId)).json(), { shop, productId, soldOut: true, variants: [], channels: { sms: false, push: true } });
        await t.app.restock.inventory.reportStock(shop, [{ productId, variantId: null, available: 2 }], SOURCE);
        assert.deepEqual((await availability(t, shop, productId)).json(), { shop, productId, soldOut: false, variants: [], channels: { sms: false, push: false } });
      });

      it('reads the store case-insensitively and answers its canonical domain', async () => {
        const shop = await createStore(t);
        const productId = productGid();
        const res = await availability(t, shop.toUpperCase().replace('.MYSHOPIFY.COM', '.myshopify.com'), productId);
        assert.equal(res.statusCode, 200, res.body);
        assert.equal(res.json().shop, shop);
      });

      it('does not show one store the stock of another', async () => {
        const shop = await createStore(t);
        const other = await createStore(t);
        const productId = productGid();
        await t.app.restock.inventory.reportStock(other, [{ productId, variantId: variantGid(), available: 3 }], SOURCE);
        assert.deepEqual((await availability(t, shop, productId)).json(), { shop, productId, soldOut: null, variants: [], channels: { sms: false, push: false } });
      });

      it('finding 12: a store unknown or uninstalled answers exactly as a customer’s untracked product does', async () => {
        const customer = await createStore(t);
        const uninstalled = await createStore(t);
        const productId = productGid();
        await t.app.restock.inventory.reportStock(uninstalled, [{ productId, variantId: variantGid(), available: 3 }], SOURCE);
        await t.app.restock.stores.uninstall(uninstalled);
        const untracked = await availability(t, customer, productId);
        for (const shop of [newShop(), uninstalled]) {
          const res = await availability(t, shop, productId);
          assert.equal(res.statusCode, untracked.statusCode);
          assert.deepEqual(res.json(), { ...untracked.json(), shop });
          assert.equal(res.headers['access-control-allow-origin'], '*');
          assert.equal(res.headers['cache-control'], untracked.headers['cache-control']);
        }
      });

      it('refuses a malformed shop or product with 400 problems naming the parameter', async () => {
        const shop = await createStore(t);
        const cases: Array<[string, string]> = [
          [`/storefront/v1/availability?${new URLSearchParams({ shop: 'evil_example.com', productId: productGid() })}`, '/querystring/shop'],
          [`/storefront/v1/availability?${new URLSearchParams({ shop, productId: '1001' })}`, '/querystring/productId'],
          [`/storefront/v1/availability?${new URLSearchParams({ shop, productId: variantGid() })}`, '/querystring/productId'],
          [`/storefront/v1/availability?${new URLSearchParams({ productId: productGid() })}`, '/querystring/shop'],
          [`/storefront/v1/availability?${new URLSearchParams({ shop })}`, '/querystring/productId'],
        ];
        for (const [url, pointer] of cases) {
          const res = await t.app.inject({ method: 'GET', url });
          assertProblem(res, 400, 'validation-failed');
          assertPointer(res, pointer);
        }
      });
    });

    describe('subscribe', () => {
      it('subscribes a shopper for the store, without an agent, and answers 201', async () => {
        const shop = await createStore(t);
        const productId = productGid();
        const variantId = variantGid();
        const before = await t.counts();
        const res = await subscribe(t, { shop, productId, variantId, email: 'Jane.Doe@Example.COM' });
        assert.equal(res.statusCode, 201, res.body);
        assert.match(res.headers['content-type'] as string, /^application\/json/);
        assert.deepEqual(res.json(), { status: 'subscribed', confirmBy: [] });
        const rows = await subscriptionsOf(t, shop);
        assert.equal(rows.length, 1);
        const row = rows[0]!;
        assert.equal(row.store_domain, shop);
        assert.equal(row.agent_id, null);
        assert.equal(row.product_id, productId);
        assert.equal(row.variant_id, variantId);
        assert.equal(row.email, 'Jane.Doe@example.com', 'the domain is lower-cased, the local part kept');
        assert.equal(row.status, 'active');
        const after = await t.counts();
        assert.deepEqual(after, { ...before, subscriptions: before.subscriptions + 1 });
      });

      it('answers the same address twice the same way, keeping one subscription', async () => {
        const shop = await createStore(t);
        const productId = productGid();
        const email = newEmail();
        const first = await subscribe(t, { shop, productId, email });
        const again = await subscribe(t, { shop, productId, email });
        const otherCase = await subscribe(t, { shop: shop.replace('front', 'FRONT'), productId, variantId: null, email: email.replace('example.com', 'EXAMPLE.com') });
        for (const res of [first, again, otherCase]) {
          assert.equal(res.statusCode, 201, res.body);
          assert.equal(res.body, first.body);
        }
        const rows = await subscriptionsOf(t, shop);
        assert.equal(rows.length, 1);
        assert.equal(rows[0]!.variant_id, null);
      });

      it('keeps one subscription under concurrent duplicates', async () => {
        const shop = await createStore(t);
        const body = { shop, productId: productGid(), variantId: variantGid(), email: newEmail() };
        const answers = await Promise.all(Array.from({ length: 10 }, () => subscribe(t, body)));
        assert.deepEqual(new Set(answers.map((res) => res.statusCode)), new Set([201]));
        assert.equal((await subscriptionsOf(t, shop)).length, 1);
      });

      it('writes the alert in the language the shopper saw the widget in, else the store’s', async () => {
        const shop = await createStore(t);
        await t.app.restock.stores.updateSettings(shop, { locale: 'de' });
        const productId = productGid();
        const variantId = variantGid();
        const [french, unsaid] = [newEmail(), newEmail()];
        assert.equal((await subscribe(t, { shop, productId, variantId, email: french, locale: 'fr' })).statusCode, 201);
        assert.equal((await subscribe(t, { shop, productId, variantId, email: unsaid })).statusCode, 201);
        assertProblem(await subscribe(t, { shop, productId, variantId, email: newEmail(), locale: 'xx' }), 400, 'validation-failed');
        const report = { productId, variantId, productTitle: 'Teapot' };
        await t.app.restock.inventory.reportStock(shop, [{ ...report, available: 0 }], SOURCE);
        await t.app.restock.inventory.reportStock(shop, [{ ...report, available: 10 }], SOURCE);
        await t.runWorker();
        const outbox = new MailOutboxRepository(t.database);
        assert.equal((await outbox.latestFor(french))?.subject, 'Teapot est de nouveau en stock');
        assert.equal((await outbox.latestFor(unsaid))?.subject, 'Teapot ist wieder auf Lager', 'no language given: the store’s');
      });

      it('answers 404 for a store unknown or uninstalled, storing nothing', async () => {
        const uninstalled = await createStore(t);
        await t.app.restock.stores.uninstall(uninstalled);
        const before = await t.tableDigests();
        for (const shop of [newShop(), uninstalled]) {
          const res = await subscribe(t, { shop, productId: productGid(), email: newEmail() });
          assertProblem(res, 404, 'not-found');
          assert.equal(res.headers['access-control-allow-origin'], '*');
        }
        assert.deepEqual(await t.tableDigests(), before);
      });

      const invalid: Array<[string, (shop: string) => unknown, string]> = [
        ['a bad e-mail', (shop) => ({ shop, productId: productGid(), email: 'not-an-email' }), '/body/email'],
        ['an e-mail without domain', (shop) => ({ shop, productId: productGid(), email: 'a@' }), '/body/email'],
        ['a missing e-mail', (shop) => ({ shop, productId: productGid() }), '/body/email'],
        ['a bad productId', (shop) => ({ shop, productId: 'gid://shopify/Product/abc', email: newEmail() }), '/body/productId'],
        ['a variant id as productId', (shop) => ({ shop, productId: variantGid(), email: newEmail() }), '/body/productId'],
        ['a numeric productId', (shop) => ({ shop, productId: 1001, email: newEmail() }), '/body/productId'],
        ['a product id as variantId', (shop) => ({ shop, productId: productGid(), variantId: productGid(), email: newEmail() }), '/body/variantId'],
        ['a missing shop', () => ({ productId: productGid(), email: newEmail() }), '/body/shop'],
        ['a shop that is not a store domain', () => ({ shop: 'evil_example.com', productId: productGid(), email: newEmail() }), '/body/shop'],
        ['an array body', () => [], '/body'],
        ['a string body', () => 'hello', '/body'],
      ];
      for (const [name, body, pointer] of invalid) {
        it(`refuses ${name} with a 400 problem naming ${pointer}, storing nothing`, async () => {
          const shop = await createStore(t);
          const before = await t.tableDigests();
          const res = await subscribe(t, JSON.stringify(body(shop)));
          assertProblem(res, 400, 'validation-failed');
          assertPointer(res, pointer);
          assert.equal(res.headers['access-control-allow-origin'], '*', 'the widget can read why');
          assert.deepEqual(await t.tableDigests(), before);
        });
      }

      it("refuses another platform's product or variant on a Shopify store, storing nothing", async () => {
        const shop = await createStore(t);
        const before = await t.tableDigests();
        const product = await subscribe(t, { shop, productId: 'gid://woocommerce/Product/77', email: newEmail() });
        assertProblem(product, 400, 'validation-failed');
        assertPointer(product, '/body/productId');
        const variant = await subscribe(t, { shop, productId: productGid(), variantId: 'gid://bigcommerce/ProductVariant/78', email: newEmail() });
        assertProblem(variant, 400, 'validation-failed');
        assertPointer(variant, '/body/variantId');
        assert.deepEqual(await t.tableDigests(), before);
      });

      it('refuses a body that is not JSON, of another type, or too large, storing nothing', async () => {
        const shop = await createStore(t);
        const valid = { shop, productId: productGid(), email: newEmail() };
        const before = await t.tableDigests();
        assertProblem(await subscribe(t, '{"shop": "', {}), 400, 'malformed-request');
        assertProblem(await subscribe(t, '', {}), 400, 'malformed-request');
        assertProblem(await subscribe(t, JSON.stringify(valid), { 'content-type': 'text/plain' }), 415, 'unsupported-media-type');
        assertProblem(await subscribe(t, new URLSearchParams(valid).toString(), { 'content-type': 'application/x-www-form-urlencoded' }), 415, 'unsupported-media-type');
        const oversize = await subscribe(t, JSON.stringify({ ...valid, padding: 'x'.repeat(BODY_LIMIT) }));
        assertProblem(oversize, 413, 'payload-too-large');
        assert.deepEqual(await t.tableDigests(), before);
      });
    });

    describe('CORS', () => {
      it('lets any origin read the answers, and answers a preflight from another origin', async () => {
        const shop = await createStore(t);
        const ok = await subscribe(t, { shop, productId: productGid(), email: newEmail() });
        const read = await availability(t, shop, productGid());
        for (const res of [ok, read]) {
          assert.equal(res.headers['access-control-allow-origin'], '*');
          assert.match(String(res.headers['access-control-expose-headers']), /Retry-After/);
          assert.equal(res.headers['set-cookie'], undefined, 'no cookies: nothing for `*` to expose');
        }
        for (const [url, method] of [[SUBSCRIBE, 'POST'], ['/storefront/v1/availability', 'GET']] as const) {
          const preflight = await t.app.inject({
            method: 'OPTIONS',
            url,
            headers: { origin: 'https://blue-mug.example', 'access-control-request-method': method, 'access-control-request-headers': 'content-type' },
          });
          assert.equal(preflight.statusCode, 204, preflight.body);
          assert.equal(preflight.headers['access-control-allow-origin'], '*');
          assert.ok(String(preflight.headers['access-control-allow-methods']).split(/,\s*/).includes(method));
          assert.ok(String(preflight.headers['access-control-allow-headers']).split(/,\s*/).map((h) => h.toLowerCase()).includes('content-type'));
          assert.ok(Number(preflight.headers['access-control-max-age']) > 0);
        }
      });
    });

    // The widget, and the channels script it loads from beside itself: the same treatment.
    for (const file of ['widget.js', 'widget-channels.js'] as const) {
      describe(`/${file}`, () => {
        it('serves the minified script, gzipped when accepted, with an ETag and 304, loadable cross-origin', async (ctx) => {
          const plain = await t.app.inject({ method: 'GET', url: `/${file}` });
          assert.equal(plain.statusCode, 200);
          assert.equal(plain.headers['content-type'], 'text/javascript; charset=utf-8');
          assert.equal(plain.headers['content-encoding'], undefined);
          assert.equal(plain.headers['cross-origin-resource-policy'], 'cross-origin');
          assert.match(String(plain.headers.vary), /accept-encoding/i);
          assert.match(String(plain.headers['cache-control']), /public, max-age=\d+/);
          const etag = plain.headers.etag as string;
          assert.match(etag, /^"[A-Za-z0-9_-]+"$/);
          // Its own source and, for the channels script, each channel's choice after it.
          const source = Buffer.concat([widgetSource(file), ...appendedTo(file, [])].map((part) => readFileSync(part)));
          assert.ok(plain.rawPayload.length < source.length, `minified: ${plain.rawPayload.length} < ${source.length}`);
          assert.doesNotMatch(plain.body, /^\s*\/\//m, 'no comments left');

          const gzipped = await t.app.inject({ method: 'GET', url: `/${file}`, headers: { 'accept-encoding': 'br, gzip, deflate' } });
          assert.equal(gzipped.statusCode, 200);
          assert.equal(gzipped.headers['content-encoding'], 'gzip');
          const gzipEtag = gzipped.headers.etag as string;
          assert.notEqual(gzipEtag, etag, 'each representation has its own strong tag');
          assert.equal(gzipped.headers['cross-origin-resource-policy'], 'cross-origin');
          assert.ok(gunzipSync(gzipped.rawPayload).equals(plain.rawPayload), 'gunzipped, it is the plain script');
          assert.ok(gzipped.rawPayload.length < plain.rawPayload.length);
          ctx.diagnostic(`${file}: ${source.length} B source, ${plain.rawPayload.length} B minified, ${gzipped.rawPayload.length} B gzipped`);

          const notModified = await t.app.inject({ method: 'GET', url: `/${file}`, headers: { 'if-none-match': gzipEtag, 'accept-encoding': 'gzip' } });
          assert.equal(notModified.statusCode, 304);
          assert.equal(notModified.rawPayload.length, 0);
          assert.equal(notModified.headers.etag, gzipEtag);
          // If-None-Match compares weakly, takes a list, and `*`.
          for (const given of [`W/${etag}`, `"older", ${etag}`, '*']) {
            const revalidated = await t.app.inject({ method: 'GET', url: `/${file}`, headers: { 'if-none-match': given } });
            assert.equal(revalidated.statusCode, 304, given);
          }
          const refused = await t.app.inject({ method: 'GET', url: `/${file}`, headers: { 'accept-encoding': 'gzip;q=0, identity' } });
          assert.equal(refused.headers['content-encoding'], undefined, 'gzip;q=0 refuses gzip');
          assert.ok(refused.rawPayload.equals(plain.rawPayload));
          const stale = await t.app.inject({ method: 'GET', url: `/${file}`, headers: { 'if-none-match': '"something-older"' } });
          assert.equal(stale.statusCode, 200);
          assert.ok(stale.rawPayload.equals(plain.rawPayload));
        });
      });
    }

    describe('property: arbitrary bodies', () => {
      type Tagged = { value: unknown; valid: boolean };
      const present = (value: unknown): Tagged => ({ value, valid: true });
      const broken = (value: unknown): Tagged => ({ value, valid: false });
      const junk = fc.oneof(fc.string(), fc.integer(), fc.boolean(), fc.constant(null), fc.array(fc.string(), { maxLength: 2 }), fc.object({ maxDepth: 1 }));

      it('never answers 5xx, and stores a subscription exactly when the body is valid and the store known', async (ctx) => {
        const known = await createStore(t);
        const unknown = newShop();
        // Valid choices weigh more, so that enough bodies are wholly valid to test storing.
        const missing = fc.constant(broken(undefined));
        const shop = fc.oneof(
          { weight: 6, arbitrary: fc.constantFrom(known, known.toUpperCase().replace('.MYSHOPIFY.COM', '.myshopify.com')).map((value) => ({ ...present(value), known: true })) },
          { weight: 1, arbitrary: fc.constant({ ...present(unknown), known: false }) },
          { weight: 1, arbitrary: missing.map((tagged) => ({ ...tagged, known: false })) },
          { weight: 1, arbitrary: fc.oneof(fc.constantFrom('evil_example.com', '.myshopify.com', `${known} `, `-x.myshopify.com`), junk).map((value) => ({ ...broken(value), known: false })) },
        );
        const productId = fc.oneof(
          { weight: 6, arbitrary: fc.bigInt({ min: 0n, max: 10n ** 20n - 1n }).map((n) => present(`gid://shopify/Product/${n}`)) },
          { weight: 1, arbitrary: missing },
          { weight: 1, arbitrary: fc.oneof(fc.constantFrom('gid://shopify/Product/', 'gid://shopify/ProductVariant/1', 'gid://shopify/Product/1/x', `gid://shopify/Product/${'1'.repeat(21)}`), junk).map(broken) },
        );
        const variantId = fc.oneof(
          { weight: 2, arbitrary: fc.constantFrom(present(undefined), present(null)) },
          { weight: 4, arbitrary: fc.nat().map((n) => present(`gid://shopify/ProductVariant/${n}`)) },
          // null is a valid variantId (the whole product).
          { weight: 1, arbitrary: fc.oneof(fc.constantFrom('', 'gid://shopify/Product/1'), junk.filter((value) => value !== null)).map(broken) },
        );
        const email = fc.oneof(
          {
            weight: 6,
            arbitrary: fc
              .tuple(fc.stringMatching(/^[A-Za-z0-9_+-]{1,8}(\.[A-Za-z0-9_+-]{1,8}){0,2}$/), fc.constantFrom('example.com', 'Example.COM', 'mail.example.org'))
              .map(([local, domain]) => present(`${local}@${domain}`)),
          },
          { weight: 1, arbitrary: missing },
          {
            weight: 1,
            arbitrary: fc
              .oneof(fc.constantFrom('a@', '@example.com', 'a b@example.com', 'a@@example.com', `${'a'.repeat(250)}@example.com`), fc.string().filter((text) => !text.includes('@')), junk)
              .map(broken),
          },
        );
        const fields = fc.record({ shop, productId, variantId, email });
        const body = fc.oneof(
          { weight: 4, arbitrary: fields.map((f) => ({ f, raw: undefined as unknown })) },
          { weight: 1, arbitrary: fc.jsonValue().map((raw) => ({ f: undefined, raw })) },
        );

        const seen: Record<number, number> = {};
        await fc.assert(
          fc.asyncProperty(body, async ({ f, raw }) => {
            let payload: unknown = raw;
            let expected = 400;
            if (f) {
              const out: Record<string, unknown> = {};
              for (const [key, tagged] of Object.entries(f)) if (tagged.value !== undefined) out[key] = tagged.value;
              payload = out;
              if (Object.values(f).every((tagged) => tagged.valid)) expected = f.shop.known ? 201 : 404;
            }
            const before = await t.tableDigests();
            const res = await subscribe(t, JSON.stringify(payload));
            assert.ok(res.statusCode < 500, `${res.statusCode} for ${JSON.stringify(payload)}: ${res.body}`);
            assert.equal(res.statusCode, expected, `for ${JSON.stringify(payload)}: ${res.body}`);
            seen[res.statusCode] = (seen[res.statusCode] ?? 0) + 1;
            const after = await t.tableDigests();
            if (expected !== 201) {
              assert.deepEqual(after, before, `nothing stored for ${JSON.stringify(payload)}`);
              assert.match(res.headers['content-type'] as string, /^application\/problem\+json/);
              return;
            }
            const sent = payload as { productId: string; variantId?: string | null; email: string };
            const at = sent.email.lastIndexOf('@');
            const stored = await t.database.db
              .selectFrom('subscriptions')
              .selectAll()
              .where('store_domain', '=', known)
              .where('product_id', '=', sent.productId)
              .where('email', '=', `${sent.email.slice(0, at)}@${sent.email.slice(at + 1).toLowerCase()}`)
              .execute();
            assert.equal(stored.filter((row) => row.variant_id === (sent.variantId ?? null)).length, 1, JSON.stringify(payload));
            assert.ok(rowsIn(after.subscriptions!) - rowsIn(before.subscriptions!) <= 1);
            // The counts kept by triggers on subscriptions move with it.
            const derived = { subscriptions: '', subscription_counts: '', waitlists: '' };
            assert.deepEqual({ ...after, ...derived }, { ...before, ...derived }, 'only the subscription is stored');
          }),
          { numRuns: RUNS, ...(SEED === undefined ? {} : { seed: SEED }) },
        );
        ctx.diagnostic(`answers over ${RUNS} bodies: ${JSON.stringify(seen)}`);
        // A property that never met a valid body would prove nothing about storing one.
        assert.ok(seen[201] && seen[400], JSON.stringify(seen));
      });
    });
  });

  describe(`storefront subscribe rate limit on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    let t: TestApp;
    before(async () => {
      t = await startTestApp(dialect, { STOREFRONT_LIMIT_PER_HOUR: '2' });
    });
    after(() => t.close());

    it('refuses the third subscription from one address within the hour with 429 and Retry-After, storing nothing', async () => {
      const shop = await createStore(t);
      for (let i = 0; i < 2; i++) assert.equal((await subscribe(t, { shop, productId: productGid(), email: newEmail() })).statusCode, 201);
      const before = await t.tableDigests();
      const third = await subscribe(t, { shop, productId: productGid(), email: newEmail() });
      assertProblem(third, 429, 'rate-limited');
      assert.ok(Number(third.headers['retry-after']) > 0, String(third.headers['retry-after']));
      assert.equal(third.headers['access-control-allow-origin'], '*', 'the widget can read how long to wait');
      assert.deepEqual(await t.tableDigests(), before);
      assert.equal((await availability(t, shop, productGid())).statusCode, 200, 'reading availability is not limited by it');
    });
  });

  describe(`storefront availability rate limit on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    let t: TestApp;
    before(async () => {
      t = await startTestApp(dialect, { STOREFRONT_READ_LIMIT_PER_MINUTE: '3' });
    });
    after(() => t.close());

    it('finding 12: availability reads are limited per address, known store or not, with 429 and Retry-After', async () => {
      const shop = await createStore(t);
      for (const asked of [shop, newShop(), shop]) assert.equal((await availability(t, asked, productGid())).statusCode, 200);
      const fourth = await availability(t, newShop(), productGid());
      assertProblem(fourth, 429, 'rate-limited');
      assert.ok(Number(fourth.headers['retry-after']) > 0);
      assert.equal(fourth.headers['access-control-allow-origin'], '*');
    });
  });
}
