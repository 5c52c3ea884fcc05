/**
 * A BigCommerce store end to end, on each database: installed as the app (the auth callback's
 * code traded for a token, webhooks made with a secret of ours), its signed stock webhooks
 * restocking variants and alerts reaching the SMTP sink, forged deliveries and callbacks refused,
 * reconciliation catching what a webhook missed, and the uninstall callback (or a refused token)
 * stopping the mail.
 */
import assert from 'node:assert/strict';
import { createHmac, randomBytes } from 'node:crypto';
import { SignJWT } from 'jose';
import { after, before, describe, it } from './fixtures/suites.ts';
import { failOnLeakedHandles } from './fixtures/leaks.ts';
import type { BigCommerceService } from '../src/bigcommerce/service.ts';
import { dialectSkip, postsToApp, startTestApp, testDialects, type TestApp } from './fixtures/app.ts';
import { agentOfMailed, call, uniqueEmail } from './fixtures/agents.ts';
import { startSmtpSink, type SmtpSink } from './fixtures/smtp-sink.ts';
import { startBigCommerce, type BcProduct, type BigCommerceStandIn } from './fixtures/bigcommerce.ts';

failOnLeakedHandles();

const BASE = 'https://restock.test';
const APP = { clientId: 'restock-client-id', clientSecret: randomBytes(24).toString('hex') };
let counter = 0;
const newId = () => Number(`${Date.now() % 100_000}${String(++counter).padStart(3, '0')}`);

/** A product with two sizes counted per variant, the first with `quantity` left, the second sold out. */
function sizedProduct(quantity = 0): BcProduct {
  return {
    id: newId(),
    name: `Boots ${newId()}`,
    inventory_tracking: 'variant',
    inventory_level: quantity,
    availability: 'available',
    is_visible: true,
    variants: [
      { id: newId(), sku: `B-S-${counter}`, inventory_level: quantity, purchasing_disabled: false, option_values: [{ label: 'S', option_display_name: 'Size' }] },
      { id: newId(), sku: `B-M-${counter}`, inventory_level: 0, purchasing_disabled: false, option_values: [{ label: 'M', option_display_name: 'Size' }] },
    ],
  };
}

const productGid = (product: BcProduct) => `gid://bigcommerce/Product/${product.id}`;
const variantGid = (product: BcProduct, index = 0) => `gid://bigcommerce/ProductVariant/${product.variants[index]!.id}`;
const domainOf = (hash: string) => `store-${hash}.mybigcommerce.com`;

/** The delivery's headers signed anew at `timestamp` (Standard Webhooks, keyed with the client secret). */
function signedAt(headers: Record<string, string>, body: string, timestamp: number): Record<string, string> {
  const signature = createHmac('sha256', APP.clientSecret).update(`${headers['webhook-id']}.${timestamp}.${body}`).digest('base64');
  return { ...headers, 'webhook-timestamp': String(timestamp), 'webhook-signature': `v1,${signature}` };
}

