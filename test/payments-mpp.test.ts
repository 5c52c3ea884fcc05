/**
 * Pay per request, MPP side, and what both protocols share: the 402, the ledger, idempotency,
 * discovery. Stripe is a local stand-in reached by the official `stripe` SDK (inside mppx and
 * our own session method); credentials are made with mppx's own client pieces.
 */
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { after, before, describe, it } from './fixtures/suites.ts';
import { Challenge, Credential, PaymentRequest, Receipt } from 'mppx';
import { Mppx as MppxClient, stripe as stripeClient } from 'mppx/client';
import { validate as validateDiscovery } from 'mppx/discovery';
import { expectStatus, storeWithAgent, uniqueDomain, uniqueEmail } from './fixtures/agents.ts';
import { assertOnlyGrew, dialectSkip, startTestApp, testConfig, testDialects, type TestApp } from './fixtures/app.ts';
import { failOnLeakedHandles } from './fixtures/leaks.ts';
import { freePort } from './fixtures/network.ts';
import { startListeningApp, type ListeningApp } from './fixtures/oauth.ts';
import { declaredPrices } from '../src/operations.ts';
import { buildPayments } from '../src/payments/feature.ts';
import { opaqueOf } from '../src/payments/mpp.ts';
import { startStripeApi, type StripeApi, type TokenGrant } from './fixtures/stripe-api.ts';

failOnLeakedHandles();

const SUBSCRIBE = '/api/v1/alerts/subscribe';
const CHECKOUT = '/api/v1/plans/checkout';
const SERVICE_SECRET = 'payments-test-service-secret-0123456789abcdef';
const MPP_SECRET = createHmac('sha256', Buffer.from(SERVICE_SECRET, 'utf8')).update('mpp-challenge-binding').digest('hex');
const TEMPO_RECIPIENT = '0x1111111111111111111111111111111111111111';

const subscription = () => ({ productId: 'gid://shopify/Product/42', email: uniqueEmail('paid') });

/** The injected answer as a web Response, which is what mppx reads challenges from. */
function asResponse(res: { statusCode: number; headers: Record<string, unknown>; body: string }): Response {
  const headers = new Headers();
  for (const [name, value] of Object.entries(res.headers)) {
    for (const v of [value].flat()) if (v !== undefined) headers.append(name, String(v));
  }
  return new Response(res.statusCode === 204 ? null : res.body, { status: res.statusCode, headers });
}

function challengesOf(res: { statusCode: number; headers: Record<string, unknown>; body: string }) {
  return Challenge.fromResponseList(asResponse(res));
}

function paymentHeader(challenge: Challenge.Challenge, payload: unknown): string {
  return Credential.serialize(Credential.from({ challenge, payload }));
}

