import assert from 'node:assert/strict';
import { after, before, describe, it } from './fixtures/suites.ts';
import { failOnLeakedHandles } from './fixtures/leaks.ts';
import { buildApp } from '../src/app.ts';
import { Database } from '../src/core/db/database.ts';
import { call, storeWithAgent } from './fixtures/agents.ts';
import { dialectSkip, startTestApp, testConfig, testDialects, type TestApp } from './fixtures/app.ts';

failOnLeakedHandles();

const PRODUCT = 'gid://shopify/Product/1001';
const VARIANT = 'gid://shopify/ProductVariant/2002';
const SUBSCRIBE = '/api/v1/alerts/subscribe';

let n = 0;
const uniqueEmail = () => `shopper${++n}.${Date.now()}@example.com`;

for (const dialect of testDialects()) {
  describe(`alerts on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    let t: TestApp;
    before(async () => {
      t = await startTestApp(dialect);
    });
    after(() => t.close());

    describe('subscribeAlert', () => {
      it('creates an active subscription for a product', async () => {
        const res = await t.post(SUBSCRIBE, { productId: PRODUCT, email: uniqueEmail() });
        assert.equal(res.statusCode, 200);
        assert.match(res.headers['content-type'] as string, /^application\/json/);
        const body = res.json();
        assert.deepEqual(Object.keys(body).sort(), ['status', 'subscriptionId']);
        assert.equal(body.status, 'active');
        assert.match(body.subscriptionId, /^sub_[0-9a-z]{26}$/);
      });

      it('stores the variant and normalises the e-mail domain', async () => {
        const res = await t.post(SUBSCRIBE, { productId: PRODUCT, variantId: VARIANT, email: 'Jane.Doe@Example.COM' });
        assert.equal(res.statusCode, 200);
        const read = await t.inject({ method: 'GET', url: `/api/v1/alerts/${res.json().subscriptionId}` });
        assert.equal(read.statusCode, 200);
        const sub = read.json();
        assert.equal(sub.productId, PRODUCT);
        assert.equal(sub.variantId, VARIANT);
        assert.equal(sub.email, 'Jane.Doe@example.com');
        assert.equal(sub.status, 'active');
        assert.match(sub.unsubscribeUrl, /^http:\/\/restock\.test\/unsubscribe\/sub_[0-9a-z]+\.[A-Za-z0-9_-]+$/);
        assert.ok(!Number.isNaN(Date.parse(sub.createdAt)));
      });

      it('returns the same subscription for the same product, variant and e-mail', async () => {
        const email = uniqueEmail();
        const first = (await t.post(SUBSCRIBE, { productId: PRODUCT, variantId: VARIANT, email })).json();
        const again = (await t.post(SUBSCRIBE, { productId: PRODUCT, variantId: VARIANT, email })).json();
        const otherCase = (await t.post(SUBSCRIBE, { productId: PRODUCT, variantId: VARIANT, email: email.replace('example.com', 'EXAMPLE.com') })).json();
        assert.equal(again.subscriptionId, first.subscriptionId);
        assert.equal(otherCase.subscriptionId, first.subscriptionId);
        const productOnly = (await t.post(SUBSCRIBE, { productId: PRODUCT, email })).json();
        const nullVariant = (await t.post(SUBSCRIBE, { productId: PRODUCT, variantId: null, email })).json();
        assert.notEqual(productOnly.subscriptionId, first.subscriptionId, 'a product-level watch is its own subscription');
        assert.equal(nullVariant.subscriptionId, productOnly.subscriptionId, 'variantId null means no variant');
      });

      it('creates exactly one subscription under concurrent duplicates', async () => {
        const email = uniqueEmail();
        const before = await t.counts();
        const answers = await Promise.all(
          Array.from({ length: 25 }, () => t.post(SUBSCRIBE, { productId: PRODUCT, variantId: VARIANT, email })),
        );
        assert.ok(answers.every((r) => r.statusCode === 200));
        assert.equal(new Set(answers.map((r) => r.json().subscriptionId)).size, 1);
        assert.equal((await t.counts()).subscriptions, before.subscriptions + 1);
      });

      const invalid: Array<[string, unknown, string]> = [
        ['no body fields', {}, '/body/productId'],
        ['missing email', { productId: PRODUCT }, '/body/email'],
        ['missing productId', { email: 'a@example.com' }, '/body/productId'],
        ['productId of another type', { productId: 'gid://shopify/Variant/1', email: 'a@example.com' }, '/body/productId'],
        ['productId not numeric', { productId: 'gid://shopify/Product/abc', email: 'a@example.com' }, '/body/productId'],
        ['productId too long', { productId: `gid://shopify/Product/${'1'.repeat(21)}`, email: 'a@example.com' }, '/body/productId'],
        ['productId a number', { productId: 1001, email: 'a@example.com' }, '/body/productId'],
        ['productId with trailing text', { productId: `${PRODUCT}/x`, email: 'a@example.com' }, '/body/productId'],
        ['variantId a product id', { productId: PRODUCT, variantId: PRODUCT, email: 'a@example.com' }, '/body/variantId'],
        ['variantId empty', { productId: PRODUCT, variantId: '', email: 'a@example.com' }, '/body/variantId'],
        ['variantId of another platform than productId', { productId: 'gid://woocommerce/Product/77', variantId: 'gid://bigcommerce/ProductVariant/78', email: 'a@example.com' }, '/body/variantId'],
        ['platform with capitals', { productId: 'gid://Shopify/Product/1', email: 'a@example.com' }, '/body/productId'],
        ['platform missing', { productId: 'gid:///Product/1', email: 'a@example.com' }, '/body/productId'],
        ['platform with a path in it', { productId: 'gid://shop/ify/Product/1', email: 'a@example.com' }, '/body/productId'],
        ['shop with ids of another platform', { productId: 'gid://woocommerce/Product/77', email: 'a@example.com', shop: 'platforms.myshopify.com' }, '/body/productId'],
        ['shop with a variant of another platform', { productId: PRODUCT, variantId: 'gid://woocommerce/ProductVariant/78', email: 'a@example.com', shop: 'platforms.myshopify.com' }, '/body/variantId'],
        ['email without @', { productId: PRODUCT, email: 'not-an-email' }, '/body/email'],
        ['email without domain', { productId: PRODUCT, email: 'a@' }, '/body/email'],
        ['email with spaces', { productId: PRODUCT, email: 'a b@example.com' }, '/body/email'],
        ['email too long', { productId: PRODUCT, email: `${'a'.repeat(64)}@${'b'.repeat(60)}.${'c'.repeat(60)}.${'d'.repeat(64)}.com` }, '/body/email'],
        ['email a number', { productId: PRODUCT, email: 5 }, '/body/email'],
        ['body an array', [], '/body'],
        ['body a string', 'hello', '/body'],
      ];
      for (const [name, body, pointer] of invalid) {
        it(`rejects ${name} with a problem naming ${pointer}, storing nothing`, async () => {
          const before = await t.tableDigests();
          const res = await t.post(SUBSCRIBE, body);
          assert.equal(res.statusCode, 400);
          assert.match(res.headers['content-type'] as string, /^application\/problem\+json/);
          const problem = res.json();
          assert.equal(problem.type, 'http://restock.test/problems/validation-failed');
          assert.equal(problem.status, 400);
          assert.ok(problem.errors.some((e: { pointer: string }) => e.pointer === pointer), JSON.stringify(problem.errors));
          assert.deepEqual(await t.tableDigests(), before);
        });
      }

      for (const platform of ['bigcommerce', 'woocommerce']) {
        it(`accepts the seed's ids of any platform: ${platform}, with its variant`, async () => {
          const productId = `gid://${platform}/Product/77`;
          const variantId = `gid://${platform}/ProductVariant/78`;
          const res = await t.post(SUBSCRIBE, { productId, variantId, email: uniqueEmail() });
          assert.equal(res.statusCode, 200, res.body);
          assert.equal(res.json().status, 'active');
          const read = (await t.inject({ method: 'GET', url: `/api/v1/alerts/${res.json().subscriptionId}` })).json();
          assert.equal(read.productId, productId);
          assert.equal(read.variantId, variantId);
        });
      }

      it('names the store and its platform when the ids are of another', async () => {
        const res = await t.post(SUBSCRIBE, { productId: 'gid://woocommerce/Product/77', email: 'a@example.com', shop: 'Platforms.myshopify.com' });
        assert.equal(res.statusCode, 400);
        assert.match(res.json().detail, /woocommerce product, but platforms\.myshopify\.com is a shopify store/);
      });

      it('accepts an e-mail of exactly 254 characters', async () => {
        const email = `${'a'.repeat(64)}@${'b'.repeat(60)}.${'c'.repeat(60)}.${'d'.repeat(63)}.com`;
        assert.equal(email.length, 254);
        assert.equal((await t.post(SUBSCRIBE, { productId: PRODUCT, email })).statusCode, 200);
      });
    });

    describe("a store's platform", () => {
      it("a store's own agent can neither subscribe to, report stock of, nor report orders of another platform's products, and nothing is stored", async () => {
        const agent = await storeWithAgent(t.app, t.database, 'platforms');
        const before = await t.tableDigests();
        const pointersOf = (res: { json(): { errors?: Array<{ pointer: string }> } }) => (res.json().errors ?? []).map((e) => e.pointer);
        const subscribed = await call(t.app, 'POST', SUBSCRIBE, { token: agent.token, body: { productId: 'gid://bigcommerce/Product/77', email: uniqueEmail() } });
        assert.equal(subscribed.statusCode, 400, subscribed.body);
        assert.deepEqual(pointersOf(subscribed), ['/body/productId']);
        const items = [
          { productId: PRODUCT, variantId: VARIANT, available: 1 },
          { productId: 'gid://woocommerce/Product/77', variantId: 'gid://woocommerce/ProductVariant/78', available: 5 },
        ];
        const reported = await call(t.app, 'POST', `/api/v1/stores/${agent.domain}/inventory`, { token: agent.token, body: { items } });
        assert.equal(reported.statusCode, 400, reported.body);
        assert.deepEqual(pointersOf(reported), ['/body/items/1/productId', '/body/items/1/variantId']);
        const order = {
          orderId: 'platforms-1',
          email: uniqueEmail(),
          placedAt: new Date().toISOString(),
          currency: 'USD',
          lines: [{ lineId: 'l1', productId: 'gid://bigcommerce/Product/77', quantity: 1, amountMinor: 1000 }],
        };
        const ordered = await call(t.app, 'POST', `/api/v1/stores/${agent.domain}/orders`, { token: agent.token, body: order });
        assert.equal(ordered.statusCode, 400, ordered.body);
        assert.deepEqual(pointersOf(ordered), ['/body/lines/0/productId']);
        assert.deepEqual(await t.tableDigests(), before);
      });
    });

    describe('reading and cancelling', () => {
      it('answers 404 problem for an unknown subscription', async () => {
        for (const method of ['GET', 'DELETE'] as const) {
          const res = await t.inject({ method, url: '/api/v1/alerts/sub_00000000000000000000000000' });
          assert.equal(res.statusCode, 404);
          assert.equal(res.json().type, 'http://restock.test/problems/not-found');
        }
      });

      it('cancels, stays cancelled, and lets the shopper subscribe anew', async () => {
        const email = uniqueEmail();
        const { subscriptionId } = (await t.post(SUBSCRIBE, { productId: PRODUCT, email })).json();
        const cancelled = await t.inject({ method: 'DELETE', url: `/api/v1/alerts/${subscriptionId}` });
        assert.equal(cancelled.statusCode, 200);
        assert.equal(cancelled.json().status, 'cancelled');
        const again = await t.inject({ method: 'DELETE', url: `/api/v1/alerts/${subscriptionId}` });
        assert.equal(again.statusCode, 200);
        assert.equal(again.json().status, 'cancelled');
        const renewed = (await t.post(SUBSCRIBE, { productId: PRODUCT, email })).json();
        assert.notEqual(renewed.subscriptionId, subscriptionId);
        assert.equal(renewed.status, 'active');
      });

      it('refuses to cancel an unsubscribed subscription with 409', async () => {
        const { subscriptionId } = (await t.post(SUBSCRIBE, { productId: PRODUCT, email: uniqueEmail() })).json();
        const { unsubscribeUrl } = (await t.inject({ method: 'GET', url: `/api/v1/alerts/${subscriptionId}` })).json();
        await t.inject({ method: 'POST', url: new URL(unsubscribeUrl).pathname });
        const res = await t.inject({ method: 'DELETE', url: `/api/v1/alerts/${subscriptionId}` });
        assert.equal(res.statusCode, 409);
        assert.equal(res.json().type, 'http://restock.test/problems/conflict');
      });
    });

    describe('one-click unsubscribe', () => {
      async function subscribed() {
        const { subscriptionId } = (await t.post(SUBSCRIBE, { productId: PRODUCT, email: uniqueEmail() })).json();
        const sub = (await t.inject({ method: 'GET', url: `/api/v1/alerts/${subscriptionId}` })).json();
        return { id: subscriptionId as string, path: new URL(sub.unsubscribeUrl).pathname };
      }
      const status = async (id: string) => (await t.inject({ method: 'GET', url: `/api/v1/alerts/${id}` })).json().status;

      it('GET shows a confirmation page and changes nothing', async () => {
        const { id, path } = await subscribed();
        const res = await t.inject({ method: 'GET', url: path, headers: { accept: 'text/html' } });
        assert.equal(res.statusCode, 200);
        assert.match(res.headers['content-type'] as string, /^text\/html/);
        assert.match(res.body, /<form method="post">/);
        assert.equal(await status(id), 'active');
      });

      it('POST from the page unsubscribes', async () => {
        const { id, path } = await subscribed();
        const res = await t.inject({ method: 'POST', url: path, headers: { 'content-type': 'application/x-www-form-urlencoded' }, payload: '' });
        assert.equal(res.statusCode, 200);
        assert.match(res.body, /You are unsubscribed/);
        assert.equal(await status(id), 'unsubscribed');
      });

      it('accepts the RFC 8058 one-click POST in both form encodings, repeatably', async () => {
        const { id, path } = await subscribed();
        const urlencoded = await t.inject({
          method: 'POST', url: path,
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
          payload: 'List-Unsubscribe=One-Click',
        });
        assert.equal(urlencoded.statusCode, 200);
        const boundary = 'restockboundary';
        const multipart = await t.inject({
          method: 'POST', url: path,
          headers: { 'content-type': `multipart/form-data; boundary=${boundary}` },
          payload: `--${boundary}\r\nContent-Disposition: form-data; name="List-Unsubscribe"\r\n\r\nOne-Click\r\n--${boundary}--\r\n`,
        });
        assert.equal(multipart.statusCode, 200);
        assert.equal(await status(id), 'unsubscribed');
        assert.match((await t.inject({ method: 'GET', url: path, headers: { accept: 'text/html' } })).body, /You are unsubscribed/);
      });

      it('a link signed by one process works in another sharing the database, and after a restart', async () => {
        const { id, path } = await subscribed();
        const other = Database.open(testConfig(t.testDatabase.url).database);
        const otherApp = await buildApp(testConfig(t.testDatabase.url), other);
        try {
          const res = await otherApp.inject({ method: 'POST', url: path });
          assert.equal(res.statusCode, 200);
          assert.equal(await status(id), 'unsubscribed');
        } finally {
          await otherApp.close();
          await other.close();
        }
      });

      it('rejects forged and altered tokens and changes nothing', async () => {
        const { id, path } = await subscribed();
        const token = path.split('/').pop()!;
        const [subject, mac] = token.split('.') as [string, string];
        const other = await subscribed();
        const flip = (s: string, i: number) => s.slice(0, i) + (s[i] === 'a' ? 'b' : 'a') + s.slice(i + 1);
        const forgeries = [
          `${subject}`,
          `${subject}.`,
          `${subject}.${flip(mac, 0)}`,
          `${subject}.${flip(mac, mac.length - 1)}`,
          `${subject}.${mac}x`,
          `${flip(subject, subject.length - 1)}.${mac}`,
          `${other.id}.${mac}`,
          `${subject}.${'A'.repeat(43)}`,
          'garbage',
        ];
        for (const forged of forgeries) {
          for (const method of ['GET', 'POST'] as const) {
            const res = await t.inject({ method, url: `/unsubscribe/${encodeURIComponent(forged)}` });
            assert.equal(res.statusCode, 404, `${method} ${forged}`);
            assert.match(res.headers['content-type'] as string, /^application\/problem\+json/);
          }
        }
        const page = await t.inject({ method: 'GET', url: `/unsubscribe/${subject}.${flip(mac, 3)}`, headers: { accept: 'text/html' } });
        assert.equal(page.statusCode, 404);
        assert.match(page.headers['content-type'] as string, /^text\/html/, 'people get a page, not JSON');
        assert.equal(await status(id), 'active');
        assert.equal(await status(other.id), 'active');
      });
    });
  });
}
