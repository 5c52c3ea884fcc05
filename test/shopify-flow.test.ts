/**
 * Shopify Flow triggers end to end on both databases: the app installed on the Admin API stand-in
 * (test/fixtures/shopify-admin.ts, which answers `flowTriggerReceive` as Flow does: the handle one
 * of the app's Flow trigger extensions in extensions/, the payload exactly their fields,
 * test/fixtures/shopify-flow.ts). Through the public API a shopper subscribes, the waitlist reaches
 * the store's threshold, the product comes back and the alert goes out: each of the four triggers
 * reaches the store's Flow once, with the declared fields. A store without the app gets none, and a
 * trigger Shopify refuses is given up, not retried.
 */
import assert from 'node:assert/strict';
import { agentOf, call, expectStatus, registerAnonymousAgent, storeWithAgent, uniqueEmail } from './fixtures/agents.ts';
import { dialectSkip, startTestApp, testDialects, type TestApp } from './fixtures/app.ts';
import { failOnLeakedHandles } from './fixtures/leaks.ts';
import { startShopifyAdmin, type ShopifyAdminStandIn } from './fixtures/shopify-admin.ts';
import { declaredFlowTriggers } from './fixtures/shopify-flow.ts';
import { installByTokenExchange, shopifyTestApp } from './fixtures/shopify-app.ts';
import { after, before, describe, it } from './fixtures/suites.ts';

failOnLeakedHandles();

const { apiKey: API_KEY, apiSecret: API_SECRET, scopes: SCOPES, env: ENV } = shopifyTestApp('restock-flow', 'read_products,read_inventory');
const HANDLES = ['restock-shopper-subscribed', 'restock-waitlist-threshold', 'restock-product-back', 'restock-alert-sent'];

let shopSerial = 0;

