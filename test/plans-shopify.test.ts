import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from './fixtures/suites.ts';
import type { LightMyRequestResponse } from 'fastify';
import { agentOf, call, expectProblem, expectStatus } from './fixtures/agents.ts';
import { failOnLeakedHandles } from './fixtures/leaks.ts';
import { dialectSkip, startTestApp, testDialects, type TestApp } from './fixtures/app.ts';
import { deliverWebhook, installByTokenExchange, signWebhook } from './fixtures/shopify-app.ts';
import { startShopifyAdmin, type AppSubscriptionStatus, type AppSubscriptionWebhook, type ShopifyAdminStandIn } from './fixtures/shopify-admin.ts';

/**
 * Buying a plan for a store installed as the Shopify app: checkoutPlan creates an app
 * subscription through Shopify Billing, and Shopify's `app_subscriptions/update` webhooks move the
 * store's plan (pending → active → past_due → cancelled), each event applied once and in order
 * of Shopify's `updated_at`, whatever order the deliveries arrive in.
 */

failOnLeakedHandles();

const API_KEY = 'restock-plans-test-app';
const API_SECRET = `shpss_${randomBytes(16).toString('hex')}`;
const SCOPES = 'read_products,read_inventory';
// SHOPIFY_BILLING_TEST is left unset: its default (test charges) is part of what is checked.
const ENV = {
  SHOPIFY_API_KEY: API_KEY,
  SHOPIFY_API_SECRET: API_SECRET,
  SHOPIFY_SCOPES: SCOPES,
  RESTOCK_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
};
const CHECKOUT = '/api/v1/plans/checkout';
const TOPIC = 'app_subscriptions/update';
const DAY_MS = 24 * 3600 * 1000;
const CONFIRMATION_PATH = /^\/admin\/charges\/\d+\/(\d+)\/RecurringApplicationCharge\/confirm_recurring_application_charge$/;

let counter = 0;
const unique = () => `${Date.now() % 1_000_000}${++counter}`;
const newShop = () => `plans-${unique()}.myshopify.com`;
const newEventId = () => `ev-${unique()}`;

const sign = (body: string, secret = API_SECRET) => signWebhook(body, secret);

/** An `app_subscriptions/update` delivery as Shopify makes it. */
function deliver(t: TestApp, shop: string, payload: AppSubscriptionWebhook, options: { eventId?: string; hmac?: string } = {}): Promise<LightMyRequestResponse> {
  return deliverWebhook(t, API_SECRET, { topic: TOPIC, shop, payload, ...options });
}

/** Delivers and expects the delivery to be queued (not a duplicate, not refused). */
async function deliverQueued(t: TestApp, shop: string, payload: AppSubscriptionWebhook, eventId = newEventId()): Promise<string> {
  assert.deepEqual(expectStatus(await deliver(t, shop, payload, { eventId }), 200), { status: 'queued' });
  return eventId;
}

/**
 * The webhook body Shopify sent for the subscription, as another event about it: with another
 * status and another time. Used to deliver events out of order, as Shopify may.
 */
function asEvent(payload: AppSubscriptionWebhook, status: AppSubscriptionStatus, updatedAt: number): AppSubscriptionWebhook {
  return { app_subscription: { ...payload.app_subscription, status, updated_at: new Date(updatedAt).toISOString().replace(/\.\d{3}Z$/, '+00:00') } };
}

/** Installs the app for the shop; returns its owner's address. */
async function install(t: TestApp, shopify: ShopifyAdminStandIn, shop: string): Promise<string> {
  await installByTokenExchange(t, shopify, shop);
  return `owner@${shop}`;
}

async function planRow(t: TestApp, shop: string) {
  return t.database.db.selectFrom('store_plans').selectAll().where('shop', '=', shop).executeTakeFirst();
}

async function billingEvents(t: TestApp, eventId: string) {
  return t.database.db.selectFrom('billing_events').selectAll().where('provider', '=', 'shopify').where('event_id', '=', eventId).execute();
}

