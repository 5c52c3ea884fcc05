import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import Stripe from 'stripe';
import { failOnLeakedHandles } from './fixtures/leaks.ts';
import { startStripeApi, type StripeApi } from './fixtures/stripe-api.ts';

failOnLeakedHandles();

/** The SDK's types lack the Shared Payment Token parameter (it is in preview); the SDK sends unknown params as they are. */
type SharedTokenParams = Stripe.PaymentIntentCreateParams & { shared_payment_granted_token: string };

function token(kind = 'ok'): string {
  return `spt_${kind}_${randomBytes(6).toString('hex')}`;
}

function paymentParams(overrides: Partial<SharedTokenParams> = {}): SharedTokenParams {
  return {
    amount: 500,
    currency: 'usd',
    confirm: true,
    automatic_payment_methods: { enabled: true, allow_redirects: 'never' },
    metadata: { alert: 'a_1' },
    shared_payment_granted_token: token(),
    ...overrides,
  };
}

/** Asserts the promise rejects with the given SDK error class, and returns the error for more checks. */
async function rejection<E extends Error>(promise: Promise<unknown>, kind: new (...args: never[]) => E): Promise<E> {
  const error = await promise.then(
    () => assert.fail(`expected ${kind.name}`),
    (err: unknown) => err,
  );
  assert.ok(error instanceof kind, `expected ${kind.name}, got ${String(error)}`);
  return error;
}

