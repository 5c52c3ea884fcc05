/**
 * Plans bought through Stripe Checkout (the official SDK against a local stand-in, webhooks
 * signed by the SDK's own test helper), and the alert allowances the plans give, enforced by the
 * dispatch worker on both databases.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from './fixtures/suites.ts';
import { call, expectStatus, storeWithAgent, uniqueDomain, uniqueEmail, type StoreAgent } from './fixtures/agents.ts';
import { dialectSkip, startTestApp, testDialects, type TestApp } from './fixtures/app.ts';
import { failOnLeakedHandles } from './fixtures/leaks.ts';
import { startSmtpSink, type SmtpSink } from './fixtures/smtp-sink.ts';
import { startStripeApi, type EventObject, type StripeApi } from './fixtures/stripe-api.ts';

failOnLeakedHandles();

const CHECKOUT = '/api/v1/plans/checkout';
const SUBSCRIBE = '/api/v1/alerts/subscribe';
const WEBHOOK_SECRET = `whsec_${randomBytes(16).toString('hex')}`;
let serial = 0;

for (const dialect of testDialects()) {
  describe(`plans through Stripe on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    let stripe: StripeApi;
    let t: TestApp;

    before(async () => {
      stripe = await startStripeApi();
      t = await startTestApp(dialect, {
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

    const deliver = (event: EventObject, options: { secret?: string; timestamp?: number; signature?: string | null } = {}) => {
      const { payload, signature } = stripe.signedDelivery(event, options.secret ?? WEBHOOK_SECRET, options.timestamp === undefined ? {} : { timestamp: options.timestamp });
      const headers: Record<string, string> = { 'content-type': 'application/json' };
      if (options.signature !== null) headers['stripe-signature'] = options.signature ?? signature;
      return t.app.inject({ method: 'POST', url: '/webhooks/stripe', headers, payload });
    };
    const planOf = (shop: string) => t.database.db.selectFrom('store_plans').selectAll().where('shop', '=', shop).executeTakeFirst();

    /** A checkout at Stripe, paid by the shopper: the session and subscription the stand-in made. */
    async function paidCheckout(plan = 'starter') {
      // The store's own agent buys: an agent bound to no store only proposes (test/security/plans.test.ts).
      const owner = await storeWithAgent(t.app, t.database, 'stripe');
      const shop = owner.domain;
      const res = expectStatus(await call(t.app, 'POST', CHECKOUT, { token: owner.token, body: { plan, shop } }), 200);
      const external = [...stripe.checkoutSessions.values()].find((s) => s.client_reference_id === res.sessionId)!;
      const { session, subscription } = stripe.completeCheckout(external.id);
      return { shop, token: owner.token, sessionId: res.sessionId as string, checkoutUrl: res.checkoutUrl as string, session, subscription: subscription! };
    }

    it('checkoutPlan opens a Stripe Checkout Session in subscription mode; the store is pending', async () => {
      const owner = await storeWithAgent(t.app, t.database, 'checkout');
      const shop = owner.domain;
      const res = expectStatus(await call(t.app, 'POST', CHECKOUT, { token: owner.token, body: { plan: 'growth', shop } }), 200);
      assert.match(res.checkoutUrl, /^https:\/\/checkout\.stripe\.com\/c\/pay\/cs_test_/);
      assert.match(res.sessionId, /^cs_/);
      const external = [...stripe.checkoutSessions.values()].find((s) => s.client_reference_id === res.sessionId)!;
      assert.equal(external.mode, 'subscription');
      assert.equal(external.amount_total, 2999);
      assert.deepEqual(external.metadata, { shop, plan: 'growth', checkout_session: res.sessionId });
      assert.equal((await planOf(shop))?.status, 'pending');
      const session = expectStatus(await call(t.app, 'GET', `${CHECKOUT}/${res.sessionId}`, { token: owner.token }), 200);
      assert.equal(session.provider, 'stripe');
      assert.equal(session.checkoutUrl, res.checkoutUrl);
      // Our page is only where Stripe sends the shopper back: it cannot complete a Stripe purchase.
      assert.equal((await t.inject({ method: 'POST', url: `/checkout/${res.sessionId}/complete` })).statusCode, 409);
    });

    it('a signed checkout.session.completed makes the plan active, once', async () => {
      const { shop, token, sessionId, session, subscription } = await paidCheckout();
      const event = stripe.event('checkout.session.completed', session);
      const res = await deliver(event);
      assert.equal(res.statusCode, 200, res.body);
      assert.match(res.json().outcome, /pending → active/);
      const plan = (await planOf(shop))!;
      assert.equal(plan.status, 'active');
      assert.equal(plan.provider, 'stripe');
      assert.equal(plan.external_id, subscription.id);
      // Since 2025-03-31.basil the billing period is the subscription item's, not the subscription's.
      const [item] = subscription.items.data;
      assert.equal(plan.period_start, new Date(item!.current_period_start * 1000).toISOString());
      assert.equal(plan.period_end, new Date(item!.current_period_end * 1000).toISOString());
      assert.ok(plan.period_end > new Date().toISOString());
      assert.equal(expectStatus(await call(t.app, 'GET', `${CHECKOUT}/${sessionId}`, { token }), 200).status, 'completed');
      // Stripe delivers again: nothing changes.
      const again = await deliver(event);
      assert.equal(again.json().outcome, 'duplicate');
      assert.deepEqual(await planOf(shop), plan);
    });

    it('refuses forged, unsigned and old deliveries with 401, applying nothing', async () => {
      const { shop, session } = await paidCheckout();
      const event = stripe.event('checkout.session.completed', session);
      const before = await t.tableDigests();
      for (const options of [{ secret: 'whsec_not_ours' }, { signature: null }, { signature: 't=1,v1=deadbeef' }, { timestamp: Math.floor(Date.now() / 1000) - 3600 }]) {
        const res = await deliver(event, options);
        assert.equal(res.statusCode, 401, JSON.stringify(options));
        assert.equal(res.json().type, 'http://restock.test/problems/invalid-webhook');
      }
      const tampered = stripe.signedDelivery(event, WEBHOOK_SECRET);
      const res = await t.app.inject({
        method: 'POST',
        url: '/webhooks/stripe',
        headers: { 'content-type': 'application/json', 'stripe-signature': tampered.signature },
        payload: tampered.payload.replace(shop, uniqueDomain('other')),
      });
      assert.equal(res.statusCode, 401);
      assert.deepEqual(await t.tableDigests(), before);
      assert.equal((await planOf(shop))?.status, 'pending');
    });

    it('moves the plan with the subscription: a failed payment, recovery, cancellation; late news does not undo newer', async () => {
      const { shop, session, subscription } = await paidCheckout();
      const second = Math.floor(Date.now() / 1000);
      expectStatus(await deliver(stripe.event('checkout.session.completed', session, { created: second })), 200);
      stripe.setSubscriptionStatus(subscription.id, 'past_due');
      const failed = stripe.event('invoice.payment_failed', stripe.invoiceFor(subscription.id, { status: 'open', attempt_count: 1 }), { created: second + 10 });
      expectStatus(await deliver(failed), 200);
      assert.equal((await planOf(shop))?.status, 'past_due');
      const recovered = stripe.setSubscriptionStatus(subscription.id, 'active');
      expectStatus(await deliver(stripe.event('customer.subscription.updated', recovered, { created: second + 20 })), 200);
      assert.equal((await planOf(shop))?.status, 'active');
      // Delivered late: older than what was applied.
      const stale = await deliver(stripe.event('customer.subscription.updated', { ...recovered, status: 'past_due' as const }, { created: second + 15 }));
      assert.match(stale.json().outcome, /ignored: older/);
      assert.equal((await planOf(shop))?.status, 'active');
      const cancelled = stripe.setSubscriptionStatus(subscription.id, 'canceled');
      expectStatus(await deliver(stripe.event('customer.subscription.deleted', cancelled, { created: second + 30 })), 200);
      assert.equal((await planOf(shop))?.status, 'cancelled');
      const revived = await deliver(stripe.event('customer.subscription.updated', recovered, { created: second + 40 }));
      assert.match(revived.json().outcome, /already cancelled/);
    });

    it('applies the subscription before the checkout event when Stripe sends them the other way round', async () => {
      const { shop, session, subscription } = await paidCheckout('growth');
      const second = Math.floor(Date.now() / 1000);
      expectStatus(await deliver(stripe.event('customer.subscription.created', subscription, { created: second + 1 })), 200);
      assert.equal((await planOf(shop))?.status, 'active');
      assert.equal((await planOf(shop))?.plan, 'growth');
      const checkout = await deliver(stripe.event('checkout.session.completed', session, { created: second }));
      assert.equal(checkout.statusCode, 200);
      assert.equal((await planOf(shop))?.status, 'active');
    });

    it('records an event that concerns no store of ours without changing anything', async () => {
      // A subscription sold by another integration on the same Stripe account: no shop or plan in its metadata.
      const elsewhere = await stripe.client().checkout.sessions.create({
        mode: 'subscription',
        line_items: [{ price_data: { currency: 'usd', unit_amount: 500, recurring: { interval: 'month' }, product_data: { name: 'Something else' } }, quantity: 1 }],
        success_url: 'https://elsewhere.example/done',
      });
      const foreign = stripe.completeCheckout(elsewhere.id).subscription!;
      const res = await deliver(stripe.event('customer.subscription.updated', foreign));
      assert.equal(res.statusCode, 200);
      assert.match(res.json().outcome, /ignored: a subscription not made by a Restock checkout/);
    });
  });

  describe(`alert allowances on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    let t: TestApp;
    let sink: SmtpSink;

    before(async () => {
      // The store's own provider, which wants a login as a real one does.
      sink = await startSmtpSink({ auth: { user: 'merchant', pass: `pw ${randomBytes(4).toString('hex')}` } });
      t = await startTestApp(dialect, {
        FREE_ALERTS_PER_MONTH: '3',
        PLAN_STARTER_ALERTS_PER_MONTH: '4',
        FREQUENCY_CAP_MINUTES: '0',
        BATCH_INTERVAL_SECONDS: '0',
        BATCH_MULTIPLIER: '100',
        RESTOCK_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
      });
    });
    after(async () => {
      await t.close();
      await sink.close();
    });

    async function storeWithWaiting(count: number) {
      const store = await storeWithAgent(t.app, t.database, 'quota');
      const ids = { productId: `gid://shopify/Product/${9_100_000 + ++serial}`, variantId: `gid://shopify/ProductVariant/${9_200_000 + serial}` };
      for (let i = 0; i < count; i++) {
        expectStatus(await call(t.app, 'POST', SUBSCRIBE, { token: store.token, body: { ...ids, email: uniqueEmail(`q${i}`), shop: store.domain } }), 200);
      }
      return { store, ...ids };
    }
    const restock = (w: { store: StoreAgent; productId: string; variantId: string }) =>
      call(t.app, 'POST', `/api/v1/stores/${w.store.domain}/inventory`, { token: w.store.token, body: { items: [{ productId: w.productId, variantId: w.variantId, available: 50, productTitle: 'Quota widget' }] } });
    const ledger = (domain: string) => t.database.db.selectFrom('notifications').selectAll().where('store_domain', '=', domain).orderBy('position').execute();
    const alertsSent = async (domain: string) => (await t.database.db.selectFrom('mail_outbox').selectAll().where('store_domain', '=', domain).where('purpose', '=', 'restock-alert').execute()).length;
    /** The time the waiting alerts would next be looked at, brought forward. */
    const lookAgainNow = (domain: string) => t.database.db.updateTable('notifications').set({ next_attempt_at: new Date(Date.now() - 1000).toISOString() }).where('store_domain', '=', domain).where('status', '=', 'queued').execute();

    it('sends exactly the allowance at the quota boundary; the rest wait, visibly, and the owner is told once', async () => {
      const w = await storeWithWaiting(5);
      expectStatus(await restock(w), 200);
      await t.runWorker();
      assert.equal(await alertsSent(w.store.domain), 3, 'the free allowance is 3');
      const rows = await ledger(w.store.domain);
      assert.deepEqual(rows.map((r) => r.status), ['sent', 'sent', 'sent', 'queued', 'queued']);
      assert.match(rows[3]!.outcome ?? '', /^held by the plan: waiting: the free allowance of 3 alerts is used up until/);
      const queue = expectStatus(await call(t.app, 'GET', `/api/v1/stores/${w.store.domain}/queue`, { token: w.store.token }), 200);
      assert.equal(queue.heldByPlan, 2);
      const notices = await t.database.db.selectFrom('mail_outbox').selectAll().where('recipient', '=', w.store.owner).where('purpose', '=', 'plan-notice').execute();
      assert.equal(notices.length, 1);
      // Looked at again within the period: still nothing beyond the allowance, and no second notice.
      await lookAgainNow(w.store.domain);
      await t.runWorker();
      assert.equal(await alertsSent(w.store.domain), 3);
      assert.equal((await t.database.db.selectFrom('mail_outbox').selectAll().where('recipient', '=', w.store.owner).where('purpose', '=', 'plan-notice').execute()).length, 1);
      // The store's usage is readable by its owner's agent.
      const store = expectStatus(await call(t.app, 'GET', `/api/v1/stores/${w.store.domain}`, { token: w.store.token }), 200);
      assert.deepEqual(store.plan, {
        plan: 'free',
        status: 'none',
        monthlyAlertQuota: 3,
        used: 3,
        periodStart: store.plan.periodStart,
        periodEnd: store.plan.periodEnd,
        requiresOwnMailProvider: false,
        // No plan, nobody to bill: nothing goes beyond the free allowance.
        overage: { billed: false, pricePerAlert: 0, ceiling: 0, alerts: 0, amount: 0, currency: 'USD' },
      });
    });

    it('a plan bought lifts the wait; starter sends only through the store’s own provider', async () => {
      const w = await storeWithWaiting(6);
      expectStatus(await restock(w), 200);
      await t.runWorker();
      assert.equal(await alertsSent(w.store.domain), 3);
      // Starter bought on the local page: its allowance (4) counts from a new period, but the
      // store has no SMTP provider of its own yet, so everything waits.
      const { checkoutUrl } = expectStatus(await call(t.app, 'POST', CHECKOUT, { token: w.store.token, body: { plan: 'starter', shop: w.store.domain } }), 200);
      const page = new URL(checkoutUrl);
      assert.equal((await t.app.inject({ method: 'POST', url: `${page.pathname}/complete${page.search}` })).statusCode, 200);
      await lookAgainNow(w.store.domain);
      await t.runWorker();
      assert.equal(await alertsSent(w.store.domain), 3);
      assert.match((await ledger(w.store.domain))[3]!.outcome ?? '', /own e-mail provider/);
      // With its own SMTP server, the starter allowance applies: 3 more go out, through it.
      expectStatus(await call(t.app, 'PATCH', `/api/v1/stores/${w.store.domain}`, { token: w.store.token, body: { smtpUrl: sink.url } }), 200);
      await lookAgainNow(w.store.domain);
      await t.runWorker();
      const statuses = (await ledger(w.store.domain)).map((r) => r.status);
      assert.deepEqual(statuses, ['sent', 'sent', 'sent', 'sent', 'sent', 'sent']);
      assert.deepEqual(sink.messages.map((m) => m.user), ['merchant', 'merchant', 'merchant'], 'the last three went through the store’s own server, logged in');
      const store = expectStatus(await call(t.app, 'GET', `/api/v1/stores/${w.store.domain}`, { token: w.store.token }), 200);
      assert.equal(store.plan.plan, 'starter');
      assert.equal(store.plan.used, 3);
      assert.equal(store.plan.monthlyAlertQuota, 4);
    });

    it('concurrent reservations never grant beyond the allowance', async () => {
      const domain = uniqueDomain('race');
      const grants = await Promise.all(Array.from({ length: 12 }, () => t.app.restock.billing.reserveNotifications(domain, 1, true)));
      assert.equal(grants.reduce((sum, g) => sum + g.granted, 0), 3);
      assert.ok(grants.filter((g) => g.granted === 0).every((g) => /used up/.test(g.reason ?? '')));
    });
  });
}