for (const dialect of testDialects()) {
  describe(`BigCommerce stores on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    let t: TestApp;
    let sink: SmtpSink;
    let bc: BigCommerceStandIn;

    before(async () => {
      sink = await startSmtpSink();
      t = await startTestApp(dialect, {
        BASE_URL: BASE,
        SMTP_URL: sink.url,
        RESTOCK_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
        RECONCILE_INTERVAL_MINUTES: '0',
        BIGCOMMERCE_CLIENT_ID: APP.clientId,
        BIGCOMMERCE_CLIENT_SECRET: APP.clientSecret,
      });
      // What BigCommerce sends to the service's address arrives as a request to the app.
      bc = await startBigCommerce(APP, postsToApp(t));
    });
    after(async () => {
      await bc?.close();
      await t?.close();
      await sink?.close();
    });

    const agentOf = (domain: string, owner: string) => agentOfMailed(t.app, sink, domain, owner);

    /** The merchant clicks Install: BigCommerce sends their browser to the auth callback. */
    async function install(hash: string) {
      const grant = bc.authorize(hash);
      return t.app.inject({ method: 'GET', url: `/bigcommerce/auth?${new URLSearchParams(grant)}` });
    }

    async function installed(): Promise<{ hash: string; domain: string; owner: string }> {
      const { hash, owner } = bc.createStore();
      const res = await install(hash);
      assert.equal(res.statusCode, 200, res.body);
      return { hash, domain: domainOf(hash), owner: owner.email };
    }

    /** A sold-out product of the store, and a new shopper waiting for one of its variants. */
    async function waitingShopper(hash: string, product = sizedProduct(0), index = 0): Promise<{ product: BcProduct; email: string }> {
      bc.products(hash).set(product.id, product);
      const email = uniqueEmail('shopper');
      const res = await t.post('/api/v1/alerts/subscribe', { productId: productGid(product), variantId: variantGid(product, index), email, shop: domainOf(hash) });
      assert.equal(res.statusCode, 200, res.body);
      assert.equal(res.json().status, 'active');
      return { product, email };
    }

    /** The first variant back in stock, announced unless `deliver` is false. */
    const restockVariant = (hash: string, product: BcProduct, quantity: number, options?: { deliver?: boolean }) =>
      bc.update(hash, product.id, (p) => void (p.variants[0]!.inventory_level = quantity), options);

    const mailFor = (email: string) => sink.messages.filter((m) => m.recipients.includes(email));
    const storeStatus = async (domain: string) => (await t.database.db.selectFrom('stores').select(['status', 'platform', 'owner_email']).where('domain', '=', domain).executeTakeFirstOrThrow());

    it("installs: the code is traded for a token, the store made for its owner, the webhooks made with the store's secret header", async () => {
      const { hash, owner } = bc.createStore();
      const res = await install(hash);
      assert.equal(res.statusCode, 200, res.body);
      assert.match(res.headers['content-type'] as string, /^text\/html/);
      assert.match(res.body, /Restock is installed/);
      const domain = domainOf(hash);
      assert.deepEqual(await storeStatus(domain), { status: 'active', platform: 'bigcommerce', owner_email: owner.email });

      const hooks = bc.hooks(hash);
      assert.deepEqual(hooks.map((hook) => hook.scope).sort(), [
        'store/product/inventory/order/updated',
        'store/product/inventory/updated',
        'store/product/updated',
        'store/sku/inventory/order/updated',
        'store/sku/inventory/updated',
        'store/sku/updated',
      ]);
      for (const hook of hooks) {
        assert.equal(hook.destination, `${BASE}/webhooks/bigcommerce/${domain}`);
        assert.equal(hook.is_active, true);
        assert.ok((hook.headers?.['x-restock-webhook-secret'] ?? '').length >= 32);
      }
      const row = await t.database.db.selectFrom('store_connections').selectAll().where('store_domain', '=', domain).executeTakeFirstOrThrow();
      assert.equal(row.platform, 'bigcommerce');
      assert.equal(row.site, hash);
      const token = bc.requests.find((request) => request.path === '/oauth2/token');
      assert.ok(token, 'the code went to the token endpoint');

      const agent = await agentOf(domain, owner.email);
      const connection = await call(t.app, 'GET', `/api/v1/stores/${domain}/bigcommerce`, { token: agent.token });
      assert.equal(connection.statusCode, 200, connection.body);
      assert.equal(connection.json().status, 'connected');
      assert.deepEqual(connection.json().webhookIds.sort(), hooks.map((hook) => hook.id).sort());
      assert.equal(connection.body.includes(row.credentials_sealed!), false);
    });

    it('refuses a used code, a code of another store and a malformed context, storing nothing', async () => {
      const { hash } = bc.createStore();
      const other = bc.createStore();
      const grant = bc.authorize(hash);
      assert.equal((await t.app.inject({ method: 'GET', url: `/bigcommerce/auth?${new URLSearchParams(grant)}` })).statusCode, 200);
      const before = await t.tableDigests();
      const cases: Array<[Record<string, string>, number]> = [
        [grant, 400],
        [{ ...bc.authorize(other.hash), context: `stores/${hash}` }, 400],
        [{ ...bc.authorize(other.hash), context: 'stores/NOT A HASH' }, 400],
        [{ scope: grant.scope, context: grant.context }, 400],
      ];
      for (const [query, status] of cases) {
        const res = await t.app.inject({ method: 'GET', url: `/bigcommerce/auth?${new URLSearchParams(query)}` });
        assert.equal(res.statusCode, status, res.body);
      }
      assert.deepEqual(await t.tableDigests(), before);
    });

    it('an install whose webhooks BigCommerce fails to make is a 502 that stores nothing and leaves no webhook behind', async () => {
      const { hash } = bc.createStore();
      const before = await t.tableDigests();
      // The third webhook fails, after two were made.
      let made = 0;
      bc.failNext(1, (request) => request.method === 'POST' && request.path.endsWith('/v3/hooks') && ++made === 3);
      const res = await install(hash);
      assert.equal(res.statusCode, 502, res.body);
      assert.deepEqual(bc.hooks(hash), []);
      assert.deepEqual(await t.tableDigests(), before);
    });

    it('a signed stock webhook restocks the variant, and the alert reaches the mail server', async () => {
      const { hash, domain } = await installed();
      const { product, email } = await waitingShopper(hash);
      const statuses = await restockVariant(hash, product, 5);
      assert.ok(statuses.length > 0 && statuses.every((status) => status === 200), String(statuses));
      const delivered = bc.deliveries.filter((delivery) => delivery.scope === 'store/sku/inventory/updated').at(-1)!;
      assert.match(delivered.headers['webhook-signature']!, /^v1,/, 'the stand-in signs as BigCommerce does');
      const restocks = await t.database.db.selectFrom('restocks').selectAll().where('store_domain', '=', domain).execute();
      assert.equal(restocks.length, 1);
      assert.equal(restocks[0]!.variant_id, variantGid(product));
      await t.runWorker();
      const mail = await sink.waitFor((m) => m.recipients.includes(email));
      assert.match(mail.text, new RegExp(product.name));
    });

    it('a product counted as a whole restocks every variant when its level rises', async () => {
      const { hash } = await installed();
      const product = sizedProduct(0);
      product.inventory_tracking = 'product';
      const { email } = await waitingShopper(hash, product, 1);
      await bc.update(hash, product.id, (p) => void (p.inventory_level = 4));
      await t.runWorker();
      await sink.waitFor((m) => m.recipients.includes(email));
    });

    it('a product whose purchasing is disabled is not back, whatever its stock', async () => {
      const { hash } = await installed();
      const { product, email } = await waitingShopper(hash);
      await bc.update(hash, product.id, (p) => {
        p.availability = 'disabled';
        p.variants[0]!.inventory_level = 5;
      });
      await t.runWorker();
      assert.equal(mailFor(email).length, 0);
      await bc.update(hash, product.id, (p) => void (p.availability = 'available'));
      await t.runWorker();
      await sink.waitFor((m) => m.recipients.includes(email));
    });

    it("a delivery without the store's secret, with a forged signature or another store's producer is refused with 401 and stores nothing", async () => {
      const { hash, domain } = await installed();
      const { product } = await waitingShopper(hash);
      // A genuine delivery of this store's, kept to be replayed with changes.
      await restockVariant(hash, product, 1);
      const genuine = bc.deliveries.filter((delivery) => delivery.url.endsWith(domain)).at(-1)!;
      assert.equal(JSON.parse(genuine.body).producer, `stores/${hash}`);
      bc.products(hash).get(product.id)!.variants[0]!.inventory_level = 7;
      const other = await installed();
      const secret = genuine.headers['x-restock-webhook-secret']!;
      const otherStoreBody = genuine.body.replace(`stores/${hash}`, `stores/${other.hash}`);
      const before = await t.tableDigests();
      const forgeries: Array<{ headers: Record<string, string>; body: string }> = [
        { headers: { ...genuine.headers, 'x-restock-webhook-secret': 'x'.repeat(secret.length) }, body: genuine.body },
        { headers: Object.fromEntries(Object.entries(genuine.headers).filter(([name]) => name !== 'x-restock-webhook-secret')), body: genuine.body },
        { headers: { ...genuine.headers, 'webhook-signature': `v1,${Buffer.alloc(32).toString('base64')}` }, body: genuine.body },
        // The right secret, the body changed under its signature.
        { headers: genuine.headers, body: genuine.body.replace(`"id":${JSON.parse(genuine.body).data.id}`, `"id":${product.id}`) + ' ' },
        // Signed as BigCommerce signs, but 6 minutes ago: a replay.
        { headers: signedAt(genuine.headers, genuine.body, Math.floor(Date.now() / 1000) - 360), body: genuine.body },
        // Signed, with this store's secret, but about another store (its producer).
        { headers: signedAt(genuine.headers, otherStoreBody, Math.floor(Date.now() / 1000)), body: otherStoreBody },
      ];
      for (const { headers, body } of forgeries) {
        const res = await t.app.inject({ method: 'POST', url: `/webhooks/bigcommerce/${domain}`, headers, payload: body });
        assert.equal(res.statusCode, 401, res.body);
        assert.equal(res.json().type, `${BASE}/problems/invalid-webhook`);
      }
      assert.deepEqual(await t.tableDigests(), before);
    });

    it('a webhook whose product BigCommerce fails to give back is answered 502 (BigCommerce delivers again) and stores nothing', async () => {
      const { hash } = await installed();
      const { product, email } = await waitingShopper(hash);
      const before = await t.tableDigests();
      bc.failNext(1, (request) => request.method === 'GET' && request.path.endsWith('/v3/catalog/products'));
      const statuses = await restockVariant(hash, product, 3);
      assert.deepEqual(statuses, [502]);
      assert.deepEqual(await t.tableDigests(), before);
      await t.runWorker();
      assert.equal(mailFor(email).length, 0);
    });

    it('reconciliation catches a restock whose webhook never came', async () => {
      const { hash, domain } = await installed();
      const { product, email } = await waitingShopper(hash);
      await restockVariant(hash, product, 2, { deliver: false });
      await t.runWorker();
      assert.equal(mailFor(email).length, 0);
      assert.equal(await (t.app.restock.platforms.bigcommerce!.service as BigCommerceService).reconcileStore(domain), 2);
      await t.runWorker();
      await sink.waitFor((m) => m.recipients.includes(email));
    });

    it('the uninstall callback stops sending: the connection ends and later deliveries are refused', async () => {
      const { hash, domain } = await installed();
      const { product, email } = await waitingShopper(hash);
      const secret = bc.hooks(hash)[0]!.headers!['x-restock-webhook-secret']!;
      const load = await t.app.inject({ method: 'GET', url: `/bigcommerce/load?signed_payload_jwt=${bc.signedPayload(hash)}` });
      assert.equal(load.statusCode, 200, load.body);
      assert.match(load.body, /sends back-in-stock alerts/);

      bc.uninstall(hash);
      const res = await t.app.inject({ method: 'GET', url: `/bigcommerce/uninstall?signed_payload_jwt=${bc.signedPayload(hash)}` });
      assert.equal(res.statusCode, 200, res.body);
      assert.equal((await storeStatus(domain)).status, 'uninstalled');
      const row = await t.database.db.selectFrom('store_connections').selectAll().where('store_domain', '=', domain).executeTakeFirstOrThrow();
      assert.equal(row.status, 'disconnected');
      assert.equal(row.credentials_sealed, null);

      // A webhook in flight when the app was removed (the hook as it was) restocks nothing.
      const late = await t.app.inject({
        method: 'POST',
        url: `/webhooks/bigcommerce/${domain}`,
        headers: { 'content-type': 'application/json', 'x-restock-webhook-secret': secret },
        payload: JSON.stringify({ scope: 'store/product/updated', store_id: '1', producer: `stores/${hash}`, data: { type: 'product', id: product.id }, hash: 'x', created_at: 1 }),
      });
      assert.equal(late.statusCode, 404, late.body);
      await t.runWorker();
      assert.equal(mailFor(email).length, 0);
      assert.match((await t.app.inject({ method: 'GET', url: `/bigcommerce/load?signed_payload_jwt=${bc.signedPayload(hash)}` })).body, /is not connected/);
    });

    it('refuses callbacks whose signed payload is forged, for another app or expired, changing nothing', async () => {
      const { hash } = await installed();
      const sign = (secret: string, claims: Record<string, unknown>) =>
        new SignJWT({ user: { id: 1, email: 'a@example.com' }, owner: { id: 1, email: 'a@example.com' }, url: '/', channel_id: null, ...claims })
          .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
          .setIssuedAt()
          .setSubject(`stores/${hash}`)
          .sign(new TextEncoder().encode(secret));
      const before = await t.tableDigests();
      const forged = [
        await sign('not-the-secret', { aud: APP.clientId, iss: 'bc', exp: Math.floor(Date.now() / 1000) + 60 }),
        await sign(APP.clientSecret, { aud: 'another-app', iss: 'bc', exp: Math.floor(Date.now() / 1000) + 60 }),
        await sign(APP.clientSecret, { aud: APP.clientId, iss: 'bc', exp: Math.floor(Date.now() / 1000) - 60 }),
        'not-a-jwt',
      ];
      for (const token of forged) {
        for (const path of ['/bigcommerce/uninstall', '/bigcommerce/load', '/bigcommerce/remove-user']) {
          const res = await t.app.inject({ method: 'GET', url: `${path}?signed_payload_jwt=${token}` });
          assert.equal(res.statusCode, 401, `${path}: ${res.body}`);
        }
      }
      assert.deepEqual(await t.tableDigests(), before);
      const removed = await t.app.inject({ method: 'GET', url: `/bigcommerce/remove-user?signed_payload_jwt=${bc.signedPayload(hash, { id: 99, email: 'staff@example.com' })}` });
      assert.equal(removed.statusCode, 200, removed.body);
    });

    it('a store whose token BigCommerce refuses is disconnected at the next reconciliation', async () => {
      const { hash, domain } = await installed();
      await waitingShopper(hash);
      // The app was removed without the uninstall callback reaching the service.
      bc.uninstall(hash);
      assert.equal(await (t.app.restock.platforms.bigcommerce!.service as BigCommerceService).reconcileStore(domain), 0);
      assert.equal((await storeStatus(domain)).status, 'uninstalled');
      const row = await t.database.db.selectFrom('store_connections').select(['status', 'disconnect_reason']).where('store_domain', '=', domain).executeTakeFirstOrThrow();
      assert.deepEqual(row, { status: 'disconnected', disconnect_reason: 'BigCommerce refused the access token (401)' });
    });

    it("takes the seed's BigCommerce ids for a BigCommerce store, and refuses another platform's", async () => {
      const { hash, domain } = await installed();
      await waitingShopper(hash);
      const before = await t.tableDigests();
      const res = await t.post('/api/v1/alerts/subscribe', { productId: 'gid://bigcommerce/Product/77', variantId: 'gid://woocommerce/ProductVariant/78', email: uniqueEmail('shopper'), shop: domain });
      assert.equal(res.statusCode, 400, res.body);
      assert.deepEqual(await t.tableDigests(), before);
    });
  });
}
