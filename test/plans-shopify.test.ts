import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from './fixtures/suites.ts';
import type { LightMyRequestResponse } from 'fastify';
import { decodePaymentRequiredHeader, encodePaymentSignatureHeader } from '@x402/core/http';
import type { PaymentPayload, PaymentRequired } from '@x402/core/types';
import { Challenge, Credential } from 'mppx';
import { agentOf, call, createStore, expectProblem, expectStatus, registerAnonymousAgent } from './fixtures/agents.ts';
import { failOnLeakedHandles } from './fixtures/leaks.ts';
import { dialectSkip, startTestApp, testDialects, type TestApp } from './fixtures/app.ts';
import { deliverWebhook, installByTokenExchange, shopifyTestApp, signWebhook } from './fixtures/shopify-app.ts';
import { startShopifyAdmin, type AppSubscriptionStatus, type AppSubscriptionWebhook, type ShopifyAdminStandIn } from './fixtures/shopify-admin.ts';
import { startStripeApi, type StripeApi } from './fixtures/stripe-api.ts';
import { startX402Chain, x402Payment, type X402Chain } from './fixtures/x402-chain.ts';

/**
 * Buying a plan for a store installed as the Shopify app: checkoutPlan creates an app
 * subscription through Shopify Billing, and Shopify's `app_subscriptions/update` webhooks move the
 * store's plan (pending → active → past_due → cancelled), each event applied once and in order
 * of Shopify's `updated_at`, whatever order the deliveries arrive in. Such a store pays only
 * through Shopify Billing: any caller's checkout goes to Shopify, whose confirmation page in the
 * merchant's admin is the owner's consent; Stripe Checkout, x402 and MPP are refused before any
 * money moves; charges are tests only on development stores, or when the operator says so.
 */

failOnLeakedHandles();

// SHOPIFY_BILLING_TEST is left unset: its default (real charges, tests on development stores) is part of what is checked.
const { apiKey: API_KEY, apiSecret: API_SECRET, scopes: SCOPES, env: ENV } = shopifyTestApp('restock-plans-test-app');
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

const JSON_BODY = { 'content-type': 'application/json' };
const FORM = { 'content-type': 'application/x-www-form-urlencoded' };
const PROPOSAL_LINK = /http:\/\/restock\.test(\/checkout\/cs_[0-9a-z]+)\?owner_key=([A-Za-z0-9_-]{43})/;

/** The MPP challenge of `method` among those a 402 answer offers. */
function mppChallenge(unpaid: LightMyRequestResponse, method: string): Challenge.Challenge {
  const headers = new Headers();
  for (const value of [unpaid.headers['www-authenticate']].flat()) if (value) headers.append('www-authenticate', String(value));
  const challenge = Challenge.fromResponseList(new Response(null, { status: 402, headers })).find((offered) => offered.method === method);
  assert.ok(challenge, `an MPP ${method} challenge is offered`);
  return challenge;
}

