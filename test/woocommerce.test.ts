/**
 * A WooCommerce store end to end, on each database: connected with keys (pasted, or posted by
 * the site's authorization endpoint), its signed product webhooks restocking variants and alerts
 * reaching the SMTP sink, forged deliveries refused, reconciliation catching what a webhook
 * missed, and disconnection (by the owner, or by the site refusing the keys) stopping the mail.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from './fixtures/suites.ts';
import { failOnLeakedHandles } from './fixtures/leaks.ts';
import type { WooCommerceService } from '../src/woocommerce/service.ts';
import { dialectSkip, postsToApp, startTestApp, testDialects, type TestApp } from './fixtures/app.ts';
import { agentOfMailed, call, createStore, uniqueEmail, type RegisteredAgent } from './fixtures/agents.ts';
import { startSmtpSink, type SmtpSink } from './fixtures/smtp-sink.ts';
import { startWooCommerce, type WooCommerceStandIn, type WooProduct } from './fixtures/woocommerce.ts';

failOnLeakedHandles();

const BASE = 'https://restock.test';
let counter = 0;
const unique = () => `${Date.now() % 1_000_000}${++counter}`;
const newId = () => Number(`${Date.now() % 100_000}${String(++counter).padStart(3, '0')}`);

function variableProduct(quantity = 0): WooProduct {
  return {
    id: newId(),
    name: `Boots ${unique()}`,
    type: 'variable',
    status: 'publish',
    manage_stock: false,
    stock_quantity: null,
    stock_status: 'outofstock',
    backorders: 'no',
    variations: [
      { id: newId(), manage_stock: true, stock_quantity: quantity, stock_status: quantity > 0 ? 'instock' : 'outofstock', backorders: 'no', status: 'publish' },
      { id: newId(), manage_stock: true, stock_quantity: 0, stock_status: 'outofstock', backorders: 'no', status: 'publish' },
    ],
  };
}

const productGid = (product: WooProduct) => `gid://woocommerce/Product/${product.id}`;
const variantGid = (product: WooProduct, index = 0) => `gid://woocommerce/ProductVariant/${product.variations[index]!.id}`;

for (const dialect of testDialects()) {
  describe(`WooCommerce stores on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    let t: TestApp;
    let sink: SmtpSink;
    let site: WooCommerceStandIn;

    before(async () => {
      sink = await startSmtpSink();
      t = await startTestApp(dialect, { BASE_URL: BASE, SMTP_URL: sink.url, RESTOCK_ENCRYPTION_KEY: randomBytes(32).toString('base64'), RECONCILE_INTERVAL_MINUTES: '0' });
      // What the site sends to the service's address arrives as a request to the app.
      site = await startWooCommerce(postsToApp(t));
    });
    after(async () => {
      await site?.close();
      await t?.close();
      await sink?.close();
    });

    const agentOf = (domain: string, owner: string) => agentOfMailed(t.app, sink, domain, owner);

    async function wooStore(): Promise<{ domain: string; agent: RegisteredAgent }> {
      const domain = `shop-${unique()}.example.com`;
      const owner = uniqueEmail('woo-owner');
      await createStore(t.database, domain, owner, 'woocommerce');
      return { domain, agent: await agentOf(domain, owner) };
    }

    async function connected(): Promise<{ domain: string; agent: RegisteredAgent }> {
      const store = await wooStore();
      const res = await call(t.app, 'PUT', `/api/v1/stores/${store.domain}/woocommerce`, { token: store.agent.token, body: { siteUrl: site.url, ...site.makeKeys() } });
      assert.equal(res.statusCode, 200, res.body);
      return store;
    }

    async function subscribe(domain: string, product: WooProduct, email: string, index = 0) {
      const res = await t.post('/api/v1/alerts/subscribe', { productId: productGid(product), variantId: variantGid(product, index), email, shop: domain });
      assert.equal(res.statusCode, 200, res.body);
      assert.equal(res.json().status, 'active');
    }

    /** A sold-out product on the site, and a new shopper of the store waiting for one of its variants. */
    async function waitingShopper(domain: string, product = variableProduct(0), index = 0): Promise<{ product: WooProduct; email: string }> {
      site.products.set(product.id, product);
      const email = uniqueEmail('shopper');
      await subscribe(domain, product, email, index);
      return { product, email };
    }

    /** The first variation back in stock on the site, announced unless `deliver` is false. */
    const restockVariation = (product: WooProduct, quantity: number, options?: { deliver?: boolean }) =>
      site.update(
        product.id,
        (p) => {
          p.variations[0]!.stock_quantity = quantity;
          p.variations[0]!.stock_status = 'instock';
        },
        options,
      );

    const mailFor = (email: string) => sink.messages.filter((m) => m.recipients.includes(email));

    it('connects with pasted keys: the keys are checked, the product webhooks made with a secret of ours, the ping answered', async () => {
      const { domain, agent } = await wooStore();
      const keys = site.makeKeys();
      const res = await call(t.app, 'PUT', `/api/v1/stores/${domain}/woocommerce`, { token: agent.token, body: { siteUrl: site.url, ...keys } });
      assert.equal(res.statusCode, 200, res.body);
      const connection = res.json();
      assert.equal(connection.status, 'connected');
      assert.equal(connection.webhookIds.length, 3);
      assert.equal(JSON.stringify(connection).includes(keys.consumerSecret), false, 'the keys are never shown back');
      for (const id of connection.webhookIds) {
        const webhook = site.webhooks.get(id)!;
        assert.equal(webhook.delivery_url, `${BASE}/webhooks/woocommerce/${domain}`);
        assert.equal(webhook.failures, 0, 'the ping was answered 200');
        assert.ok(webhook.secret.length >= 32);
      }
      assert.deepEqual(site.webhooks.get(connection.webhookIds[0])!.topic, 'product.created');
      const row = await t.database.db.selectFrom('store_connections').selectAll().where('store_domain', '=', domain).executeTakeFirstOrThrow();
      assert.equal(row.credentials_sealed!.includes(keys.consumerSecret), false, 'sealed at rest');
    });

    it('refuses keys the site refuses, a read-only key, and a site address that is not https, storing nothing', async () => {
      const { domain, agent } = await wooStore();
      const before = await t.tableDigests();
      const cases: Array<[Record<string, string>, number, string]> = [
        [{ siteUrl: site.url, consumerKey: `ck_${'0'.repeat(40)}`, consumerSecret: `cs_${'0'.repeat(40)}` }, 400, '/body/consumerKey'],
        [{ siteUrl: site.url, ...site.makeKeys('read') }, 400, '/body/consumerKey'],
        [{ siteUrl: 'http://shop.example.com', ...site.makeKeys() }, 400, '/body/siteUrl'],
        [{ siteUrl: site.url, consumerKey: 'ck_short', consumerSecret: `cs_${'0'.repeat(40)}` }, 400, '/body/consumerKey'],
      ];
      for (const [body, status, pointer] of cases) {
        const res = await call(t.app, 'PUT', `/api/v1/stores/${domain}/woocommerce`, { token: agent.token, body });
        assert.equal(res.statusCode, status, res.body);
        assert.match(res.headers['content-type'] as string, /^application\/problem\+json/);
        assert.ok(res.json().errors.some((e: { pointer: string }) => e.pointer === pointer), res.body);
      }
      assert.deepEqual(await t.tableDigests(), before);
    });

    it('connects through the authorization endpoint: the site posts the keys to the callback, then sends the owner back', async () => {
      const { domain, agent } = await wooStore();
      const res = await call(t.app, 'POST', `/api/v1/stores/${domain}/woocommerce/authorization`, { token: agent.token, body: { siteUrl: site.url } });
      assert.equal(res.statusCode, 200, res.body);
      const { authorizeUrl } = res.json();
      assert.ok(authorizeUrl.startsWith(`${site.url}/wc-auth/v1/authorize?`));
      const approved = await site.approve(authorizeUrl);
      assert.equal(approved.status, 302, approved.body);
      assert.match(approved.location!, new RegExp(`^${BASE}/woocommerce/connected\\?store=${domain.replace(/\./g, '\\.')}&success=1&user_id=`));
      const shown = await t.app.inject({ method: 'GET', url: approved.location!.slice(BASE.length) });
      assert.equal(shown.statusCode, 200);
      assert.match(shown.body, new RegExp(`${domain.replace(/\./g, '\\.')} is connected`));
      const state = await call(t.app, 'GET', `/api/v1/stores/${domain}/woocommerce`, { token: agent.token });
      assert.equal(state.json().status, 'connected');

      // A callback whose user_id is not ours (or was altered) connects nothing: WooCommerce then deletes the key.
      const keys = site.makeKeys();
      const before = await t.tableDigests();
      const forged = await t.app.inject({
        method: 'POST',
        url: '/woocommerce/keys',
        payload: { key_id: 1, user_id: `${new URL(authorizeUrl).searchParams.get('user_id')}x`, consumer_key: keys.consumerKey, consumer_secret: keys.consumerSecret, key_permissions: 'read_write' },
      });
      assert.equal(forged.statusCode, 401, forged.body);
      assert.deepEqual(await t.tableDigests(), before);
    });

    it('a signed product.updated restocks the variant, and the alert reaches the mail server', async () => {
      const { domain } = await connected();
      const { product, email } = await waitingShopper(domain);
      await restockVariation(product, 5);
      const restocks = await t.database.db.selectFrom('restocks').selectAll().where('store_domain', '=', domain).execute();
      assert.equal(restocks.length, 1);
      assert.equal(restocks[0]!.variant_id, variantGid(product));
      await t.runWorker();
      const mail = await sink.waitFor((m) => m.recipients.includes(email));
      assert.match(mail.text, new RegExp(product.name));
    });

    it('a forged or missing signature is refused with 401 and stores nothing', async () => {
      const { domain } = await connected();
      const product = variableProduct(3);
      site.products.set(product.id, product);
      const body = JSON.stringify({ id: product.variations[0]!.id, type: 'variation', parent_id: product.id, status: 'publish', manage_stock: true, stock_quantity: 3, stock_status: 'instock', backorders: 'no' });
      const before = await t.tableDigests();
      for (const signature of [undefined, 'AAAA', Buffer.from('x'.repeat(32)).toString('base64')]) {
        const res = await t.app.inject({
          method: 'POST',
          url: `/webhooks/woocommerce/${domain}`,
          headers: { 'content-type': 'application/json', 'x-wc-webhook-topic': 'product.updated', ...(signature ? { 'x-wc-webhook-signature': signature } : {}) },
          payload: body,
        });
        assert.equal(res.statusCode, 401, res.body);
        assert.equal(res.json().type, `${BASE}/problems/invalid-webhook`);
      }
      assert.deepEqual(await t.tableDigests(), before);
    });

    it('a parent that counts the stock restocks its variations as the site has them', async () => {
      const { domain } = await connected();
      const product = variableProduct(0);
      product.manage_stock = true;
      product.stock_quantity = 0;
      for (const variation of product.variations) variation.manage_stock = false;
      const { email } = await waitingShopper(domain, product, 1);
      await site.update(product.id, (p) => {
        p.stock_quantity = 4;
        p.stock_status = 'instock';
      });
      await t.runWorker();
      await sink.waitFor((m) => m.recipients.includes(email));
    });

    it('a delivery whose variations the site will not give is answered 502 and stores nothing', async () => {
      const { domain, agent } = await connected();
      const product = variableProduct(0);
      product.manage_stock = true;
      product.stock_quantity = 0;
      for (const variation of product.variations) variation.manage_stock = false;
      const { email } = await waitingShopper(domain, product, 1);
      const ids = (await call(t.app, 'GET', `/api/v1/stores/${domain}/woocommerce`, { token: agent.token })).json().webhookIds as number[];
      const updated = [...site.webhooks.values()].find((webhook) => ids.includes(webhook.id) && webhook.topic === 'product.updated')!;
      const before = await t.tableDigests();
      // The keys are gone, the webhook still signs: the parent is announced, its variations cannot be read.
      site.revokeKeys();
      await site.update(product.id, (p) => {
        p.stock_quantity = 4;
        p.stock_status = 'instock';
      });
      assert.equal(updated.lastStatus, 502, 'the site is told the product could not be read, not answered a 500');
      assert.deepEqual(await t.tableDigests(), before);
      await t.runWorker();
      assert.equal(mailFor(email).length, 0);
    });

    it('reconciliation catches a restock whose webhook never came', async () => {
      const { domain } = await connected();
      const { product, email } = await waitingShopper(domain);
      await restockVariation(product, 2, { deliver: false });
      await t.runWorker();
      assert.equal(mailFor(email).length, 0);
      await (t.app.restock.platforms.woocommerce!.service as WooCommerceService).reconcileStore(domain);
      await t.runWorker();
      await sink.waitFor((m) => m.recipients.includes(email));
    });

    it('disconnecting stops sending: the webhooks are deleted on the site and later deliveries refused', async () => {
      const { domain, agent } = await connected();
      const { product, email } = await waitingShopper(domain);
      const ids = (await call(t.app, 'GET', `/api/v1/stores/${domain}/woocommerce`, { token: agent.token })).json().webhookIds as number[];
      const secret = site.webhooks.get(ids[1]!)!.secret;
      const res = await call(t.app, 'DELETE', `/api/v1/stores/${domain}/woocommerce`, { token: agent.token });
      assert.equal(res.statusCode, 200, res.body);
      assert.equal(res.json().status, 'disconnected');
      for (const id of ids) assert.equal(site.webhooks.has(id), false);
      // A delivery still signed with the old secret (one in flight) is refused and restocks nothing.
      site.webhooks.set(999, { id: 999, topic: 'product.updated', delivery_url: `${BASE}/webhooks/woocommerce/${domain}`, secret, status: 'active', failures: 0 });
      await restockVariation(product, 5);
      site.webhooks.delete(999);
      await t.runWorker();
      assert.equal(mailFor(email).length, 0);
      assert.equal((await t.database.db.selectFrom('stores').select('status').where('domain', '=', domain).executeTakeFirstOrThrow()).status, 'uninstalled');
    });

    it('a site that revokes the keys is disconnected at the next reconciliation, and nothing more is sent', async () => {
      const { domain } = await connected();
      const { product, email } = await waitingShopper(domain);
      const revoked = await startWooCommerce(async () => 200);
      try {
        // Another site stands for the same one with its keys deleted: every call runs as nobody.
        await t.database.db.updateTable('store_connections').set({ site: `${revoked.url}/` }).where('store_domain', '=', domain).execute();
        revoked.products.set(product.id, product);
        assert.equal(await (t.app.restock.platforms.woocommerce!.service as WooCommerceService).reconcileStore(domain), 0);
      } finally {
        await revoked.close();
      }
      const row = await t.database.db.selectFrom('store_connections').selectAll().where('store_domain', '=', domain).executeTakeFirstOrThrow();
      assert.equal(row.status, 'disconnected');
      assert.equal(row.credentials_sealed, null);
      assert.match(row.disconnect_reason!, /woocommerce_rest_cannot_view/);
      assert.equal((await t.database.db.selectFrom('stores').select('status').where('domain', '=', domain).executeTakeFirstOrThrow()).status, 'uninstalled');
      // The site's webhooks outlive its keys; what they deliver now restocks nothing.
      await restockVariation(product, 3);
      await t.runWorker();
      assert.equal(mailFor(email).length, 0);
    });

    it("takes the seed's WooCommerce ids for a WooCommerce store, and refuses another platform's by the store's own platform", async () => {
      const { domain } = await wooStore();
      const product = variableProduct(0);
      await subscribe(domain, product, uniqueEmail('shopper'));
      const before = await t.tableDigests();
      const res = await t.post('/api/v1/alerts/subscribe', { productId: 'gid://shopify/Product/77', variantId: 'gid://shopify/ProductVariant/78', email: uniqueEmail('shopper'), shop: domain });
      assert.equal(res.statusCode, 400, res.body);
      assert.deepEqual(
        res.json().errors.map((e: { pointer: string }) => e.pointer),
        ['/body/productId', '/body/variantId'],
      );
      assert.match(res.json().detail, new RegExp(`${domain.replace(/\./g, '\\.')} is a woocommerce store`));
      assert.deepEqual(await t.tableDigests(), before);
    });

    it('a Shopify store cannot be connected to a WooCommerce site', async () => {
      const domain = `shopify-${unique()}.myshopify.com`;
      const owner = uniqueEmail('owner');
      await createStore(t.database, domain, owner);
      const agent = await agentOf(domain, owner);
      const res = await call(t.app, 'PUT', `/api/v1/stores/${domain}/woocommerce`, { token: agent.token, body: { siteUrl: site.url, ...site.makeKeys() } });
      assert.equal(res.statusCode, 409, res.body);
    });
  });
}