/** The one outcome recorded for a Shopify event id (there must be exactly one row). */
async function outcomeOf(t: TestApp, eventId: string): Promise<string> {
  const rows = await billingEvents(t, eventId);
  assert.equal(rows.length, 1, `billing events for ${eventId}: ${JSON.stringify(rows)}`);
  return rows[0]!.outcome;
}

function assertAbout(actual: string | null | undefined, expected: number, toleranceMs: number, what: string) {
  assert.ok(actual, `${what} is set`);
  const off = Math.abs(Date.parse(actual) - expected);
  assert.ok(off <= toleranceMs, `${what} ${actual} is ${off} ms away from ${new Date(expected).toISOString()}`);
}

for (const dialect of testDialects()) {
  describe(`plans bought through Shopify Billing on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
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

    /** An agent the store's owner claimed for it: only the owner's side buys (an agent bound to no store only proposes). */
    const ownerAgents = new Map<string, string>();
    async function ownerAgent(shop: string): Promise<string> {
      let token = ownerAgents.get(shop);
      if (!token) {
        token = (await agentOf(t.app, t.database, shop, `owner@${shop}`)).token;
        ownerAgents.set(shop, token);
      }
      return token;
    }

    /** checkoutPlan as the store's own agent. */
    async function checkout(shop: string, plan: 'starter' | 'growth'): Promise<{ checkoutUrl: string; sessionId: string }> {
      return expectStatus(await call(t.app, 'POST', CHECKOUT, { token: await ownerAgent(shop), body: { plan, shop } }), 200);
    }

    const readSession = async (shop: string, sessionId: string) => call(t.app, 'GET', `${CHECKOUT}/${sessionId}`, { token: await ownerAgent(shop) });

    /** The app subscription the last checkout created at Shopify for the shop. */
    function lastSubscription(shop: string) {
      const subscription = shopify.appSubscriptions(shop).at(-1);
      assert.ok(subscription, `Shopify has an app subscription for ${shop}`);
      return subscription;
    }

    /** The merchant approves the subscription, Shopify reports it, the worker applies the report. */
    async function approveAndReport(shop: string, id: string): Promise<{ payload: AppSubscriptionWebhook; eventId: string }> {
      shopify.approveSubscription(shop, id);
      const payload = shopify.appSubscriptionWebhook(shop, id);
      assert.equal(payload.app_subscription.status, 'ACTIVE');
      const eventId = await deliverQueued(t, shop, payload);
      await t.runWorker();
      return { payload, eventId };
    }

    /** An installed store whose starter plan is active through Shopify. */
    async function storeWithActiveStarter() {
      const shop = newShop();
      await install(t, shopify, shop);
      const { sessionId } = await checkout(shop, 'starter');
      const starter = lastSubscription(shop);
      const activated = await approveAndReport(shop, starter.id);
      assert.equal((await planRow(t, shop))?.status, 'active');
      return { shop, sessionId, starter, ...activated };
    }

    it('checkoutPlan for an installed store creates a test app subscription at Shopify and a pending plan', async () => {
      const shop = newShop();
      const owner = await install(t, shopify, shop);
      // The store's own agent buys here, as a merchant's agent would.
      const agent = await agentOf(t.app, t.database, shop, owner);
      const res = await call(t.app, 'POST', CHECKOUT, { token: agent.token, body: { plan: 'starter', shop } });
      const { checkoutUrl, sessionId } = expectStatus(res, 200);

      // Exactly one subscription was created, with the starter plan's name and price, as a test charge.
      assert.equal(shopify.requests.filter((request) => request.shop === shop && request.field === 'appSubscriptionCreate').length, 1);
      const subscriptions = shopify.appSubscriptions(shop);
      assert.equal(subscriptions.length, 1);
      const [subscription] = subscriptions;
      assert.match(subscription!.name, /Starter/);
      assert.equal(subscription!.status, 'PENDING');
      assert.equal(subscription!.test, true, 'SHOPIFY_BILLING_TEST defaults to test charges');
      assert.equal(subscription!.returnUrl, `http://restock.test/checkout/${sessionId}`);
      assert.deepEqual(
        subscription!.lineItems.map((item) => item.plan.pricingDetails),
        [{ __typename: 'AppRecurringPricing', price: { amount: '9.99', currencyCode: 'USD' }, interval: 'EVERY_30_DAYS', discount: null }],
      );

      // The merchant is sent to Shopify's confirmation page for that charge, on their own shop.
      const url = new URL(checkoutUrl);
      assert.equal(url.protocol, 'https:');
      assert.equal(url.hostname, shop);
      assert.equal(CONFIRMATION_PATH.exec(url.pathname)?.[1], subscription!.id.split('/').pop());
      assert.ok(url.searchParams.get('signature'), 'Shopify signs its confirmation URLs');

      const session = expectStatus(await call(t.app, 'GET', `${CHECKOUT}/${sessionId}`, { token: agent.token }), 200);
      assert.equal(session.provider, 'shopify');
      assert.equal(session.status, 'open');
      assert.equal(session.checkoutUrl, checkoutUrl);
      assert.equal(session.amount, 9.99);
      assert.equal(session.currency, 'USD');

      const row = await planRow(t, shop);
      assert.equal(row?.status, 'pending');
      assert.equal(row?.plan, 'starter');
      assert.equal(row?.provider, 'shopify');
      assert.equal(row?.external_id, subscription!.id);
    });

    it('the merchant approving the charge makes the plan active for 30 days and completes the session', async () => {
      const shop = newShop();
      await install(t, shopify, shop);
      const { sessionId } = await checkout(shop, 'starter');
      const subscription = lastSubscription(shop);

      const { eventId } = await approveAndReport(shop, subscription.id);
      const approvedAt = Date.now();

      assert.equal(await outcomeOf(t, eventId), 'pending → active');
      const row = await planRow(t, shop);
      assert.equal(row?.status, 'active');
      assert.equal(row?.plan, 'starter');
      assert.equal(row?.external_id, subscription.id);
      // Shopify's times are whole seconds; the period starts when Shopify says it was approved.
      assertAbout(row?.period_start, approvedAt, 2000, 'period_start');
      assertAbout(row?.period_end, approvedAt + 30 * DAY_MS, 2000, 'period_end');
      assertAbout(row?.period_end, Date.parse(shopify.appSubscriptions(shop)[0]!.currentPeriodEnd!), 2000, 'period_end against Shopify\'s currentPeriodEnd');

      const session = expectStatus(await readSession(shop, sessionId), 200);
      assert.equal(session.status, 'completed');
      assert.equal(session.provider, 'shopify');
      assert.ok(session.completedAt);
      // What the plan allows follows it.
      const entitlement = await t.app.restock.billing.entitlement(shop);
      assert.equal(entitlement.plan, 'starter');
      assert.equal(entitlement.status, 'active');
    });

    it('applies each event once and by Shopify\'s time: redeliveries and older news change nothing, cancelled is final', async () => {
      const { shop, starter, payload: activePayload, eventId: activeEventId } = await storeWithActiveStarter();
      const active = await planRow(t, shop);
      const activeAt = Date.parse(activePayload.app_subscription.updated_at);

      // Shopify retries a delivery it thinks failed: same event id, so it is recognised at the door,
      // and even were it queued again the billing ledger holds one application.
      assert.deepEqual(expectStatus(await deliver(t, shop, activePayload, { eventId: activeEventId }), 200), { status: 'duplicate' });
      await t.runWorker();
      assert.equal((await billingEvents(t, activeEventId)).length, 1);
      assert.deepEqual(await planRow(t, shop), active, 'the redelivery changed nothing');

      // A CANCELLED made before the activation, arriving late, must not end the plan paid for since.
      const stale = await deliverQueued(t, shop, asEvent(activePayload, 'CANCELLED', activeAt - 60_000));
      await t.runWorker();
      assert.match(await outcomeOf(t, stale), /^ignored: older/);
      assert.deepEqual(await planRow(t, shop), active);

      // Shopify freezes the subscription when the shop's bill goes unpaid: the plan is past due.
      shopify.setSubscriptionStatus(shop, starter.id, 'FROZEN');
      const frozen = await deliverQueued(t, shop, asEvent(shopify.appSubscriptionWebhook(shop, starter.id), 'FROZEN', activeAt + 60_000));
      await t.runWorker();
      assert.equal(await outcomeOf(t, frozen), 'active → past_due');
      const pastDue = await planRow(t, shop);
      assert.equal(pastDue?.status, 'past_due');
      assert.equal(pastDue?.period_end, active?.period_end, 'the period is kept while payment is retried');

      shopify.setSubscriptionStatus(shop, starter.id, 'CANCELLED');
      const cancelled = await deliverQueued(t, shop, asEvent(shopify.appSubscriptionWebhook(shop, starter.id), 'CANCELLED', activeAt + 120_000));
      await t.runWorker();
      assert.equal(await outcomeOf(t, cancelled), 'past_due → cancelled');
      assert.equal((await planRow(t, shop))?.status, 'cancelled');
      assert.equal((await t.app.restock.billing.entitlement(shop)).plan, 'free');

      // Shopify does not revive a cancelled subscription; an ACTIVE about it (newer, even) is not
      // taken as a purchase: a new plan is bought with a new subscription.
      const revived = await deliverQueued(t, shop, asEvent(activePayload, 'ACTIVE', activeAt + 180_000));
      await t.runWorker();
      assert.match(await outcomeOf(t, revived), /^ignored: .*cancelled/);
      assert.equal((await planRow(t, shop))?.status, 'cancelled');
    });

    it('a second purchase keeps the plan in force until its own subscription is active; the old one\'s cancellation is then ignored', async () => {
      const { shop, starter } = await storeWithActiveStarter();
      const starterRow = await planRow(t, shop);

      const { sessionId } = await checkout(shop, 'growth');
      const growth = lastSubscription(shop);
      assert.notEqual(growth.id, starter.id);
      assert.match(growth.name, /Growth/);
      // The merchant has not approved the new charge yet: they keep the plan they pay for.
      assert.deepEqual(await planRow(t, shop), starterRow);
      assert.equal((await t.app.restock.billing.entitlement(shop)).plan, 'starter');

      // Approving growth makes Shopify cancel starter (an app has one active subscription per shop);
      // the growth ACTIVE arrives first.
      const { eventId } = await approveAndReport(shop, growth.id);
      assert.equal(await outcomeOf(t, eventId), 'active → active');
      const growthRow = await planRow(t, shop);
      assert.equal(growthRow?.status, 'active');
      assert.equal(growthRow?.plan, 'growth');
      assert.equal(growthRow?.external_id, growth.id);
      assert.equal(growthRow?.checkout_session_id, sessionId);
      assert.equal(expectStatus(await readSession(shop, sessionId), 200).status, 'completed');

      // Then the old subscription's CANCELLED, which is about a subscription the store no longer holds.
      const oldCancelled = shopify.appSubscriptionWebhook(shop, starter.id);
      assert.equal(oldCancelled.app_subscription.status, 'CANCELLED');
      const late = await deliverQueued(t, shop, oldCancelled);
      await t.runWorker();
      assert.match(await outcomeOf(t, late), /^ignored: .*no longer holds/);
      assert.deepEqual(await planRow(t, shop), growthRow);
    });

    it('an approval Shopify reports within the second of the checkout activates the plan', async () => {
      const shop = newShop();
      await install(t, shopify, shop);
      const checkoutAt = Date.now();
      await checkout(shop, 'starter');
      const subscription = lastSubscription(shop);
      shopify.approveSubscription(shop, subscription.id);
      // Shopify's times are whole seconds: dated the second the checkout started in, so no later than our clock.
      const sameSecond = Math.floor(checkoutAt / 1000) * 1000;
      const eventId = await deliverQueued(t, shop, asEvent(shopify.appSubscriptionWebhook(shop, subscription.id), 'ACTIVE', sameSecond));
      await t.runWorker();
      assert.equal(await outcomeOf(t, eventId), 'pending → active');
      assert.equal((await planRow(t, shop))?.status, 'active');
    });

    it('refuses a forged app_subscriptions/update with 401, queueing and applying nothing', async () => {
      const shop = newShop();
      await install(t, shopify, shop);
      await checkout(shop, 'starter');
      const subscription = lastSubscription(shop);
      const pending = await planRow(t, shop);
      // Someone who knows the subscription's id claims it is active, to get the plan unpaid.
      const forged = asEvent(shopify.appSubscriptionWebhook(shop, subscription.id), 'ACTIVE', Date.now());
      const before = await t.tableDigests();
      const eventId = newEventId();

      expectProblem(await deliver(t, shop, forged, { eventId, hmac: sign(JSON.stringify(forged), 'not-the-app-secret') }), 401, 'invalid-webhook');
      expectProblem(await deliver(t, shop, forged, { eventId, hmac: sign('another body') }), 401, 'invalid-webhook');
      await t.runWorker();

      assert.deepEqual(await t.tableDigests(), before);
      assert.equal((await billingEvents(t, eventId)).length, 0);
      assert.deepEqual(await planRow(t, shop), pending);
    });

    it('records a webhook about a subscription not bought through Restock as ignored, leaving the plan alone', async () => {
      const { shop, payload } = await storeWithActiveStarter();
      const held = await planRow(t, shop);
      // Another charge on the shop, under a name that is none of our plans (so no plan to give).
      const foreign: AppSubscriptionWebhook = {
        app_subscription: { ...payload.app_subscription, admin_graphql_api_id: 'gid://shopify/AppSubscription/987654321', name: 'Premium Support' },
      };
      for (const status of ['ACTIVE', 'CANCELLED'] as const) {
        const eventId = await deliverQueued(t, shop, asEvent(foreign, status, Date.now() + 60_000));
        await t.runWorker();
        assert.match(await outcomeOf(t, eventId), /^ignored: /, status);
        assert.deepEqual(await planRow(t, shop), held, `a foreign ${status} changes nothing`);
      }
    });

    it('answers 502 upstream-failed when Shopify\'s Admin API fails, charging nothing', async () => {
      const shop = newShop();
      await install(t, shopify, shop);
      const token = await ownerAgent(shop);
      const before = await t.tableDigests();
      shopify.failNext(1, (request) => request.shop === shop && request.field === 'appSubscriptionCreate');

      const problem = expectProblem(await call(t.app, 'POST', CHECKOUT, { token, body: { plan: 'starter', shop } }), 502, 'upstream-failed');
      assert.match(problem.detail, /shopify/i);

      assert.equal(shopify.requests.filter((request) => request.shop === shop && request.field === 'appSubscriptionCreate').length, 1, 'tried once, not retried behind the caller\'s back');
      assert.deepEqual(shopify.appSubscriptions(shop), [], 'Shopify holds no charge for the store');
      assert.equal(await planRow(t, shop), undefined, 'no plan, not even pending');
      assert.deepEqual(await t.tableDigests(), before, 'no plan, event or session of ours left behind');

      // Once Shopify answers again, the purchase goes through.
      await checkout(shop, 'starter');
      assert.equal(shopify.appSubscriptions(shop).length, 1);
      assert.equal((await planRow(t, shop))?.status, 'pending');
    });
  });
}