for (const dialect of testDialects()) {
  describe(`MPP pay per request on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    let stripe: StripeApi;
    let t: TestApp;
    let deadPort: number;

    before(async () => {
      stripe = await startStripeApi();
      deadPort = await freePort();
      t = await startTestApp(dialect, {
        RESTOCK_SECRET: SERVICE_SECRET,
        STRIPE_SECRET_KEY: stripe.secretKey,
        STRIPE_API_URL: `http://127.0.0.1:${stripe.port}`,
        STRIPE_NETWORK_ID: 'profile_restock_test',
        MPP_TEMPO_RECIPIENT: TEMPO_RECIPIENT,
        MPP_TEMPO_RPC_URL: `http://127.0.0.1:${deadPort}`,
        PAYMENT_SETTLE_TIMEOUT_MS: '1500',
      });
    });
    after(async () => {
      await t.close();
      await stripe.close();
    });

    const unpaid = (method: 'GET' | 'POST', url: string, body?: unknown, headers: Record<string, string> = {}) =>
      t.app.inject({
        method,
        url,
        ...(body === undefined ? {} : { payload: JSON.stringify(body) }),
        headers: { ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
      });
    /** A shared payment token an agent granted for the starter plan's first month (USD 9.99), unless told otherwise. */
    const granted = (grant: Partial<TokenGrant> = {}) => stripe.grantToken({ maxAmount: 999, ...grant }).id;

    it('answers 402 with one HMAC-bound challenge per offer, as the seed lists them, and names what is missing', async () => {
      for (const [method, url, body, offers] of [
        ['POST', SUBSCRIBE, subscription(), ['stripe/charge', 'tempo/charge']],
        ['POST', CHECKOUT, { plan: 'starter', shop: uniqueDomain() }, ['stripe/session', 'card/session']],
        ['GET', '/api', undefined, ['stripe/charge', 'tempo/charge']],
      ] as const) {
        const res = await unpaid(method, url, body);
        expectStatus(res, 402);
        assert.match(String(res.headers['content-type']), /^application\/problem\+json/);
        assert.equal(res.headers['cache-control'], 'no-store');
        const problem = res.json();
        assert.equal(problem.type, 'https://paymentauth.org/problems/payment-required');
        assert.equal(problem.status, 402);
        // x402 is not configured here: no placeholder address, the missing setting named instead.
        assert.equal(res.headers['payment-required'], undefined);
        assert.deepEqual(problem.accepts, []);
        assert.ok(problem.unavailable.some((u: { missing?: string[] }) => u.missing?.includes('X402_PAY_TO')));
        const challenges = challengesOf(res);
        assert.deepEqual(challenges.map((c) => `${c.method}/${c.intent}`), offers);
        for (const challenge of challenges) {
          assert.ok(Challenge.verify(challenge, { secretKey: MPP_SECRET }), 'the id is the HMAC of the challenge');
          assert.ok(new Date(challenge.expires!).getTime() > Date.now());
          assert.ok(challenge.realm.length > 0);
        }
        const expected = url === CHECKOUT ? '999' : '5';
        for (const challenge of challenges.filter((c) => c.method !== 'tempo')) {
          assert.equal((challenge.request as { amount: string }).amount, expected);
          assert.equal((challenge.request as { currency: string }).currency, 'usd');
        }
      }
    });

    it('never hands two callers the same challenge, however many ask at once', async () => {
      const answers = await Promise.all(Array.from({ length: 50 }, () => unpaid('POST', SUBSCRIBE, subscription())));
      const challenges = answers.flatMap((res) => challengesOf(res));
      const ids = challenges.map((c) => c.id);
      assert.equal(ids.length, 100);
      assert.equal(new Set(ids).size, ids.length);
      // Each id signed under load is still the HMAC of its own challenge, as mppx computes it.
      for (const challenge of challenges) assert.ok(Challenge.verify(challenge, { secretKey: MPP_SECRET }), challenge.id);
    });

    it('reads the 402 and the receipts from a browser: the payment headers are exposed, preflight allowed', async () => {
      const res = await unpaid('POST', SUBSCRIBE, subscription(), { origin: 'https://shop.example' });
      assert.equal(res.headers['access-control-allow-origin'], '*');
      for (const name of ['PAYMENT-REQUIRED', 'PAYMENT-RESPONSE', 'Payment-Receipt', 'WWW-Authenticate']) {
        assert.match(String(res.headers['access-control-expose-headers']), new RegExp(name));
      }
      const preflight = await t.app.inject({
        method: 'OPTIONS',
        url: SUBSCRIBE,
        headers: { origin: 'https://shop.example', 'access-control-request-method': 'POST', 'access-control-request-headers': 'payment-signature, content-type' },
      });
      assert.equal(preflight.statusCode, 204, `${preflight.statusCode} ${JSON.stringify(preflight.headers)}`);
      assert.match(String(preflight.headers['access-control-allow-headers']), /PAYMENT-SIGNATURE/);
    });

    it('takes a stripe session credential for checkoutPlan through the Stripe SDK: plan active, receipt, ledger row', async () => {
      const { token, domain } = await storeWithAgent(t.app, t.database, 'paid');
      const spt = granted();
      const first = await unpaid('POST', CHECKOUT, { plan: 'starter', shop: domain });
      const challenge = challengesOf(first).find((c) => c.method === 'stripe')!;
      const res = await unpaid('POST', CHECKOUT, { plan: 'starter', shop: domain }, { authorization: paymentHeader(challenge, { spt }) });
      expectStatus(res, 200);
      const receipt = Receipt.deserialize(String(res.headers['payment-receipt']));
      assert.equal(receipt.status, 'success');
      assert.equal(receipt.method, 'stripe');
      assert.match(receipt.reference, /^pi_/);
      const intent = stripe.paymentIntents.get(receipt.reference)!;
      assert.equal(intent.amount, 999);
      assert.equal(intent.status, 'succeeded');
      const session = await t.inject({ method: 'GET', url: `${CHECKOUT}/${res.json().sessionId}`, headers: { authorization: `Bearer ${token}` } });
      assert.equal(session.json().status, 'awaiting_owner', "paid for, it waits for the store's owner to accept (refunded otherwise)");
      // The store's owner reads the ledger with api:read.
      const ledger = await t.app.inject({ method: 'GET', url: `/api/v1/stores/${domain}/payments`, headers: { authorization: `Bearer ${token}` } });
      expectStatus(ledger, 200);
      const [row] = ledger.json().payments;
      assert.equal(row.protocol, 'mpp');
      assert.equal(row.method, 'stripe');
      assert.equal(row.intent, 'session');
      assert.equal(row.amount, '999');
      assert.equal(row.currency, 'usd');
      assert.equal(row.status, 'settled');
      assert.equal(row.reference, receipt.reference);
      assert.equal(row.result, res.json().sessionId);
      assert.equal(row.request.path, CHECKOUT);
      // Another store's agent sees nothing of it.
      const other = await storeWithAgent(t.app, t.database, 'other');
      expectStatus(await t.app.inject({ method: 'GET', url: `/api/v1/stores/${domain}/payments`, headers: { authorization: `Bearer ${other.token}` } }), 404);

      // The same credential again: refused with a fresh challenge, nothing charged twice.
      const charges = stripe.paymentIntents.size;
      const again = await unpaid('POST', CHECKOUT, { plan: 'starter', shop: domain }, { authorization: paymentHeader(challenge, { spt }) });
      expectStatus(again, 402);
      assert.equal(again.json().type, 'https://paymentauth.org/problems/invalid-challenge');
      assert.ok(challengesOf(again).length > 0, 'fresh offers come with the refusal');
      assert.equal(stripe.paymentIntents.size, charges);
    });

    it('one credential sent 10 times at once pays for one request', async () => {
      const shop = uniqueDomain();
      const challenge = challengesOf(await unpaid('POST', CHECKOUT, { plan: 'starter', shop })).find((c) => c.method === 'stripe')!;
      const spt = granted();
      const header = paymentHeader(challenge, { spt });
      const answers = await Promise.all(Array.from({ length: 10 }, () => unpaid('POST', CHECKOUT, { plan: 'starter', shop }, { authorization: header })));
      assert.equal(answers.filter((r) => r.statusCode === 200).length, 1);
      assert.ok(answers.every((r) => r.statusCode === 200 || r.statusCode === 402));
      assert.equal(stripe.paymentIntentsWith(spt).length, 1);
    });

    it('refuses tampered, expired and cross-endpoint credentials with the right problem type, charging nothing', async () => {
      const shop = uniqueDomain();
      const challenge = challengesOf(await unpaid('POST', CHECKOUT, { plan: 'starter', shop })).find((c) => c.method === 'stripe')!;
      const before = stripe.paymentIntents.size;
      const refusedAs = async (header: string, type: string, url = CHECKOUT, body: unknown = { plan: 'starter', shop }) => {
        const res = await unpaid('POST', url, body, { authorization: header });
        assert.equal(res.json().type, type, res.body);
        return res;
      };
      // Tampered: a lower price in the echoed challenge breaks its HMAC.
      const cheaper = { ...challenge, request: { ...challenge.request, amount: '1' } } as Challenge.Challenge;
      expectStatus(await refusedAs(paymentHeader(cheaper, { spt: granted() }), 'https://paymentauth.org/problems/invalid-challenge'), 402);
      // Expired: a challenge genuinely signed with our key, whose time is up.
      const { id: _id, ...fields } = challenge;
      const expired = Challenge.from({ ...fields, expires: new Date(Date.now() - 1000).toISOString(), secretKey: MPP_SECRET } as never) as Challenge.Challenge;
      assert.ok(Challenge.verify(expired, { secretKey: MPP_SECRET }));
      expectStatus(await refusedAs(paymentHeader(expired, { spt: granted() }), 'https://paymentauth.org/problems/payment-expired'), 402);
      // Cross-endpoint: GET /api's stripe charge offered for subscribeAlert.
      const apiChallenge = challengesOf(await unpaid('GET', '/api')).find((c) => c.method === 'stripe')!;
      expectStatus(await refusedAs(paymentHeader(apiChallenge, { spt: granted() }), 'https://paymentauth.org/problems/invalid-challenge', SUBSCRIBE, subscription()), 402);
      // A session offered for checkout is not a method subscribeAlert takes.
      expectStatus(await refusedAs(paymentHeader(challenge, { spt: granted() }), 'https://paymentauth.org/problems/method-unsupported', SUBSCRIBE, subscription()), 400);
      // Unreadable.
      expectStatus(await refusedAs('Payment not-base64-json!', 'https://paymentauth.org/problems/malformed-credential'), 402);
      // Declined by the processor.
      const fresh = challengesOf(await unpaid('POST', CHECKOUT, { plan: 'starter', shop })).find((c) => c.method === 'stripe')!;
      expectStatus(await refusedAs(paymentHeader(fresh, { spt: granted({ paymentMethod: 'pm_card_chargeDeclined' }) }), 'https://paymentauth.org/problems/verification-failed'), 402);
      assert.equal([...stripe.paymentIntents.values()].filter((pi) => pi.status === 'succeeded').length, [...stripe.paymentIntents.values()].slice(0, before).filter((pi) => pi.status === 'succeeded').length);
    });

    /** A checkout paid with this token on a fresh challenge, and what the service answered. */
    const payCheckout = async (spt: string) => {
      const shop = uniqueDomain();
      const challenge = challengesOf(await unpaid('POST', CHECKOUT, { plan: 'starter', shop })).find((c) => c.method === 'stripe')!;
      return unpaid('POST', CHECKOUT, { plan: 'starter', shop }, { authorization: paymentHeader(challenge, { spt }) });
    };
    /** A refused payment is recorded in the ledger as failed, and nothing else changes: no session, no plan. */
    const assertOnlyRefusalRecorded = async (before: Record<string, string>, reason: RegExp) => {
      assertOnlyGrew(before, await t.tableDigests(), 'payments', 1);
      const refusals = await t.database.db.selectFrom('payments').selectAll().where('status', '=', 'failed').execute();
      assert.ok(refusals.some((row) => reason.test(row.error ?? '')), JSON.stringify(refusals.map((row) => row.error)));
    };
    /** A refused payment's answer: 402 with the MPP problem, fresh offers, no receipt. */
    const assertRefused = (res: Awaited<ReturnType<typeof unpaid>>, detail: RegExp) => {
      expectStatus(res, 402);
      assert.equal(res.json().type, 'https://paymentauth.org/problems/verification-failed');
      assert.match(res.json().detail, detail);
      assert.equal(res.headers['payment-receipt'], undefined);
      assert.ok(challengesOf(res).length > 0, 'fresh offers come with the refusal');
    };

    it('refuses a payment that still needs the buyer’s action (3D Secure): 402, nothing served, nothing captured', async () => {
      const spt = granted({ paymentMethod: 'pm_card_authenticationRequired' });
      const before = await t.tableDigests();
      assertRefused(await payCheckout(spt), /requires_action/);
      const [intent, ...others] = stripe.paymentIntentsWith(spt);
      assert.equal(others.length, 0);
      assert.equal(intent?.status, 'requires_action');
      assert.equal(intent?.next_action?.type, 'use_stripe_sdk');
      assert.equal(intent?.amount_received, 0);
      assert.equal(stripe.sharedPaymentTokens.get(spt)!.usage_details.amount_captured.value, 0);
      await assertOnlyRefusalRecorded(before, /requires_action/);
    });

    it('refuses a declined card: 402, the PaymentIntent wants another payment method, nothing served', async () => {
      const spt = granted({ paymentMethod: 'pm_card_chargeDeclined' });
      const before = await t.tableDigests();
      assertRefused(await payCheckout(spt), /declined/);
      assert.deepEqual(stripe.paymentIntentsWith(spt).map((intent) => intent.status), ['requires_payment_method']);
      await assertOnlyRefusalRecorded(before, /declined/);
    });

    it('refuses a token used outside its limits (too little, another currency, expired) as Stripe does: 402, nothing charged', async () => {
      const outside: [Partial<TokenGrant>, RegExp][] = [
        [{ maxAmount: 500 }, /may still capture \(\$5\.00\)/],
        [{ currency: 'eur' }, /only be used for payments in eur, not usd/],
        [{ expiresAt: Math.floor(Date.now() / 1000) - 60 }, /deactivated \(expired\)/],
      ];
      for (const [grant, reason] of outside) {
        const spt = granted(grant);
        const before = await t.tableDigests();
        assertRefused(await payCheckout(spt), reason);
        assert.equal(stripe.paymentIntentsWith(spt).length, 0, 'Stripe created no PaymentIntent');
        assert.equal(stripe.sharedPaymentTokens.get(spt)!.usage_details.amount_captured.value, 0);
        await assertOnlyRefusalRecorded(before, reason);
      }
    });

    it('lets a token pay the plan only once: a second purchase with it is refused, its limit captured', async () => {
      const spt = granted();
      expectStatus(await payCheckout(spt), 200);
      assert.equal(stripe.sharedPaymentTokens.get(spt)!.deactivated_reason, 'consumed');
      const before = await t.tableDigests();
      assertRefused(await payCheckout(spt), /deactivated \(consumed\)/);
      assert.equal(stripe.paymentIntentsWith(spt).length, 1);
      await assertOnlyRefusalRecorded(before, /consumed/);
    });

    it('says plainly that Stripe cannot charge USD 0.05, charging nothing', async () => {
      // The official mppx client: it picks the stripe offer and pays it with a token it was given.
      const spt = granted({ maxAmount: 5 });
      const client = MppxClient.create({
        polyfill: false,
        methods: [stripeClient.charge({ createToken: async () => spt, paymentMethod: 'pm_card_visa' })],
      });
      const counts = await t.tableDigests();
      const credential = await client.createCredential(asResponse(await unpaid('POST', SUBSCRIBE, subscription())));
      assert.match(credential, /^Payment /);
      const small = await unpaid('POST', SUBSCRIBE, subscription(), { authorization: credential });
      expectStatus(small, 402);
      assert.equal(small.json().type, `${t.config.baseUrl}/problems/payment-method-unavailable`);
      assert.equal(small.json().reason, 'amount_below_minimum');
      assert.equal(small.json().minimumAmount, '50');
      assert.equal(stripe.paymentIntentsWith(spt).length, 0);
      // The refusal is kept in the ledger; nothing else changes.
      assertOnlyGrew(counts, await t.tableDigests(), 'payments', 1);
    });

    it('answers 503 when Stripe or the Tempo RPC cannot be reached, and serves nothing', async () => {
      const counts = await t.tableDigests();
      const tempo = challengesOf(await unpaid('POST', SUBSCRIBE, subscription())).find((c) => c.method === 'tempo')!;
      const res = await unpaid('POST', SUBSCRIBE, subscription(), {
        authorization: paymentHeader(tempo, { type: 'hash', hash: `0x${'ab'.repeat(32)}` }),
      });
      // No Tempo RPC answers: said plainly, and nothing is served.
      expectStatus(res, 503);
      assert.equal(res.json().type, `${t.config.baseUrl}/problems/payment-network-unreachable`);
      stripe.delayMs = 4000;
      try {
        const shop = uniqueDomain();
        const challenge = challengesOf(await unpaid('POST', CHECKOUT, { plan: 'starter', shop })).find((c) => c.method === 'stripe')!;
        const slow = await unpaid('POST', CHECKOUT, { plan: 'starter', shop }, { authorization: paymentHeader(challenge, { spt: granted() }) });
        expectStatus(slow, 503);
        assert.equal(slow.json().type, `${t.config.baseUrl}/problems/payment-network-unreachable`);
        assert.ok(slow.headers['retry-after']);
      } finally {
        stripe.delayMs = 0;
      }
      // Each attempt is kept in the ledger (its proof freed for a retry); nothing else changes.
      assertOnlyGrew(counts, await t.tableDigests(), 'payments', 2);
    });

    it('a paid retry with the same Idempotency-Key returns the first answer without a second charge', async () => {
      const shop = uniqueDomain();
      const body = { plan: 'starter', shop };
      const key = `paid-${shop}`;
      const pay = async (spt: string) => {
        const challenge = challengesOf(await unpaid('POST', CHECKOUT, body)).find((c) => c.method === 'stripe')!;
        return unpaid('POST', CHECKOUT, body, { authorization: paymentHeader(challenge, { spt }), 'idempotency-key': key });
      };
      const first = await pay(granted());
      expectStatus(first, 200);
      const charges = stripe.paymentIntents.size;
      const retry = await pay(granted());
      expectStatus(retry, 200);
      assert.equal(retry.headers['idempotent-replayed'], 'true');
      assert.equal(retry.json().sessionId, first.json().sessionId);
      assert.equal(stripe.paymentIntents.size, charges, 'the retry was not charged');
    });

    it('refunds the charge when the paid-for request fails', async () => {
      const shop = uniqueDomain();
      const spt = granted();
      const challenge = challengesOf(await unpaid('POST', CHECKOUT, { plan: 'starter', shop })).find((c) => c.method === 'stripe')!;
      // The handler's table is gone for a moment: the request fails after Stripe charged.
      await t.database.db.schema.alterTable('checkout_sessions').renameTo('checkout_sessions_away').execute();
      let res;
      try {
        res = await unpaid('POST', CHECKOUT, { plan: 'starter', shop }, { authorization: paymentHeader(challenge, { spt }) });
      } finally {
        await t.database.db.schema.alterTable('checkout_sessions_away').renameTo('checkout_sessions').execute();
      }
      assert.ok(res.statusCode >= 500, res.body);
      assert.equal(res.headers['payment-receipt'], undefined);
      const [intent] = stripe.paymentIntentsWith(spt);
      assert.ok(intent, 'Stripe charged');
      assert.ok([...stripe.refunds.values()].some((r) => r.payment_intent === intent.id), 'refunded');
      const row = await t.database.db.selectFrom('payments').selectAll().where('reference', '=', intent.id).executeTakeFirstOrThrow();
      assert.equal(row.status, 'refunded');
    });

    it('asks a paid checkout for the plan the offer prices, before any charge', async () => {
      const shop = uniqueDomain();
      const spt = granted({ maxAmount: 2999 });
      const challenge = challengesOf(await unpaid('POST', CHECKOUT, { plan: 'growth', shop })).find((c) => c.method === 'stripe')!;
      const res = await unpaid('POST', CHECKOUT, { plan: 'growth', shop }, { authorization: paymentHeader(challenge, { spt }) });
      expectStatus(res, 400);
      assert.equal(res.json().errors[0].pointer, '/body/plan');
      assert.equal(stripe.paymentIntentsWith(spt).length, 0);
    });

    it('serves the paid operations to a token holder without payment, as before', async () => {
      expectStatus(await t.post(SUBSCRIBE, subscription()), 200);
      expectStatus(await t.inject({ method: 'GET', url: '/api' }), 200);
    });

    it('describes every paid operation in /openapi.json as the MPP discovery draft says, and mppx validates it', async () => {
      const doc = (await t.app.inject({ method: 'GET', url: '/openapi.json' })).json();
      assert.deepEqual(validateDiscovery(doc).filter((e) => e.severity === 'error'), []);
      assert.deepEqual(doc['x-service-info'].categories, ['e-commerce', 'notifications', 'inventory']);
      const offers = (path: string, method: string) => doc.paths[path][method]['x-payment-info'].offers;
      assert.deepEqual(offers(SUBSCRIBE, 'post').map((o: { method: string; intent: string; amount: string; currency: string }) => [o.method, o.intent, o.amount, o.currency]), [
        ['stripe', 'charge', '5', 'usd'],
        ['tempo', 'charge', '5', 'usd'],
      ]);
      assert.deepEqual(offers(CHECKOUT, 'post').map((o: { method: string; intent: string; amount: string }) => [o.method, o.intent, o.amount]), [
        ['stripe', 'session', '999'],
        ['card', 'session', '999'],
      ]);
      assert.ok(offers('/api', 'get'));
      for (const [path, method] of [[SUBSCRIBE, 'post'], [CHECKOUT, 'post'], ['/api', 'get']]) {
        assert.ok(doc.paths[path!][method!].responses['402'], `${path} documents its 402`);
      }
    });
  });
}