for (const dialect of testDialects()) {
  describe(`Shopify Flow triggers on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
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

    async function installedStore() {
      const shop = `flow-${dialect}-${Date.now() % 100000}-${++shopSerial}.myshopify.com`;
      const owner = `owner@${shop}`;
      await installByTokenExchange(t, shopify, shop, owner);
      const agent = await agentOf(t.app, t.database, shop, owner);
      return { shop, token: agent.token };
    }

    /** Runs the worker until the shop's Flow took `count` triggers. */
    async function triggersOf(shop: string, count: number) {
      for (let round = 0; round < 20; round++) {
        await t.runWorker();
        const got = shopify.flowTriggers(shop);
        if (got.length >= count) return got;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      const queued = await t.database.db.selectFrom('flow_triggers').select(['handle', 'status', 'last_error']).where('store_domain', '=', shop).execute();
      assert.fail(`${count} Flow triggers did not reach ${shop}: ${shopify.flowTriggers(shop).length} did; queue ${JSON.stringify(queued)}`);
    }

    it('declares the four triggers as Flow trigger extensions', () => {
      assert.deepEqual([...declaredFlowTriggers().keys()].sort(), [...HANDLES].sort());
    });

    it('fires shopper subscribed, waitlist threshold reached, product back in stock and alert sent at the store’s Flow, once each', async () => {
      const { shop, token } = await installedStore();
      expectStatus(await call(t.app, 'PATCH', `/api/v1/stores/${shop}`, { token, body: { waitlistThreshold: 1 } }), 200);
      const productId = 'gid://shopify/Product/4242';
      const variantId = 'gid://shopify/ProductVariant/4243';
      expectStatus(await call(t.app, 'POST', `/api/v1/stores/${shop}/inventory`, { token, body: { items: [{ productId, variantId, available: 0, productTitle: 'Blue mug' }] } }), 200);
      const email = uniqueEmail('flow');
      const shopper = await registerAnonymousAgent(t.app);
      const sub = expectStatus(await call(t.app, 'POST', '/api/v1/alerts/subscribe', { token: shopper.token, body: { productId, variantId, email, shop } }), 200);

      const early = await triggersOf(shop, 2);
      const subscribed = early.find((call) => call.handle === 'restock-shopper-subscribed');
      assert.deepEqual(subscribed?.payload, { product_id: 4242, 'Variant ID': variantId, 'Subscription ID': sub.subscriptionId, Email: email });
      const threshold = early.find((call) => call.handle === 'restock-waitlist-threshold');
      assert.deepEqual(threshold?.payload, { product_id: 4242, 'Variant ID': variantId, Waiting: 1, Threshold: 1 });

      expectStatus(await call(t.app, 'POST', `/api/v1/stores/${shop}/inventory`, { token, body: { items: [{ productId, variantId, available: 5, productTitle: 'Blue mug' }] } }), 200);
      const all = await triggersOf(shop, 4);
      assert.deepEqual(all.map((call) => call.handle).sort(), [...HANDLES].sort(), 'each trigger once');
      const back = all.find((call) => call.handle === 'restock-product-back')!;
      assert.equal(back.payload.product_id, 4242);
      assert.equal(back.payload.Available, 5);
      assert.match(String(back.payload['Restock ID']), /\S/);
      const sent = all.find((call) => call.handle === 'restock-alert-sent')!;
      assert.deepEqual(Object.keys(sent.payload).sort(), ['Alert ID', 'Channel', 'Email', 'Subscription ID', 'Variant ID', 'product_id']);
      assert.equal(sent.payload.Email, email);
      assert.equal(sent.payload.Channel, 'email');
      // Every trigger went through the Admin API with the store's token.
      assert.ok(shopify.requests.filter((request) => request.shop === shop && request.field === 'flowTriggerReceive').length >= 4);
      await t.runWorker();
      assert.equal(shopify.flowTriggers(shop).length, 4, 'nothing twice');
    });

    it('fires nothing for a store without the app, and gives up a trigger Shopify refuses', async () => {
      const other = await storeWithAgent(t.app, t.database, 'flow-none');
      const productId = 'gid://shopify/Product/77';
      expectStatus(await call(t.app, 'POST', `/api/v1/stores/${other.domain}/inventory`, { token: other.token, body: { items: [{ productId, available: 0 }] } }), 200);
      const shopper = await registerAnonymousAgent(t.app);
      expectStatus(await call(t.app, 'POST', '/api/v1/alerts/subscribe', { token: shopper.token, body: { productId, email: uniqueEmail('none'), shop: other.domain } }), 200);
      await t.runWorker();
      assert.equal((await t.database.db.selectFrom('flow_triggers').selectAll().where('store_domain', '=', other.domain).execute()).length, 0);

      const { shop } = await installedStore();
      const now = new Date(Date.now() - 1).toISOString();
      // Queued as the sink would, but each wrong in one way Flow refuses: a field the extension does not declare, a handle no extension has.
      const complete = { product_id: 1, 'Variant ID': '', 'Alert ID': 'ntf_1', 'Subscription ID': 'sub_1', Channel: 'email', Email: 'shopper@example.com' };
      const queued = (id: string, handle: string, payload: Record<string, unknown>) => ({ id, store_domain: shop, event_id: `evt_${id}`, handle, payload: JSON.stringify(payload), status: 'pending' as const, attempts: 0, next_attempt_at: now, last_error: null, created_at: now, finished_at: null });
      await t.database.db.insertInto('flow_triggers').values([queued('flt_extra', 'restock-alert-sent', { ...complete, 'Not a field': 'x' }), queued('flt_handle', 'restock-not-deployed', complete)]).execute();
      await t.runWorker();
      const rows = new Map((await t.database.db.selectFrom('flow_triggers').selectAll().where('store_domain', '=', shop).execute()).map((row) => [row.id, row]));
      assert.match(rows.get('flt_extra')?.last_error ?? '', /Shopify refused it: payload\.Not a field/);
      assert.match(rows.get('flt_handle')?.last_error ?? '', /Shopify refused it: handle/);
      for (const row of rows.values()) {
        assert.equal(row.status, 'failed');
        assert.equal(row.attempts, 1, 'not retried');
      }
      assert.equal(shopify.flowTriggers(shop).length, 0);
    });
  });
}