describe('Stripe API stand-in, driven by the official SDK', () => {
  let api: StripeApi;
  let stripe: Stripe;
  before(async () => {
    api = await startStripeApi();
    stripe = api.client();
  });
  after(() => api.close());

  describe('PaymentIntents with a Shared Payment Token', () => {
    it('confirms a payment with a token: succeeded, with a charge', async () => {
      const params = paymentParams();
      const intent = await stripe.paymentIntents.create(params);
      assert.match(intent.id, /^pi_/);
      assert.equal(intent.object, 'payment_intent');
      assert.equal(intent.status, 'succeeded');
      assert.equal(intent.amount, 500);
      assert.equal(intent.amount_received, 500);
      assert.equal(intent.currency, 'usd');
      assert.equal(intent.livemode, false);
      assert.match(String(intent.latest_charge), /^ch_/);
      assert.deepEqual(intent.metadata, { alert: 'a_1' });
      assert.match(intent.lastResponse.requestId, /^req_/);
      assert.equal(intent.lastResponse.headers['content-type'], 'application/json');
      assert.equal(api.paymentIntents.get(intent.id)?.shared_payment_granted_token, params.shared_payment_granted_token);

      // What went over the wire: the form in bracket notation, parsed back into objects.
      const sent = api.requests.at(-1)!;
      assert.equal(sent.method, 'POST');
      assert.equal(sent.path, '/v1/payment_intents');
      assert.equal(sent.headers['content-type'], 'application/x-www-form-urlencoded');
      assert.equal(sent.form.shared_payment_granted_token, params.shared_payment_granted_token);
      assert.deepEqual(sent.form.automatic_payment_methods, { enabled: 'true', allow_redirects: 'never' });
      assert.deepEqual(sent.form.metadata, { alert: 'a_1' });
    });

    it('leaves an unconfirmed PaymentIntent awaiting confirmation, then confirms it', async () => {
      const intent = await stripe.paymentIntents.create(paymentParams({ confirm: false }));
      assert.equal(intent.status, 'requires_confirmation');
      const confirmed = await stripe.paymentIntents.confirm(intent.id);
      assert.equal(confirmed.status, 'succeeded');
      assert.equal((await stripe.paymentIntents.retrieve(intent.id)).status, 'succeeded');
    });

    it('asks for action with an spt_action token', async () => {
      const intent = await stripe.paymentIntents.create(paymentParams({ shared_payment_granted_token: token('action') }));
      assert.equal(intent.status, 'requires_action');
      assert.equal(intent.next_action?.type, 'use_stripe_sdk');
    });

    it('refuses an amount under the currency minimum: StripeInvalidRequestError amount_too_small', async () => {
      const error = await rejection(stripe.paymentIntents.create(paymentParams({ amount: 5 })), Stripe.errors.StripeInvalidRequestError);
      assert.equal(error.code, 'amount_too_small');
      assert.equal(error.param, 'amount');
      assert.equal(error.statusCode, 400);
      assert.equal(error.message, 'Amount must be at least $0.50 usd');
    });

    it('declines an spt_declined token: StripeCardError, and the PaymentIntent wants a new payment method', async () => {
      const error = await rejection(
        stripe.paymentIntents.create(paymentParams({ shared_payment_granted_token: token('declined') })),
        Stripe.errors.StripeCardError,
      );
      assert.equal(error.code, 'card_declined');
      assert.equal(error.decline_code, 'generic_decline');
      assert.equal(error.statusCode, 402);
      assert.equal(error.payment_intent?.status, 'requires_payment_method');
    });

    it('lets a token pay only once', async () => {
      const shared = token();
      await stripe.paymentIntents.create(paymentParams({ shared_payment_granted_token: shared }));
      const error = await rejection(
        stripe.paymentIntents.create(paymentParams({ shared_payment_granted_token: shared })),
        Stripe.errors.StripeInvalidRequestError,
      );
      assert.equal(error.code, 'token_already_used');
      assert.equal(error.param, 'shared_payment_granted_token');
    });

    it('answers 404 resource_missing for an unknown PaymentIntent', async () => {
      const error = await rejection(stripe.paymentIntents.retrieve('pi_missing'), Stripe.errors.StripeInvalidRequestError);
      assert.equal(error.statusCode, 404);
      assert.equal(error.code, 'resource_missing');
    });
  });

  describe('idempotency keys', () => {
    it('replays the first answer to the same key and parameters, with Idempotent-Replayed: true', async () => {
      const params = paymentParams();
      const idempotencyKey = `key_${randomBytes(6).toString('hex')}`;
      const first = await stripe.paymentIntents.create(params, { idempotencyKey });
      const again = await stripe.paymentIntents.create(params, { idempotencyKey });
      assert.equal(again.id, first.id);
      assert.equal(first.lastResponse.headers['idempotent-replayed'], undefined);
      // lastResponse is Node's IncomingMessage, so header names are lower case.
      assert.equal(again.lastResponse.headers['idempotent-replayed'], 'true');
      assert.equal(again.lastResponse.idempotencyKey, idempotencyKey);
      assert.equal(again.lastResponse.headers['original-request'], first.lastResponse.requestId);
      assert.notEqual(again.lastResponse.requestId, first.lastResponse.requestId);
      assert.equal([...api.paymentIntents.values()].filter((pi) => pi.shared_payment_granted_token === params.shared_payment_granted_token).length, 1);
    });

    it('refuses the same key with different parameters: StripeIdempotencyError', async () => {
      const idempotencyKey = `key_${randomBytes(6).toString('hex')}`;
      await stripe.paymentIntents.create(paymentParams(), { idempotencyKey });
      const error = await rejection(stripe.paymentIntents.create(paymentParams(), { idempotencyKey }), Stripe.errors.StripeIdempotencyError);
      assert.equal(error.statusCode, 400);
    });

    it('replays a decline too, but not a request that failed validation', async () => {
      const declined = paymentParams({ shared_payment_granted_token: token('declined') });
      const declineKey = `key_${randomBytes(6).toString('hex')}`;
      const first = await rejection(stripe.paymentIntents.create(declined, { idempotencyKey: declineKey }), Stripe.errors.StripeCardError);
      const again = await rejection(stripe.paymentIntents.create(declined, { idempotencyKey: declineKey }), Stripe.errors.StripeCardError);
      assert.equal(again.payment_intent?.id, first.payment_intent?.id);
      assert.equal(again.headers?.['idempotent-replayed'], 'true');

      // Stripe keeps no result for a request refused before it ran, so the key stays free.
      const invalidKey = `key_${randomBytes(6).toString('hex')}`;
      await rejection(stripe.paymentIntents.create(paymentParams({ amount: 5 }), { idempotencyKey: invalidKey }), Stripe.errors.StripeInvalidRequestError);
      const fixed = await stripe.paymentIntents.create(paymentParams(), { idempotencyKey: invalidKey });
      assert.equal(fixed.status, 'succeeded');
    });
  });

  describe('refunds', () => {
    it('refunds a succeeded payment once, and refuses a second full refund', async () => {
      const intent = await stripe.paymentIntents.create(paymentParams({ amount: 1500 }));
      const refund = await stripe.refunds.create({ payment_intent: intent.id });
      assert.match(refund.id, /^re_/);
      assert.equal(refund.object, 'refund');
      assert.equal(refund.status, 'succeeded');
      assert.equal(refund.amount, 1500);
      assert.equal(refund.payment_intent, intent.id);
      assert.equal(refund.charge, intent.latest_charge);

      const error = await rejection(stripe.refunds.create({ payment_intent: intent.id }), Stripe.errors.StripeInvalidRequestError);
      assert.equal(error.code, 'charge_already_refunded');

      const listed = await stripe.refunds.list({ payment_intent: intent.id });
      assert.deepEqual(listed.data.map((r) => r.id), [refund.id]);
      assert.equal(listed.has_more, false);
    });

    it('refunds part of a payment, and refuses more than what is left', async () => {
      const intent = await stripe.paymentIntents.create(paymentParams({ amount: 1000 }));
      await stripe.refunds.create({ payment_intent: intent.id, amount: 400 });
      const error = await rejection(stripe.refunds.create({ payment_intent: intent.id, amount: 700 }), Stripe.errors.StripeInvalidRequestError);
      assert.equal(error.code, 'amount_too_large');
      const rest = await stripe.refunds.create({ payment_intent: intent.id });
      assert.equal(rest.amount, 600);
    });

    it('refuses to refund a payment that did not succeed', async () => {
      const intent = await stripe.paymentIntents.create(paymentParams({ confirm: false }));
      const error = await rejection(stripe.refunds.create({ payment_intent: intent.id }), Stripe.errors.StripeInvalidRequestError);
      assert.equal(error.code, 'payment_intent_unexpected_state');
    });
  });

  describe('the wire', () => {
    it('refuses a wrong key: StripeAuthenticationError', async () => {
      const error = await rejection(
        api.client({ apiKey: 'sk_test_not_the_right_key' }).paymentIntents.create(paymentParams()),
        Stripe.errors.StripeAuthenticationError,
      );
      assert.equal(error.statusCode, 401);
      assert.equal(error.message, 'Invalid API Key provided: sk_test_****_key');
    });

    it('answers 404 to an unknown route', async () => {
      const error = await rejection(stripe.rawRequest('GET', '/v1/not_a_resource'), Stripe.errors.StripeInvalidRequestError);
      assert.equal(error.statusCode, 404);
      assert.match(error.message, /Unrecognized request URL \(GET: \/v1\/not_a_resource\)/);
    });

    it('fails the next request as asked: StripeAPIError, and the one after goes through', async () => {
      api.failNext(500, { type: 'api_error', message: 'An unknown error occurred' });
      const error = await rejection(stripe.paymentIntents.create(paymentParams()), Stripe.errors.StripeAPIError);
      assert.equal(error.statusCode, 500);
      assert.equal((await stripe.paymentIntents.create(paymentParams())).status, 'succeeded');
    });

    it('holds answers for delayMs: a short SDK timeout gives StripeConnectionError', async () => {
      api.delayMs = 500;
      try {
        const impatient = api.client({ timeout: 50 });
        const error = await rejection(impatient.paymentIntents.retrieve('pi_any'), Stripe.errors.StripeConnectionError);
        assert.match(error.message, /timeout/);
      } finally {
        api.delayMs = 0;
      }
    });
  });
});