/** Installs the app on a development store (`shop.plan.partnerDevelopment`), by token exchange. */
async function installDevelopmentStore(t: TestApp, shopify: ShopifyAdminStandIn, shop: string): Promise<void> {
  shopify.addShop(shop, { email: `owner@${shop}`, development: true });
  const res = await t.app.inject({ method: 'POST', url: '/shopify/token-exchange', headers: { authorization: `Bearer ${await shopify.sessionToken(shop)}` } });
  assert.equal(res.statusCode, 200, res.body);
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

    it('checkoutPlan for an installed store creates a real app subscription at Shopify and a pending plan', async () => {
      const shop = newShop();
      const owner = await install(t, shopify, shop);
      // The store's own agent buys here, as a merchant's agent would.
      const agent = await agentOf(t.app, t.database, shop, owner);
      const res = await call(t.app, 'POST', CHECKOUT, { token: agent.token, body: { plan: 'starter', shop } });
      const { checkoutUrl, sessionId } = expectStatus(res, 200);

      // Exactly one subscription was created, with the starter plan's name and price, as a real charge.
      assert.equal(shopify.requests.filter((request) => request.shop === shop && request.field === 'appSubscriptionCreate').length, 1);
      const subscriptions = shopify.appSubscriptions(shop);
      assert.equal(subscriptions.length, 1);
      const [subscription] = subscriptions;
      assert.match(subscription!.name, /Starter/);
      assert.equal(subscription!.status, 'PENDING');
      assert.equal(subscription!.test, false, 'a store on a paid plan is charged for real: SHOPIFY_BILLING_TEST is off by default');
      assert.equal(subscription!.returnUrl, `http://restock.test/checkout/${sessionId}`);
      assert.deepEqual(
        subscription!.lineItems.map((item) => item.plan.pricingDetails),
        [
          { __typename: 'AppRecurringPricing', price: { amount: '9.99', currencyCode: 'USD' }, interval: 'EVERY_30_DAYS', discount: null },
          // Alerts beyond the allowance, capped at the plan's default ceiling (test/overage-providers.test.ts).
          {
            __typename: 'AppUsagePricing',
            cappedAmount: { amount: '9.99', currencyCode: 'USD' },
            balanceUsed: { amount: '0.0', currencyCode: 'USD' },
            terms: 'Back-in-stock alerts beyond the 2000 a month of Starter, at $0.01 each',
            interval: 'EVERY_30_DAYS',
          },
        ],
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

    it("any agent's checkout answers Shopify's confirmation page; the merchant approving it there is the owner's choice", async () => {
      const { shop, starter } = await storeWithActiveStarter();
      await checkout(shop, 'growth');
      const { eventId: growthEvent } = await approveAndReport(shop, lastSubscription(shop).id);
      assert.equal(await outcomeOf(t, growthEvent), 'active → active');
      assert.equal((await planRow(t, shop))?.plan, 'growth');

      // An agent bound to no store: no proposal of ours, no mail; Shopify asks the merchant.
      const stranger = await registerAnonymousAgent(t.app);
      const answer = expectStatus(await call(t.app, 'POST', CHECKOUT, { token: stranger.token, body: { plan: 'starter', shop } }), 200);
      const subscription = lastSubscription(shop);
      assert.notEqual(subscription.id, starter.id);
      assert.equal(subscription.status, 'PENDING');
      assert.equal(answer.approval, 'shopify', 'the answer says the approval happens at Shopify');
      const url = new URL(answer.checkoutUrl);
      assert.equal(url.hostname, shop, "Shopify's page, in the merchant's own admin");
      assert.equal(CONFIRMATION_PATH.exec(url.pathname)?.[1], subscription.id.split('/').pop());
      const session = expectStatus(await call(t.app, 'GET', `${CHECKOUT}/${answer.sessionId}`, { token: stranger.token }), 200);
      assert.equal(session.status, 'open');
      assert.equal(session.provider, 'shopify');
      const mailed = await t.database.db.selectFrom('mail_outbox').select('id').where('purpose', '=', 'plan-confirmation').where('store_domain', '=', shop).execute();
      assert.deepEqual(mailed, [], 'no proposal is mailed: Shopify asks the merchant');
      assert.equal((await planRow(t, shop))?.plan, 'growth', 'nothing changes before the merchant approves');

      // The merchant approves the lower plan in their admin: their choice replaces growth.
      const { eventId } = await approveAndReport(shop, subscription.id);
      assert.equal(await outcomeOf(t, eventId), 'active → active');
      const row = await planRow(t, shop);
      assert.equal(row?.plan, 'starter');
      assert.equal(row?.external_id, subscription.id);
      assert.equal(expectStatus(await call(t.app, 'GET', `${CHECKOUT}/${answer.sessionId}`, { token: stranger.token }), 200).status, 'completed');
    });

    it('charges a development store with test charges, as Shopify reports the store at checkout', async () => {
      const shop = newShop();
      await installDevelopmentStore(t, shopify, shop);
      const { sessionId } = await checkout(shop, 'starter');
      const [subscription] = shopify.appSubscriptions(shop);
      assert.equal(subscription?.test, true, 'a development store cannot pay real charges');
      assert.equal(subscription?.returnUrl, `http://restock.test/checkout/${sessionId}`);
      const asked = shopify.requests.filter((request) => request.shop === shop && request.path.endsWith('/graphql.json')).map((request) => request.field);
      assert.deepEqual(asked.slice(-2), ['shop', 'appSubscriptionCreate'], "the shop's plan is read at checkout time, before the charge");
    });

    it('SHOPIFY_BILLING_TEST=true makes every charge a test charge, on any store', async () => {
      const staging = await startTestApp(dialect, { ...ENV, SHOPIFY_BILLING_TEST: 'true' });
      try {
        const shop = newShop();
        await installByTokenExchange(staging, shopify, shop);
        const agent = await agentOf(staging.app, staging.database, shop, `owner@${shop}`);
        expectStatus(await call(staging.app, 'POST', CHECKOUT, { token: agent.token, body: { plan: 'growth', shop } }), 200);
        assert.deepEqual(shopify.appSubscriptions(shop).map((subscription) => subscription.test), [true]);
      } finally {
        await staging.close();
      }
    });
  });

  describe(`a store installed as the Shopify app pays no other way, on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    let chain: X402Chain;
    let stripe: StripeApi;
    let t: TestApp;
    const installed = newShop();
    /** Proposed at Stripe (by an agent bound to no store) before the store installed the app. */
    const proposed = newShop();
    let proposal: { path: string; key: string };

    before(async () => {
      chain = await startX402Chain();
      stripe = await startStripeApi();
      t = await startTestApp(dialect, {
        ...ENV,
        CHECKOUT_PROVIDER: 'stripe',
        STRIPE_SECRET_KEY: stripe.secretKey,
        STRIPE_API_URL: `http://127.0.0.1:${stripe.port}`,
        STRIPE_WEBHOOK_SECRET: `whsec_${randomBytes(16).toString('hex')}`,
        STRIPE_NETWORK_ID: 'profile_restock_shopify',
        X402_PAY_TO: chain.payTo.address,
        X402_NETWORK: chain.network,
        X402_ASSET: chain.usdc,
        X402_FACILITATOR_URL: chain.facilitatorUrl,
      });
      await createStore(t.database, proposed, `owner@${proposed}`);
      const stranger = await registerAnonymousAgent(t.app);
      const { sessionId } = expectStatus(await call(t.app, 'POST', CHECKOUT, { token: stranger.token, body: { plan: 'growth', shop: proposed } }), 200);
      const mails = await t.database.db.selectFrom('mail_outbox').select('text_body').where('purpose', '=', 'plan-confirmation').where('store_domain', '=', proposed).execute();
      const link = mails.map((mail) => PROPOSAL_LINK.exec(mail.text_body)).find((found) => found?.[1] === `/checkout/${sessionId}`);
      assert.ok(link, 'the owner is mailed the proposal');
      proposal = { path: link[1]!, key: link[2]! };
      // Shopify's servers are needed only to install: while the stand-in runs, nothing else is reachable.
      const shopify = await startShopifyAdmin({ apiKey: API_KEY, apiSecret: API_SECRET, scopes: SCOPES });
      try {
        await installByTokenExchange(t, shopify, installed);
        await installByTokenExchange(t, shopify, proposed);
      } finally {
        await shopify.close();
      }
    });
    after(async () => {
      await t.close();
      await stripe.close();
      await chain.close();
    });

    /** What the payment networks have seen and moved so far. */
    const money = async () => ({
      facilitatorVerifies: chain.facilitator.verifyCalls,
      facilitatorSettles: chain.facilitator.settleCalls,
      payerUsdc: await chain.usdcBalance(chain.payer.address),
      stripePaymentIntents: stripe.paymentIntents.size,
      stripeCheckoutSessions: stripe.checkoutSessions.size,
    });
    /** Rows left for the store: payments in the ledger, checkout sessions, plans. */
    const rowsFor = async (shop: string) => ({
      payments: await t.database.db.selectFrom('payments').select('id').where('store_domain', '=', shop).execute(),
      sessions: await t.database.db.selectFrom('checkout_sessions').select('id').where('shop', '=', shop).execute(),
      plans: await planRow(t, shop),
    });

    function expectShopifyBillingRequired(problem: { detail: string }) {
      assert.match(problem.detail, /only through Shopify Billing/);
      assert.match(problem.detail, /nothing was charged/);
      assert.match(problem.detail, /checkoutPlan with an access token/, 'it says where to go instead');
    }

    it("Stripe Checkout: the owner's acceptance of a proposal made before the install opens no Checkout Session", async () => {
      const before = await money();
      const digests = await t.tableDigests();
      const res = await t.app.inject({ method: 'POST', url: `${proposal.path}/accept?owner_key=${proposal.key}`, headers: FORM, payload: '' });
      const problem = expectProblem(res, 409, 'shopify-billing-required');
      expectShopifyBillingRequired(problem);
      assert.match(problem.detail, /bought at stripe/);
      assert.deepEqual(await money(), before, 'nothing at Stripe');
      assert.deepEqual(await t.tableDigests(), digests, 'the proposal is left as it was, to expire');
    });

    it('x402 and MPP over HTTP: refused before the payment is verified, settled or charged', async () => {
      const body = JSON.stringify({ plan: 'starter', shop: installed });
      // The offers come before the body is read, so before the store is known. A plan offers no
      // x402 (a transfer cannot be refunded): the x402 payment is a genuine one, made for an alert.
      const offers = await t.app.inject({ method: 'POST', url: CHECKOUT, payload: body, headers: JSON_BODY });
      expectStatus(offers, 402);
      const mpp = Credential.serialize(Credential.from({ challenge: mppChallenge(offers, 'stripe'), payload: { spt: stripe.grantToken({ maxAmount: 999 }).id } }));
      const alertOffers = await t.app.inject({ method: 'POST', url: '/api/v1/alerts/subscribe', payload: JSON.stringify({ productId: 'gid://shopify/Product/1', email: `shopper@${installed}` }), headers: JSON_BODY });
      const x402 = encodePaymentSignatureHeader(await x402Payment(chain, decodePaymentRequiredHeader(String(alertOffers.headers['payment-required']))));
      const before = await money();
      for (const [protocol, headers] of [['x402', { 'payment-signature': x402 }], ['mpp', { authorization: mpp }]] as const) {
        const res = await t.app.inject({ method: 'POST', url: CHECKOUT, payload: body, headers: { ...JSON_BODY, ...headers } });
        const problem = expectProblem(res, 409, 'shopify-billing-required');
        expectShopifyBillingRequired(problem);
        assert.equal(problem.shop, installed, protocol);
        assert.equal(res.headers['payment-response'], undefined, `${protocol}: no settlement`);
        assert.equal(res.headers['payment-receipt'], undefined, `${protocol}: no receipt`);
      }
      assert.deepEqual(await money(), before, 'the facilitator verified and settled nothing, no USDC and no Stripe charge moved');
      assert.deepEqual(await rowsFor(installed), { payments: [], sessions: [], plans: undefined });
    });

    it('the paid MCP tool checkout_plan: refused at once, and with either payment, before any charge', async () => {
      const callTool = async (name: string, args: Record<string, unknown>, meta?: Record<string, unknown>) => {
        const params = { name, arguments: args, ...(meta ? { _meta: meta } : {}) };
        const res = await t.app.inject({
          method: 'POST',
          url: '/mcp',
          headers: { ...JSON_BODY, accept: 'application/json, text/event-stream' },
          payload: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params }),
        });
        return expectStatus(res, 200).result as { isError?: boolean; structuredContent: Record<string, unknown>; _meta?: Record<string, unknown> };
      };
      // Offers for a store that is not the Shopify app's, to build genuine payments from (x402's
      // from an alert's: a plan offers none).
      const elsewhere = await callTool('checkout_plan', { plan: 'starter', shop: newShop() });
      assert.equal(elsewhere.isError, true);
      const alert = await callTool('subscribe_alert', { productId: 'gid://shopify/Product/1', email: `shopper@${installed}` });
      const payment: PaymentPayload = await x402Payment(chain, alert.structuredContent as unknown as PaymentRequired);
      const challenges = (elsewhere._meta?.['org.paymentauth/payment-required'] as { challenges: Challenge.Challenge[] }).challenges;
      const credential = Credential.from({ challenge: challenges.find((c) => c.method === 'stripe')!, payload: { spt: stripe.grantToken({ maxAmount: 999 }).id } });

      const before = await money();
      for (const [how, meta] of [['unpaid', undefined], ['x402', { 'x402/payment': payment }], ['mpp', { 'org.paymentauth/credential': credential }]] as const) {
        const result = await callTool('checkout_plan', { plan: 'starter', shop: installed }, meta);
        assert.equal(result.isError, true, how);
        assert.equal(result.structuredContent.type, 'shopify-billing-required', `${how}: ${JSON.stringify(result.structuredContent)}`);
        assert.equal(result.structuredContent.status, 409, how);
        expectShopifyBillingRequired(result.structuredContent as { detail: string });
      }
      assert.deepEqual(await money(), before, 'no payment verified, settled or charged');
      assert.deepEqual(await rowsFor(installed), { payments: [], sessions: [], plans: undefined });
    });
  });
}
