/**
 * Alerts beyond the allowance billed at the store's own provider (docs/plans.md, "Beyond the
 * allowance"): a plan bought through Stripe carries a metered price whose Billing Meter is told of
 * them (meter events, billed with the next invoice); a plan bought through Shopify Billing carries
 * a usage line capped at the owner's ceiling, and they become usage charges under it. Each report
 * is made once, through the official SDK / the Admin API, against stand-ins of both. On SQLite and
 * PostgreSQL.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from './fixtures/suites.ts';
import { agentOf, call, expectStatus, storeWithAgent, uniqueEmail, type StoreAgent } from './fixtures/agents.ts';
import { dialectSkip, startTestApp, testDialects, type TestApp } from './fixtures/app.ts';
import { failOnLeakedHandles } from './fixtures/leaks.ts';
import { deliverWebhook, installByTokenExchange, shopifyTestApp } from './fixtures/shopify-app.ts';
import { startShopifyAdmin, type ShopifyAdminStandIn } from './fixtures/shopify-admin.ts';
import { startStripeApi, type StripeApi } from './fixtures/stripe-api.ts';

failOnLeakedHandles();

const CHECKOUT = '/api/v1/plans/checkout';
const SUBSCRIBE = '/api/v1/alerts/subscribe';
const WEBHOOK_SECRET = 'whsec_overage_providers';
/** Growth allows 3 alerts a month here, and each beyond it costs USD 0.02. */
const PLAN_ENV = { PLAN_GROWTH_ALERTS_PER_MONTH: '3', PLAN_OVERAGE_CENTS_PER_ALERT: '2', FREQUENCY_CAP_MINUTES: '0', BATCH_INTERVAL_SECONDS: '0', BATCH_MULTIPLIER: '100' };
let serial = 0;

