/**
 * Issue 18, finding 4: who may change a store's plan. Only its owner (an agent they bound to the
 * store, the dashboard, or their acceptance of a proposal through the link mailed to them); a
 * checkout by anyone else is a proposal that buys nothing and charges nothing until the owner
 * accepts, and a lower plan bought by anyone else never replaces the plan in force.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { Challenge, Credential } from 'mppx';
import { after, before, describe, it } from '../fixtures/suites.ts';
import { call, createStore, expectProblem, expectStatus, registerAnonymousAgent, storeWithAgent, uniqueEmail, type StoreAgent } from '../fixtures/agents.ts';
import { dialectSkip, startTestApp, testDialects, type TestApp } from '../fixtures/app.ts';
import { failOnLeakedHandles } from '../fixtures/leaks.ts';
import { startStripeApi, type EventObject, type StripeApi } from '../fixtures/stripe-api.ts';
import { BillingRepository } from '../../src/billing/repository.ts';
import { redactUrl } from '../../src/core/http/log-redaction.ts';

failOnLeakedHandles();

const CHECKOUT = '/api/v1/plans/checkout';
const WEBHOOK_SECRET = `whsec_${randomBytes(16).toString('hex')}`;
const LINK = /http:\/\/restock\.test(\/checkout\/cs_[0-9a-z]+)\?owner_key=([A-Za-z0-9_-]{43})/;

/** A URL's path and query, as `inject` takes it. */
const local = (url: string) => {
  const parsed = new URL(url, 'http://restock.test');
  return `${parsed.pathname}${parsed.search}`;
};
const form = { 'content-type': 'application/x-www-form-urlencoded' };

describe('finding 4, in the logs', () => {
  it("finding 4: request logs keep no owner's key", () => {
    const key = randomBytes(32).toString('base64url');
    for (const url of [`/checkout/cs_1?owner_key=${key}`, `/checkout/cs_1/accept?owner_key=${key}&x=1`, `/checkout/cs_1/complete?a=b&owner_key=${key}`]) {
      assert.ok(!redactUrl(url).includes(key), url);
      assert.match(redactUrl(url), /owner_key=\[redacted\]/);
    }
  });
});