describe('payment settings', () => {
  let listening: ListeningApp;
  after(async () => listening?.close());

  it('with nothing configured, the 402 names every missing setting instead of offering a placeholder', async () => {
    listening = await startListeningApp(testDialects()[0]!);
    const res = await fetch(`${listening.baseUrl}/api`);
    assert.equal(res.status, 402);
    assert.equal(res.headers.get('payment-required'), null);
    const body = await res.json();
    const missing = body.unavailable.flatMap((u: { missing?: string[] }) => u.missing ?? []);
    for (const name of ['X402_PAY_TO', 'STRIPE_SECRET_KEY', 'STRIPE_NETWORK_ID', 'MPP_TEMPO_RECIPIENT']) assert.ok(missing.includes(name), name);
    assert.match(body.detail, /No payment method is configured/);
    // GET /api's offers are stripe and tempo charges: neither can be taken here, so none is made.
    assert.equal(res.headers.get('www-authenticate'), null);
  });

  it('with both protocols configured, one 402 carries both: PAYMENT-REQUIRED and the MPP challenges', async () => {
    const t = await startTestApp(testDialects()[0]!, {
      X402_PAY_TO: '0x3333333333333333333333333333333333333333',
      STRIPE_SECRET_KEY: 'sk_test_both',
      STRIPE_NETWORK_ID: 'profile_both',
    });
    try {
      for (const [method, url] of [['POST', SUBSCRIBE], ['POST', CHECKOUT], ['GET', '/api']] as const) {
        const res = await t.app.inject({ method, url });
        assert.equal(res.statusCode, 402);
        const body = res.json();
        if (url === CHECKOUT) {
          // A paid checkout may have to be refunded (the owner declines it): x402 cannot be, so is not offered.
          assert.equal(body.accepts.length, 0);
        } else {
          assert.equal(body.accepts.length, 1);
          assert.equal(body.accepts[0].payTo, '0x3333333333333333333333333333333333333333');
          assert.equal(body.accepts[0].amount, '50000');
          assert.ok(res.headers['payment-required']);
        }
        assert.ok(challengesOf(res).some((c) => c.method === 'stripe'), `${url} offers stripe`);
      }
    } finally {
      await t.close();
    }
  });

  it('beside a real checkout (Stripe), a card session is offered as the seed lists it and refused for want of a processor, charging nothing', async () => {
    const t = await startTestApp(testDialects()[0]!, { CHECKOUT_PROVIDER: 'stripe', STRIPE_SECRET_KEY: 'sk_test_card', STRIPE_WEBHOOK_SECRET: 'whsec_card' });
    try {
      const shop = uniqueDomain();
      const offered = await t.app.inject({ method: 'POST', url: CHECKOUT, headers: { 'content-type': 'application/json' }, payload: JSON.stringify({ plan: 'starter', shop }) });
      assert.doesNotMatch(offered.json().detail, /test mode/, 'no test-mode card is promised beside a real checkout');
      assert.ok(offered.json().unavailable.some((gap: { method: string }) => gap.method === 'card'), 'the card gap is named');
      const cardChallenge = challengesOf(offered).find((c) => c.method === 'card')!;
      const counts = await t.tableDigests();
      const card = await t.app.inject({
        method: 'POST',
        url: CHECKOUT,
        headers: { 'content-type': 'application/json', authorization: paymentHeader(cardChallenge, { token: 'eyJhbGciOiJub25lIn0.e30.' }) },
        payload: JSON.stringify({ plan: 'starter', shop }),
      });
      expectStatus(card, 402);
      assert.equal(card.json().reason, 'no_processor');
      assertOnlyGrew(counts, await t.tableDigests(), 'payments', 1);
    } finally {
      await t.close();
    }
  });

  it("writes each challenge's opaque part as the SDK's serializer does", () => {
    for (const operation of ['subscribeAlert', 'checkoutPlan', 'getApiIndex'] as const) {
      for (const nonce of ['AbC-_9xyzAbC-_9xyz1', 'q', 'AAAAAAAAAAAA1z']) {
        assert.equal(opaqueOf(operation, nonce), PaymentRequest.serialize({ _mppx_scope: operation, nonce }));
      }
    }
  });

  it('names the missing settings at start-up', () => {
    const warnings: string[] = [];
    const log = { warn: (_fields: unknown, message: string) => warnings.push(message) } as never;
    buildPayments({ config: testConfig('sqlite::memory:'), database: undefined as never, serviceSecret: Buffer.from('x'.repeat(32)), log, prices: declaredPrices() });
    assert.equal(warnings.length, 1);
    for (const name of ['X402_PAY_TO', 'STRIPE_SECRET_KEY', 'STRIPE_NETWORK_ID', 'MPP_TEMPO_RECIPIENT']) assert.match(warnings[0]!, new RegExp(name));
  });
});