for (const dialect of testDialects()) {
  describe(`alerts beyond the allowance billed at Stripe on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    let stripe: StripeApi;
    let t: TestApp;

    before(async () => {
      stripe = await startStripeApi();
      t = await startTestApp(dialect, {
        ...PLAN_ENV,
        CHECKOUT_PROVIDER: 'stripe',
        STRIPE_SECRET_KEY: stripe.secretKey,
        STRIPE_API_URL: `http://127.0.0.1:${stripe.port}`,
        STRIPE_WEBHOOK_SECRET: WEBHOOK_SECRET,
      });
    });
    after(async () => {
      await t.close();
      await stripe.close();
    });

    /** A store whose owner's agent bought growth at Stripe, paid, and whose webhook made it active. */
    async function storeOnGrowth(name: string) {
      const store = await storeWithAgent(t.app, t.database, name);
      const res = expectStatus(await call(t.app, 'POST', CHECKOUT, { token: store.token, body: { plan: 'growth', shop: store.domain } }), 200);
      const external = [...stripe.checkoutSessions.values()].find((session) => session.client_reference_id === res.sessionId)!;
      const { session, subscription } = stripe.completeCheckout(external.id);
      const { payload, signature } = stripe.signedDelivery(stripe.event('checkout.session.completed', session), WEBHOOK_SECRET);
      const delivered = await t.app.inject({ method: 'POST', url: '/webhooks/stripe', headers: { 'content-type': 'application/json', 'stripe-signature': signature }, payload });
      assert.equal(delivered.statusCode, 200, delivered.body);
      assert.equal((await planOf(store)).status, 'active');
      return { store, subscription: subscription! };
    }

    async function waiting(store: StoreAgent, count: number) {
      const ids = { productId: `gid://shopify/Product/${9_500_000 + ++serial}`, variantId: `gid://shopify/ProductVariant/${9_600_000 + serial}` };
      for (let i = 0; i < count; i++) {
        expectStatus(await call(t.app, 'POST', SUBSCRIBE, { token: store.token, body: { ...ids, email: uniqueEmail(`metered${i}`), shop: store.domain } }), 200);
      }
      return ids;
    }
    async function restock(store: StoreAgent, ids: { productId: string; variantId: string }) {
      const body = { items: [{ productId: ids.productId, variantId: ids.variantId, available: 50, productTitle: `Metered widget ${serial}` }] };
      expectStatus(await call(t.app, 'POST', `/api/v1/stores/${store.domain}/inventory`, { token: store.token, body }), 200);
      await t.runWorker();
    }
    const planOf = async (store: StoreAgent) => expectStatus(await call(t.app, 'GET', `/api/v1/stores/${store.domain}`, { token: store.token }), 200).plan;
    const sentCount = async (domain: string) => (await t.database.db.selectFrom('notifications').select('status').where('store_domain', '=', domain).where('status', '=', 'sent').execute()).length;
    const eventsOf = (customer: string) => stripe.meterEvents.filter((event) => event.payload.stripe_customer_id === customer);

    it('the checkout carries a metered price on a Billing Meter; a restock beyond the allowance sends everyone, is reported once as a meter event, and the next invoice bills it', async () => {
      const { store, subscription } = await storeOnGrowth('metered');
      // The subscription holds the plan's monthly price and the metered price of its overage.
      const metered = subscription.items.data.find((item) => item.price.recurring?.usage_type === 'metered');
      assert.ok(metered, 'a metered item');
      assert.equal(metered.price.unit_amount, 2);
      assert.equal(metered.price.lookup_key, 'restock_overage_2_usd');
      assert.equal(stripe.meters.get(metered.price.recurring!.meter!)?.event_name, 'restock_alerts_beyond_allowance');
      assert.equal(metered.quantity, undefined, 'a metered item has no quantity');

      const ids = await waiting(store, 6);
      await restock(store, ids);
      assert.equal(await sentCount(store.domain), 6, 'nobody waits for the allowance');
      assert.deepEqual((await planOf(store)).overage, { billed: true, pricePerAlert: 0.02, ceiling: 29.99, alerts: 3, amount: 0.06, currency: 'USD' });

      assert.equal(await t.app.restock.billing.reportOverage(), 1);
      const customer = String(subscription.customer);
      assert.deepEqual(eventsOf(customer).map((event) => [event.event_name, event.payload.value]), [['restock_alerts_beyond_allowance', '3']]);
      assert.equal(await t.app.restock.billing.reportOverage(), 0, 'nothing new to report');
      assert.equal(eventsOf(customer).length, 1, 'reported once');

      // One more beyond the allowance: only the difference is reported.
      await restock(store, await waiting(store, 1));
      assert.equal(await t.app.restock.billing.reportOverage(), 1);
      assert.deepEqual(eventsOf(customer).map((event) => event.payload.value), ['3', '1']);

      // The period ends: Stripe's renewal invoice bills the month ahead and the four alerts behind, at USD 0.02.
      stripe.renewSubscription(subscription.id);
      const invoice = stripe.invoiceFor(subscription.id, { status: 'paid' });
      const overageLine = invoice.lines.data.find((line) => line.pricing?.price_details?.price === metered.price.id);
      assert.equal(overageLine?.quantity, 4);
      assert.equal(overageLine?.amount, 8);
      assert.equal(invoice.amount_due, 2999 + 8);
    });

    it('another store reuses the same meter and price; a report Stripe fails to take is made again at the next run, and billed once', async () => {
      const meters = stripe.meters.size;
      const { store, subscription } = await storeOnGrowth('retried');
      assert.equal(stripe.meters.size, meters, 'the meter is made once per Stripe account');
      assert.equal(stripe.requests.filter((request) => request.method === 'POST' && request.path === '/v1/prices').length, 1, 'the metered price is made once');

      await restock(store, await waiting(store, 5));
      // Stripe is down for the SDK's try and its one retry: nothing is reported, the claim is given back.
      for (let i = 0; i < 2; i++) stripe.failNext(500, { type: 'api_error', message: 'An unknown error occurred' });
      assert.equal(await t.app.restock.billing.reportOverage(), 0);
      const customer = String(subscription.customer);
      assert.equal(eventsOf(customer).length, 0);
      assert.equal(await t.app.restock.billing.reportOverage(), 1);
      assert.deepEqual(eventsOf(customer).map((event) => event.payload.value), ['2']);
    });
  });

  describe(`alerts beyond the allowance billed through Shopify on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    const { apiKey, apiSecret, scopes, env } = shopifyTestApp('restock-overage-test-app');
    let shopify: ShopifyAdminStandIn;
    let t: TestApp;

    before(async () => {
      shopify = await startShopifyAdmin({ apiKey, apiSecret, scopes });
      t = await startTestApp(dialect, { ...env, ...PLAN_ENV });
    });
    after(async () => {
      await t.close();
      await shopify.close();
    });

    /** An installed store whose owner's agent bought growth; Shopify's news of the approval applied. */
    async function storeOnGrowth(name: string) {
      const shop = `overage-${name}-${Date.now() % 1_000_000}${++serial}.myshopify.com`;
      await installByTokenExchange(t, shopify, shop);
      const agent = await agentOf(t.app, t.database, shop, `owner@${shop}`);
      expectStatus(await call(t.app, 'POST', CHECKOUT, { token: agent.token, body: { plan: 'growth', shop } }), 200);
      const subscription = shopify.appSubscriptions(shop).at(-1)!;
      shopify.approveSubscription(shop, subscription.id);
      const payload = shopify.appSubscriptionWebhook(shop, subscription.id);
      const delivered = await deliverWebhook(t, apiSecret, { topic: 'app_subscriptions/update', shop, payload, eventId: `ev-${shop}` });
      assert.equal(delivered.statusCode, 200, delivered.body);
      await t.runWorker();
      return { shop, token: agent.token, subscription: shopify.appSubscriptions(shop).at(-1)! };
    }
    const planOf = async (shop: string, token: string) => expectStatus(await call(t.app, 'GET', `/api/v1/stores/${shop}`, { token }), 200).plan;

    it('the subscription carries a usage line capped at the ceiling; alerts beyond the allowance become one usage charge each report, under the cap', async () => {
      const { shop, token, subscription } = await storeOnGrowth('capped');
      const usage = subscription.lineItems.map((item) => item.plan.pricingDetails).find((details) => details.__typename === 'AppUsagePricing');
      assert.ok(usage && usage.__typename === 'AppUsagePricing', 'a usage line');
      // The default ceiling of growth: one month's price.
      assert.deepEqual(usage.cappedAmount, { amount: '29.99', currencyCode: 'USD' });
      assert.match(usage.terms, /beyond the 3 a month of Growth, at \$0\.02 each/);
      assert.equal((await planOf(shop, token)).overage.ceiling, 29.99);

      // Dispatch takes six alerts from the allowance for a restock: three are beyond it.
      const grant = await t.app.restock.billing.reserveNotifications(shop, 6, true);
      assert.equal(grant.granted, 6);
      assert.equal(await t.app.restock.billing.reportOverage(), 1);
      assert.deepEqual(
        shopify.usageRecords(shop).map((record) => [record.price, record.subscriptionLineItemId]),
        [[{ amount: '0.06', currencyCode: 'USD' }, subscription.lineItems.find((item) => item.plan.pricingDetails.__typename === 'AppUsagePricing')!.id]],
      );
      assert.match(shopify.usageRecords(shop)[0]!.description, /3 back-in-stock alerts beyond the growth allowance at \$0\.02 each/);
      assert.ok(shopify.usageRecords(shop)[0]!.idempotencyKey, 'each charge carries an idempotency key');
      assert.equal(await t.app.restock.billing.reportOverage(), 0);
      assert.equal(shopify.usageRecords(shop).length, 1, 'charged once');
    });

    it('the capped amount Shopify holds bounds the ceiling: raising it here does not pass it, so no alert goes out that Shopify would not bill', async () => {
      const { shop, token } = await storeOnGrowth('bounded');
      const raised = expectStatus(await call(t.app, 'PATCH', `/api/v1/stores/${shop}/plan`, { token, body: { overageCeiling: 100 } }), 200);
      assert.equal(raised.overage.ceiling, 29.99, 'the approved capped amount is the most');
      // 3 allowed + 1,499 at USD 0.02 fill the cap of USD 29.99 (1,499.5 alerts): the rest wait.
      const grant = await t.app.restock.billing.reserveNotifications(shop, 1_600, true);
      assert.equal(grant.granted, 3 + 1_499);
      assert.equal(await t.app.restock.billing.reportOverage(), 1);
      assert.deepEqual(shopify.usageRecords(shop).map((record) => record.price.amount), ['29.98']);
    });
  });
}