for (const dialect of testDialects()) {
  describe(`finding 4, on the hosted page, on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    let t: TestApp;
    before(async () => {
      t = await startTestApp(dialect);
    });
    after(() => t.close());

    const planOf = (shop: string) => t.database.db.selectFrom('store_plans').selectAll().where('shop', '=', shop).executeTakeFirst();
    const proposalMails = (owner: string) =>
      t.database.db.selectFrom('mail_outbox').selectAll().where('recipient', '=', owner).where('purpose', '=', 'plan-confirmation').orderBy('created_at').execute();

    /** A store whose owner bought growth on the local page through their own agent. */
    async function storeOnGrowth(name: string): Promise<StoreAgent> {
      const store = await storeWithAgent(t.app, t.database, name);
      const { checkoutUrl } = expectStatus(await call(t.app, 'POST', CHECKOUT, { token: store.token, body: { plan: 'growth', shop: store.domain } }), 200);
      const url = new URL(checkoutUrl);
      const done = await t.app.inject({ method: 'POST', url: `${url.pathname}/complete${url.search}`, headers: form, payload: '' });
      assert.equal(done.statusCode, 200, done.body);
      assert.equal((await planOf(store.domain))?.plan, 'growth');
      return store;
    }

    /** An agent bound to no store proposes `plan` for the store; returns its answer and the owner's mailed link. */
    async function propose(store: StoreAgent, plan: 'starter' | 'growth') {
      const stranger = await registerAnonymousAgent(t.app);
      const answer = expectStatus(await call(t.app, 'POST', CHECKOUT, { token: stranger.token, body: { plan, shop: store.domain } }), 200);
      const link = (await proposalMails(store.owner)).map((mail) => LINK.exec(mail.text_body)).find((found) => found?.[1] === `/checkout/${answer.sessionId}`);
      assert.ok(link, 'the owner is mailed the proposal');
      return { stranger, answer, path: link[1]!, key: link[2]! };
    }

    it("finding 4: an unbound agent's checkout does not change the plan", async () => {
      const store = await storeOnGrowth('imposed');
      const plansBefore = (await t.tableDigests()).store_plans;
      const { stranger, answer, path } = await propose(store, 'starter');

      // The answer is the seed's shape; the session is a proposal, bought and charged nowhere.
      assert.deepEqual(Object.keys(answer).sort(), ['checkoutUrl', 'sessionId']);
      assert.equal(answer.checkoutUrl, `http://restock.test/checkout/${answer.sessionId}`, 'no owner key for the proposer');
      const session = expectStatus(await call(t.app, 'GET', `${CHECKOUT}/${answer.sessionId}`, { token: stranger.token }), 200);
      assert.equal(session.status, 'awaiting_owner');
      assert.equal((await t.tableDigests()).store_plans, plansBefore, 'the plan row is untouched, not even pending');

      // Whoever holds the page's URL sees what is proposed, and cannot act on it.
      const page = await t.app.inject({ method: 'GET', url: path });
      assert.equal(page.statusCode, 200);
      assert.match(page.body, /Waiting for the store’s owner/);
      assert.doesNotMatch(page.body, /<form/);
      assert.equal(page.headers['referrer-policy'], 'no-referrer');
      for (const step of ['accept', 'complete', 'decline']) {
        const before = await t.tableDigests();
        const res = await t.app.inject({ method: 'POST', url: `${path}/${step}`, headers: form, payload: '' });
        assert.equal(res.statusCode, 403, `${step}: ${res.body}`);
        assert.deepEqual(await t.tableDigests(), before, `${step} without the owner's key changed nothing`);
      }
      const plan = (await planOf(store.domain))!;
      assert.equal(plan.plan, 'growth');
      assert.equal(plan.status, 'active');

      // Asking again makes another proposal; the plan stays as the owner left it.
      const viaApiAgain = expectStatus(await call(t.app, 'POST', CHECKOUT, { token: stranger.token, body: { plan: 'starter', shop: store.domain } }), 200);
      assert.notEqual(viaApiAgain.sessionId, answer.sessionId);
      assert.equal((await planOf(store.domain))?.plan, 'growth');
    });

    it('finding 4: proposals cannot flood the owner, and a store nobody owns gets proposals no one can accept', async () => {
      const store = await storeWithAgent(t.app, t.database, 'flooded');
      const stranger = await registerAnonymousAgent(t.app);
      for (let i = 0; i < 8; i++) expectStatus(await call(t.app, 'POST', CHECKOUT, { token: stranger.token, body: { plan: 'starter', shop: store.domain } }), 200);
      assert.equal((await proposalMails(store.owner)).length, 5, 'five proposal mails an hour reach one owner');

      const unknown = `nobody-${randomBytes(3).toString('hex')}.myshopify.com`;
      const { sessionId } = expectStatus(await call(t.app, 'POST', CHECKOUT, { token: stranger.token, body: { plan: 'starter', shop: unknown } }), 200);
      const row = await t.database.db.selectFrom('checkout_sessions').selectAll().where('id', '=', sessionId).executeTakeFirstOrThrow();
      assert.equal(row.status, 'awaiting_owner');
      assert.equal(row.owner_key_hash, null, 'no key exists for a store without an owner');
    });

    it("finding 4: the local checkout page refuses to complete without the owner's token", async () => {
      const store = await storeWithAgent(t.app, t.database, 'keyed');
      // The owner's own agent gets the page with the owner's key in it.
      const { sessionId, checkoutUrl } = expectStatus(await call(t.app, 'POST', CHECKOUT, { token: store.token, body: { plan: 'starter', shop: store.domain } }), 200);
      const key = new URL(checkoutUrl).searchParams.get('owner_key');
      assert.match(key ?? '', /^[A-Za-z0-9_-]{43}$/);
      assert.match((await t.app.inject({ method: 'GET', url: local(checkoutUrl) })).body, /Complete test purchase/);
      assert.doesNotMatch((await t.app.inject({ method: 'GET', url: `/checkout/${sessionId}` })).body, /Complete test purchase/, 'no button without the key');

      const other = expectStatus(await call(t.app, 'POST', CHECKOUT, { token: store.token, body: { plan: 'growth', shop: store.domain } }), 200);
      const otherKey = new URL(other.checkoutUrl).searchParams.get('owner_key')!;
      const refused = [
        ['no key', ''],
        ['an empty key', '?owner_key='],
        ['a key of the right shape, made up', `?owner_key=${randomBytes(32).toString('base64url')}`],
        ["another session's key", `?owner_key=${otherKey}`],
        ['the key with a byte changed', `?owner_key=${key!.slice(0, -1)}${key!.endsWith('A') ? 'B' : 'A'}`],
      ];
      for (const [what, query] of refused) {
        const before = await t.tableDigests();
        const res = await t.app.inject({ method: 'POST', url: `/checkout/${sessionId}/complete${query}`, headers: form, payload: '' });
        assert.equal(res.statusCode, 403, `${what}: ${res.body}`);
        assert.deepEqual(await t.tableDigests(), before, `${what}: nothing changed`);
      }
      assert.equal((await planOf(store.domain))?.status, 'pending', 'started, not in force');

      // A key made for a former owner stops working when the store changes hands.
      await createStore(t.database, store.domain, uniqueEmail('new-owner'));
      expectProblem(await t.app.inject({ method: 'POST', url: `/checkout/${sessionId}/complete?owner_key=${key}`, headers: form, payload: '' }), 403, 'forbidden');
      await createStore(t.database, store.domain, store.owner);

      // The owner's key completes it, once.
      const done = await t.app.inject({ method: 'POST', url: `/checkout/${sessionId}/complete?owner_key=${key}`, headers: form, payload: '' });
      assert.equal(done.statusCode, 200, done.body);
      assert.match(done.body, /Your plan is active/);
      assert.equal((await planOf(store.domain))?.plan, 'starter');
      const spent = await t.database.db.selectFrom('checkout_sessions').select('owner_key_hash').where('id', '=', sessionId).executeTakeFirstOrThrow();
      assert.equal(spent.owner_key_hash, null, 'the key is used up');
    });

    it('finding 4: a downgrade subscription does not replace the plan in force', async () => {
      const store = await storeOnGrowth('downgraded');
      const { answer } = await propose(store, 'starter');
      // A starter subscription activated at a provider without the owner's choice: the proposal
      // was never accepted (or no session vouches for it at all).
      const billing = new BillingRepository(t.database);
      const at = new Date(Date.now() + 60_000).toISOString();
      for (const [eventId, checkoutSessionId] of [['evt_unaccepted', answer.sessionId], ['evt_unvouched', null]] as const) {
        const outcome = await billing.applyEvent('stripe', `${eventId}_${dialect}`, 'customer.subscription.created', {
          shop: store.domain,
          plan: 'starter',
          status: 'active',
          provider: 'stripe',
          externalId: `sub_${eventId}`,
          at,
          periodStart: at,
          periodEnd: new Date(Date.now() + 30 * 86_400_000).toISOString(),
          checkoutSessionId,
          // Saying so is not enough: the repository reads the choice from the session.
          ownerChose: true,
        }, new Date().toISOString());
        assert.match(outcome, /^ignored: a lower plan \(starter\) than the growth plan in force, not chosen by the store's owner$/, eventId);
        const plan = (await planOf(store.domain))!;
        assert.equal(plan.plan, 'growth', eventId);
        assert.equal(plan.status, 'active', eventId);
      }
    });

    it("finding 4: the owner's acceptance does change it", async () => {
      const store = await storeOnGrowth('accepted');
      const { answer, path, key } = await propose(store, 'starter');

      // The owner's link shows what is proposed and by whom, and what starter means for sending.
      const page = await t.app.inject({ method: 'GET', url: `${path}?owner_key=${key}` });
      assert.equal(page.statusCode, 200);
      assert.match(page.body, /A plan is proposed for your store/);
      assert.match(page.body, /only through the store’s own e-mail provider/);
      assert.match(page.body, /Accept and continue to payment/);
      assert.equal(page.headers['cache-control'], 'no-store');
      assert.equal((await planOf(store.domain))?.plan, 'growth', 'opening the link (a mail scanner may) changes nothing');

      const accepted = await t.app.inject({ method: 'POST', url: `${path}/accept?owner_key=${key}`, headers: form, payload: '' });
      assert.equal(accepted.statusCode, 303, accepted.body);
      const next = String(accepted.headers.location);
      const [, nextPath, nextKey] = LINK.exec(next) ?? [];
      assert.equal(nextPath, path);
      assert.notEqual(nextKey, key, 'the accepted key is spent; the page gets a fresh one');
      expectProblem(await t.app.inject({ method: 'POST', url: `${path}/accept?owner_key=${key}`, headers: form, payload: '' }), 409, 'conflict');
      expectProblem(await t.app.inject({ method: 'POST', url: `${path}/complete?owner_key=${key}`, headers: form, payload: '' }), 403, 'forbidden');
      assert.equal((await planOf(store.domain))?.plan, 'growth', 'accepting starts the purchase; the plan in force stays until it completes');

      const done = await t.app.inject({ method: 'POST', url: `${local(next).replace('?', '/complete?')}`, headers: form, payload: '' });
      assert.equal(done.statusCode, 200, done.body);
      const plan = (await planOf(store.domain))!;
      assert.equal(plan.plan, 'starter', "the owner chose the lower plan: it replaces growth");
      assert.equal(plan.status, 'active');
      assert.equal(plan.checkout_session_id, answer.sessionId);

      // A proposal the owner declines can no longer be accepted.
      const second = await propose(store, 'growth');
      const declined = await t.app.inject({ method: 'POST', url: `${second.path}/decline?owner_key=${second.key}`, headers: form, payload: '' });
      assert.equal(declined.statusCode, 200, declined.body);
      assert.match(declined.body, /declined/);
      expectProblem(await t.app.inject({ method: 'POST', url: `${second.path}/accept?owner_key=${second.key}`, headers: form, payload: '' }), 409, 'conflict');
      assert.equal((await planOf(store.domain))?.plan, 'starter');
    });
  });

  describe(`finding 4, in the dashboard, on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    let t: TestApp;
    before(async () => {
      t = await startTestApp(dialect, { FREQUENCY_CAP_MINUTES: '0', BATCH_INTERVAL_SECONDS: '0' });
    });
    after(() => t.close());

    it('finding 4: the dashboard says why alerts are held when the plan needs the store’s own mail server', async () => {
      const store = await storeWithAgent(t.app, t.database, 'held');
      const ids = { productId: 'gid://shopify/Product/4404', variantId: 'gid://shopify/ProductVariant/4405' };
      expectStatus(await call(t.app, 'POST', '/api/v1/alerts/subscribe', { token: store.token, body: { ...ids, email: uniqueEmail('waiting'), shop: store.domain } }), 200);
      const { checkoutUrl } = expectStatus(await call(t.app, 'POST', CHECKOUT, { token: store.token, body: { plan: 'starter', shop: store.domain } }), 200);
      assert.equal((await t.app.inject({ method: 'POST', url: local(checkoutUrl).replace('?', '/complete?'), headers: form, payload: '' })).statusCode, 200);
      expectStatus(await call(t.app, 'POST', `/api/v1/stores/${store.domain}/inventory`, { token: store.token, body: { items: [{ ...ids, available: 5, productTitle: 'Held mug' }] } }), 200);
      await t.runWorker();
      const held = await t.database.db.selectFrom('notifications').select('held_by_plan').where('store_domain', '=', store.domain).execute();
      assert.deepEqual(held.map((row) => row.held_by_plan), [1]);

      // The owner signs in by the mailed link and reads the reason on the overview.
      const browser = { accept: 'text/html' };
      assert.equal((await t.app.inject({ method: 'POST', url: '/dashboard/sign-in', headers: { ...form, ...browser }, payload: `shop=${store.domain}` })).statusCode, 200);
      const mail = await t.database.db.selectFrom('mail_outbox').selectAll().where('recipient', '=', store.owner).where('purpose', '=', 'dashboard-sign-in').executeTakeFirstOrThrow();
      const link = /http:\/\/restock\.test(\/dashboard\/sign-in\/[A-Za-z0-9_-]+)/.exec(mail.text_body)![1]!;
      const used = await t.app.inject({ method: 'POST', url: link, headers: { ...form, ...browser }, payload: '' });
      const cookie = [used.headers['set-cookie'] ?? []].flat().map((line) => line.split(';')[0]).join('; ');
      const overview = await t.app.inject({ method: 'GET', url: '/dashboard', headers: { ...browser, cookie } });
      assert.equal(overview.statusCode, 200, overview.body);
      assert.match(overview.body, /1 alerts are waiting because the starter plan sends only through your own e-mail provider, and none is set/);
      assert.doesNotMatch(overview.body, /allowance of \d+ is used up/);
    });
  });

  describe(`finding 4, at Stripe, on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    let stripe: StripeApi;
    let t: TestApp;
    before(async () => {
      stripe = await startStripeApi();
      t = await startTestApp(dialect, {
        CHECKOUT_PROVIDER: 'stripe',
        STRIPE_SECRET_KEY: stripe.secretKey,
        STRIPE_API_URL: `http://127.0.0.1:${stripe.port}`,
        STRIPE_WEBHOOK_SECRET: WEBHOOK_SECRET,
        STRIPE_NETWORK_ID: 'profile_restock_test',
        RESTOCK_SECRET: 'plans-security-test-service-secret-0123456789',
      });
    });
    after(async () => {
      await t.close();
      await stripe.close();
    });

    const planOf = (shop: string) => t.database.db.selectFrom('store_plans').selectAll().where('shop', '=', shop).executeTakeFirst();
    const deliver = (event: EventObject) => {
      const { payload, signature } = stripe.signedDelivery(event, WEBHOOK_SECRET);
      return t.app.inject({ method: 'POST', url: '/webhooks/stripe', headers: { 'content-type': 'application/json', 'stripe-signature': signature }, payload });
    };
    const checkoutSessionsCreated = () => stripe.requests.filter((r) => r.method === 'POST' && r.path === '/v1/checkout/sessions').length;

    it('finding 4: no capture before acceptance', async () => {
      const store = await storeWithAgent(t.app, t.database, 'stripe-proposal');
      const stranger = await registerAnonymousAgent(t.app);
      const created = checkoutSessionsCreated();
      const charges = stripe.paymentIntents.size;
      const answer = expectStatus(await call(t.app, 'POST', CHECKOUT, { token: stranger.token, body: { plan: 'growth', shop: store.domain } }), 200);

      // Nothing exists at Stripe to pay: no Checkout Session, no PaymentIntent; the URL is our page.
      assert.equal(checkoutSessionsCreated(), created);
      assert.equal(stripe.paymentIntents.size, charges);
      assert.ok(![...stripe.checkoutSessions.values()].some((s) => s.client_reference_id === answer.sessionId));
      assert.equal(answer.checkoutUrl, `http://restock.test/checkout/${answer.sessionId}`);
      assert.equal(await planOf(store.domain), undefined);

      // The owner accepts: only now is the Checkout Session made, and the owner is sent to it.
      const mail = await t.database.db.selectFrom('mail_outbox').selectAll().where('recipient', '=', store.owner).where('purpose', '=', 'plan-confirmation').executeTakeFirstOrThrow();
      const [, path, key] = LINK.exec(mail.text_body) ?? [];
      const accepted = await t.app.inject({ method: 'POST', url: `${path}/accept?owner_key=${key}`, headers: form, payload: '' });
      assert.equal(accepted.statusCode, 303, accepted.body);
      assert.match(String(accepted.headers.location), /^https:\/\/checkout\.stripe\.com\/c\/pay\/cs_test_/);
      assert.equal(checkoutSessionsCreated(), created + 1);
      const external = [...stripe.checkoutSessions.values()].find((s) => s.client_reference_id === answer.sessionId)!;
      assert.equal(external.url, accepted.headers.location);
      assert.equal((await planOf(store.domain))?.status, 'pending');

      const { session } = stripe.completeCheckout(external.id);
      expectStatus(await deliver(stripe.event('checkout.session.completed', session)), 200);
      const plan = (await planOf(store.domain))!;
      assert.equal(plan.plan, 'growth');
      assert.equal(plan.status, 'active');
    });

    /** checkoutPlan paid per request with MPP's Stripe method (a shared payment token for USD 9.99). */
    async function payPerRequest(shop: string) {
      const body = JSON.stringify({ plan: 'starter', shop });
      const json = { 'content-type': 'application/json' };
      const unpaid = await t.app.inject({ method: 'POST', url: CHECKOUT, payload: body, headers: json });
      expectStatus(unpaid, 402);
      const headers = new Headers();
      for (const value of [unpaid.headers['www-authenticate']].flat()) if (value) headers.append('www-authenticate', String(value));
      const challenge = Challenge.fromResponseList(new Response(null, { status: 402, headers })).find((c) => c.method === 'stripe')!;
      const spt = stripe.grantToken({ maxAmount: 999 }).id;
      const authorization = Credential.serialize(Credential.from({ challenge, payload: { spt } }));
      const res = await t.app.inject({ method: 'POST', url: CHECKOUT, payload: body, headers: { ...json, authorization } });
      const [intent] = stripe.paymentIntentsWith(spt);
      return { res, intent: intent! };
    }
    const refundedOf = (intent: string) => [...stripe.refunds.values()].filter((r) => r.payment_intent === intent).reduce((sum, r) => sum + r.amount, 0);
    const ledgerOf = (intent: string) => t.database.db.selectFrom('payments').selectAll().where('reference', '=', intent).executeTakeFirstOrThrow();
    const linkFor = async (owner: string, sessionId: string) => {
      const mails = await t.database.db.selectFrom('mail_outbox').selectAll().where('recipient', '=', owner).where('purpose', '=', 'plan-confirmation').execute();
      const match = mails.map((m) => LINK.exec(m.text_body)).find((m) => m?.[1] === `/checkout/${sessionId}`);
      assert.ok(match, `the owner was mailed the proposal ${sessionId}`);
      return { path: match[1]!, key: match[2]! };
    };

    it('finding 4: a payment per request changes no plan until the owner accepts, and is refunded otherwise', async () => {
      const store = await storeWithAgent(t.app, t.database, 'paid-proposal');

      // Paid: the answer is served with its receipt, but what it bought is a proposal.
      const declined = await payPerRequest(store.domain);
      const { sessionId } = expectStatus(declined.res, 200);
      assert.ok(declined.res.headers['payment-receipt']);
      const row = await t.database.db.selectFrom('checkout_sessions').selectAll().where('id', '=', sessionId).executeTakeFirstOrThrow();
      assert.equal(row.status, 'awaiting_owner');
      assert.equal(row.provider, 'mpp');
      assert.equal(await planOf(store.domain), undefined, 'a payer changes no plan');
      assert.equal((await ledgerOf(declined.intent.id)).status, 'settled');

      // The owner declines: the payer gets the money back, once.
      const link = await linkFor(store.owner, sessionId);
      const page = await t.app.inject({ method: 'GET', url: `${link.path}?owner_key=${link.key}` });
      assert.match(page.body, /A plan is proposed for your store/);
      assert.equal((await t.app.inject({ method: 'POST', url: `${link.path}/decline?owner_key=${link.key}`, headers: form, payload: '' })).statusCode, 200);
      assert.equal(refundedOf(declined.intent.id), declined.intent.amount);
      assert.equal((await ledgerOf(declined.intent.id)).status, 'refunded');
      assert.equal(await t.app.restock.billing.refundUndelivered(), 0, 'nothing is refunded twice');
      assert.equal(await planOf(store.domain), undefined);

      // The owner lets one expire: the worker's sweep refunds it, and it can no longer be accepted.
      const expired = await payPerRequest(store.domain);
      const late = expectStatus(expired.res, 200).sessionId as string;
      const lateLink = await linkFor(store.owner, late);
      await t.database.db.updateTable('checkout_sessions').set({ expires_at: new Date(Date.now() - 1000).toISOString() }).where('id', '=', late).execute();
      assert.equal(refundedOf(expired.intent.id), 0);
      assert.equal(await t.app.restock.billing.refundUndelivered(), 1);
      assert.equal(refundedOf(expired.intent.id), expired.intent.amount);
      assert.equal((await ledgerOf(expired.intent.id)).status, 'refunded');
      expectProblem(await t.app.inject({ method: 'POST', url: `${lateLink.path}/accept?owner_key=${lateLink.key}`, headers: form, payload: '' }), 410, 'checkout-expired');
      assert.equal(await planOf(store.domain), undefined);

      // The owner accepts one: the plan paid for is active at once, and the payment is kept.
      const accepted = await payPerRequest(store.domain);
      const kept = expectStatus(accepted.res, 200).sessionId as string;
      const keptLink = await linkFor(store.owner, kept);
      const res = await t.app.inject({ method: 'POST', url: `${keptLink.path}/accept?owner_key=${keptLink.key}`, headers: form, payload: '' });
      assert.equal(res.statusCode, 303, res.body);
      assert.match((await t.app.inject({ method: 'GET', url: local(String(res.headers.location)) })).body, /Your plan is active/);
      const plan = (await planOf(store.domain))!;
      assert.equal(plan.plan, 'starter');
      assert.equal(plan.status, 'active');
      assert.equal(plan.provider, 'mpp');
      assert.equal(await t.app.restock.billing.refundUndelivered(), 0);
      assert.equal(refundedOf(accepted.intent.id), 0);
      assert.equal((await ledgerOf(accepted.intent.id)).status, 'settled');
    });

    it('finding 4: an x402 payment, which cannot be given back, buys no proposal and is never settled', async () => {
      const store = await storeWithAgent(t.app, t.database, 'x402-proposal');
      const before = await t.tableDigests();
      const payer = { agentId: 'payer:x402:0x0000000000000000000000000000000000000001', storeDomain: null };
      await assert.rejects(t.app.restock.billing.checkoutPlan({ plan: 'starter', shop: store.domain }, payer, 'x402'), (err: Error & { status?: number }) => err.status === 403);
      // A failed handler is what makes the pipeline cancel the x402 authorisation unsettled.
      assert.deepEqual(await t.tableDigests(), before);
    });
  });
}
