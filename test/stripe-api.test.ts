import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from './fixtures/suites.ts';
import Stripe from 'stripe';
import { failOnLeakedHandles } from './fixtures/leaks.ts';
import { servedEndpoints, startStripeApi, type StripeApi, type TokenGrant } from './fixtures/stripe-api.ts';

failOnLeakedHandles();

/** Shared payment tokens exist only in preview API versions; the version mppx's Stripe charge sends. */
const PREVIEW = '2026-07-29.preview';

/** The SDK's types lack the Shared Payment Token parameter (it is in preview); the SDK sends unknown params as they are. */
type SharedTokenParams = Stripe.PaymentIntentCreateParams & { shared_payment_granted_token?: string };

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

  /** A token granted for exactly `amount` unless told otherwise, as an agent grants one per purchase. */
  function token(grant: Partial<TokenGrant> = {}): string {
    return api.grantToken({ maxAmount: 500, ...grant }).id;
  }

  function paymentParams(overrides: Partial<SharedTokenParams> = {}): SharedTokenParams {
    const amount = overrides.amount ?? 500;
    return {
      amount,
      currency: 'usd',
      confirm: true,
      automatic_payment_methods: { enabled: true, allow_redirects: 'never' },
      metadata: { alert: 'a_1' },
      shared_payment_granted_token: token({ maxAmount: amount }),
      ...overrides,
    };
  }

  /** A PaymentIntent on a shared payment token, in the preview version the parameter needs. */
  function pay(params: SharedTokenParams = paymentParams(), options: Stripe.RequestOptions = {}) {
    return stripe.paymentIntents.create(params, { apiVersion: PREVIEW, ...options });
  }

  describe('PaymentIntents with a shared payment token', () => {
    it('confirms a payment with a granted token: succeeded, with a charge, counted against the token', async () => {
      const params = paymentParams({ amount: 400, shared_payment_granted_token: token({ maxAmount: 1000 }) });
      const intent = await pay(params);
      assert.match(intent.id, /^pi_/);
      assert.equal(intent.object, 'payment_intent');
      assert.equal(intent.status, 'succeeded');
      assert.equal(intent.amount, 400);
      assert.equal(intent.amount_received, 400);
      assert.equal(intent.currency, 'usd');
      assert.equal(intent.livemode, false);
      assert.match(String(intent.latest_charge), /^ch_/);
      assert.match(String(intent.payment_method), /^pm_/, 'Stripe makes a PaymentMethod from the token');
      assert.deepEqual(intent.metadata, { alert: 'a_1' });
      assert.match(intent.lastResponse.requestId, /^req_/);
      assert.equal(intent.lastResponse.headers['content-type'], 'application/json');
      assert.equal(intent.lastResponse.headers['stripe-version'], PREVIEW);
      assert.deepEqual(api.paymentIntentsWith(params.shared_payment_granted_token!).map((pi) => pi.id), [intent.id]);
      const granted = api.sharedPaymentTokens.get(params.shared_payment_granted_token!)!;
      assert.deepEqual(granted.usage_details.amount_captured, { value: 400, currency: 'usd' });
      assert.equal(granted.deactivated_reason, null);

      // What went over the wire: the form in bracket notation, parsed back into objects.
      const sent = api.requests.at(-1)!;
      assert.equal(sent.method, 'POST');
      assert.equal(sent.path, '/v1/payment_intents');
      assert.equal(sent.headers['content-type'], 'application/x-www-form-urlencoded');
      assert.equal(sent.headers['stripe-version'], PREVIEW);
      assert.equal(sent.form.shared_payment_granted_token, params.shared_payment_granted_token);
      assert.deepEqual(sent.form.automatic_payment_methods, { enabled: 'true', allow_redirects: 'never' });
      assert.deepEqual(sent.form.metadata, { alert: 'a_1' });
    });

    it('leaves an unconfirmed PaymentIntent awaiting confirmation, then confirms it', async () => {
      const intent = await pay(paymentParams({ confirm: false }));
      assert.equal(intent.status, 'requires_confirmation');
      const confirmed = await stripe.paymentIntents.confirm(intent.id, {}, { apiVersion: PREVIEW });
      assert.equal(confirmed.status, 'succeeded');
      assert.equal((await stripe.paymentIntents.retrieve(intent.id)).status, 'succeeded');
    });

    it('asks for the buyer’s action when the card needs 3D Secure: requires_action, nothing captured', async () => {
      const spt = token({ paymentMethod: 'pm_card_authenticationRequired' });
      const intent = await pay(paymentParams({ shared_payment_granted_token: spt }));
      assert.equal(intent.status, 'requires_action');
      assert.equal(intent.next_action?.type, 'use_stripe_sdk');
      assert.ok(intent.next_action?.use_stripe_sdk);
      assert.equal(intent.amount_received, 0);
      assert.equal(intent.latest_charge, null);
      assert.equal(api.sharedPaymentTokens.get(spt)!.usage_details.amount_captured.value, 0);
      // No charge succeeded, so there is nothing to refund.
      const refund = await rejection(stripe.refunds.create({ payment_intent: intent.id }), Stripe.errors.StripeInvalidRequestError);
      assert.equal(refund.code, 'payment_intent_unexpected_state');
    });

    it('asks for action with a 3D Secure payment method too, without any token', async () => {
      const intent = await stripe.paymentIntents.create({ amount: 700, currency: 'usd', confirm: true, payment_method: 'pm_card_authenticationRequired' });
      assert.equal(intent.status, 'requires_action');
      assert.equal(intent.next_action?.type, 'use_stripe_sdk');
    });

    it('refuses an amount under the currency minimum: StripeInvalidRequestError amount_too_small', async () => {
      const error = await rejection(pay(paymentParams({ amount: 5 })), Stripe.errors.StripeInvalidRequestError);
      assert.equal(error.code, 'amount_too_small');
      assert.equal(error.param, 'amount');
      assert.equal(error.statusCode, 400);
      assert.equal(error.message, 'Amount must be at least $0.50 usd');
    });

    it('declines a token on a declined card: StripeCardError, the PaymentIntent wants a new payment method, the token keeps its limit', async () => {
      const spt = token({ paymentMethod: 'pm_card_chargeDeclined' });
      const error = await rejection(pay(paymentParams({ shared_payment_granted_token: spt })), Stripe.errors.StripeCardError);
      assert.equal(error.code, 'card_declined');
      assert.equal(error.decline_code, 'generic_decline');
      assert.equal(error.statusCode, 402);
      assert.equal(error.payment_intent?.status, 'requires_payment_method');
      assert.equal(error.payment_intent?.last_payment_error?.code, 'card_declined');
      assert.equal(api.sharedPaymentTokens.get(spt)!.usage_details.amount_captured.value, 0);
      assert.equal(api.sharedPaymentTokens.get(spt)!.deactivated_reason, null);
    });

    it('lets a token capture up to its max amount in total, then it is consumed', async () => {
      const spt = token({ maxAmount: 1000 });
      assert.equal((await pay(paymentParams({ amount: 600, shared_payment_granted_token: spt }))).status, 'succeeded');
      const over = await rejection(pay(paymentParams({ amount: 500, shared_payment_granted_token: spt })), Stripe.errors.StripeInvalidRequestError);
      assert.equal(over.statusCode, 400);
      assert.equal(over.type, 'StripeInvalidRequestError');
      assert.equal(over.param, 'amount');
      assert.match(over.message, /more than the shared payment granted token .* may still capture \(\$4\.00\)/);
      assert.equal((await pay(paymentParams({ amount: 400, shared_payment_granted_token: spt }))).status, 'succeeded');
      const consumed = api.sharedPaymentTokens.get(spt)!;
      assert.equal(consumed.deactivated_reason, 'consumed');
      assert.ok(consumed.deactivated_at);
      const again = await rejection(pay(paymentParams({ amount: 50, shared_payment_granted_token: spt })), Stripe.errors.StripeInvalidRequestError);
      assert.equal(again.param, 'shared_payment_granted_token');
      assert.match(again.message, /deactivated \(consumed\)/);
      assert.equal(api.paymentIntentsWith(spt).length, 2, 'refused payments create no PaymentIntent');
    });

    it('refuses a payment in another currency than the token’s, or after it expired, creating nothing', async () => {
      const before = api.paymentIntents.size;
      const euros = await rejection(pay(paymentParams({ currency: 'eur', shared_payment_granted_token: token({ currency: 'usd' }) })), Stripe.errors.StripeInvalidRequestError);
      assert.equal(euros.param, 'currency');
      assert.match(euros.message, /only be used for payments in usd, not eur/);

      const expired = token({ expiresAt: Math.floor(Date.now() / 1000) - 60 });
      const late = await rejection(pay(paymentParams({ shared_payment_granted_token: expired })), Stripe.errors.StripeInvalidRequestError);
      assert.equal(late.param, 'shared_payment_granted_token');
      assert.match(late.message, /deactivated \(expired\)/);
      assert.equal(api.paymentIntents.size, before);
    });

    it('refuses a token it never granted: resource_missing', async () => {
      const error = await rejection(pay(paymentParams({ shared_payment_granted_token: 'spt_never_granted' })), Stripe.errors.StripeInvalidRequestError);
      assert.equal(error.code, 'resource_missing');
      assert.equal(error.param, 'shared_payment_granted_token');
    });

    it('grants, retrieves and revokes tokens through Stripe’s test helpers, in a preview version only', async () => {
      const expiresAt = Math.floor(Date.now() / 1000) + 600;
      const granted = (await stripe.rawRequest(
        'POST',
        '/v1/test_helpers/shared_payment/granted_tokens',
        { payment_method: 'pm_card_visa', usage_limits: { currency: 'usd', max_amount: 999, expires_at: expiresAt } },
        { apiVersion: PREVIEW },
      )) as unknown as { id: string; object: string; usage_limits: unknown; deactivated_reason: string | null; payment_method_details: { card: { last4: string } } };
      assert.match(granted.id, /^spt_/);
      assert.equal(granted.object, 'shared_payment.granted_token');
      assert.deepEqual(granted.usage_limits, { currency: 'usd', expires_at: expiresAt, max_amount: 999 });
      assert.equal(granted.payment_method_details.card.last4, '4242');
      const retrieved = (await stripe.rawRequest('GET', `/v1/shared_payment/granted_tokens/${granted.id}`, undefined, { apiVersion: PREVIEW })) as unknown as { id: string };
      assert.equal(retrieved.id, granted.id);

      await stripe.rawRequest('POST', `/v1/test_helpers/shared_payment/granted_tokens/${granted.id}/revoke`, {}, { apiVersion: PREVIEW });
      const revoked = await rejection(pay(paymentParams({ amount: 999, shared_payment_granted_token: granted.id })), Stripe.errors.StripeInvalidRequestError);
      assert.match(revoked.message, /deactivated \(revoked\)/);

      // The endpoints do not exist in the pinned version.
      const missing = await rejection(stripe.rawRequest('GET', `/v1/shared_payment/granted_tokens/${granted.id}`), Stripe.errors.StripeInvalidRequestError);
      assert.equal(missing.statusCode, 404);
    });

    it('refuses the token parameter in the pinned version, where it does not exist: parameter_unknown', async () => {
      const spt = token();
      const error = await rejection(stripe.paymentIntents.create(paymentParams({ shared_payment_granted_token: spt })), Stripe.errors.StripeInvalidRequestError);
      assert.equal(error.statusCode, 400);
      assert.equal(error.code, 'parameter_unknown');
      assert.equal(error.param, 'shared_payment_granted_token');
      assert.equal(error.message, 'Received unknown parameter: shared_payment_granted_token');
      assert.equal(api.paymentIntentsWith(spt).length, 0);
    });

    it('answers 404 resource_missing for an unknown PaymentIntent', async () => {
      const error = await rejection(stripe.paymentIntents.retrieve('pi_missing'), Stripe.errors.StripeInvalidRequestError);
      assert.equal(error.statusCode, 404);
      assert.equal(error.code, 'resource_missing');
    });
  });

  describe('parameters it does not know', () => {
    it('answers 400 parameter_unknown in Stripe’s error shape, naming the parameter', async () => {
      const sent = stripe.paymentIntents.create({ amount: 500, currency: 'usd', payment_method: 'pm_card_visa', colour: 'blue' } as Stripe.PaymentIntentCreateParams);
      const error = await rejection(sent, Stripe.errors.StripeInvalidRequestError);
      assert.equal(error.statusCode, 400);
      assert.deepEqual(error.raw, {
        type: 'invalid_request_error',
        code: 'parameter_unknown',
        param: 'colour',
        message: 'Received unknown parameter: colour',
        doc_url: 'https://stripe.com/docs/error-codes/parameter-unknown',
        headers: error.headers,
        statusCode: 400,
        requestId: error.requestId,
      });
    });

    it('names nested ones in bracket notation, and every one of several', async () => {
      const nested = await rejection(
        stripe.paymentIntents.create({ amount: 500, currency: 'usd', automatic_payment_methods: { enabled: true, colour: 'blue' } } as Stripe.PaymentIntentCreateParams),
        Stripe.errors.StripeInvalidRequestError,
      );
      assert.equal(nested.param, 'automatic_payment_methods[colour]');
      assert.equal(nested.message, 'Received unknown parameter: automatic_payment_methods[colour]');

      const inList = await rejection(
        stripe.checkout.sessions.create({
          mode: 'subscription',
          success_url: 'https://shop.example/done',
          line_items: [{ price_data: { currency: 'usd', unit_amount: 900, recurring: { interval: 'month' }, product_data: { name: 'Pro' } }, quantity: 1, colour: 'blue' }],
        } as unknown as Stripe.Checkout.SessionCreateParams),
        Stripe.errors.StripeInvalidRequestError,
      );
      assert.equal(inList.message, 'Received unknown parameter: line_items[0][colour]');

      const several = await rejection(
        stripe.refunds.create({ payment_intent: 'pi_any', colour: 'blue', size: 'L' } as Stripe.RefundCreateParams),
        Stripe.errors.StripeInvalidRequestError,
      );
      assert.equal(several.message, 'Received unknown parameters: colour, size');
      assert.equal(several.param, 'colour');
    });

    it('takes any metadata key, but no unknown key beside metadata', async () => {
      const intent = await stripe.paymentIntents.create({ amount: 500, currency: 'usd', metadata: { anything: 'goes', '0': 'even digits' } });
      assert.deepEqual(intent.metadata, { anything: 'goes', '0': 'even digits' });
      const error = await rejection(
        stripe.prices.create({ currency: 'usd', unit_amount: 100, product_data: { name: 'Mug', colour: 'blue' } } as Stripe.PriceCreateParams),
        Stripe.errors.StripeInvalidRequestError,
      );
      assert.equal(error.param, 'product_data[colour]');
    });

    it('refuses an unknown parameter on every endpoint it serves, before anything else', async () => {
      for (const { method, path, preview } of servedEndpoints()) {
        const url = path.replace(/:\w+/g, 'x_missing');
        const options = preview ? { apiVersion: PREVIEW } : {};
        const sent = method === 'POST' ? stripe.rawRequest(method, url, { foo: { bar: '1' } }, options) : stripe.rawRequest(method, `${url}?foo[bar]=1`, undefined, options);
        const error = await rejection(sent, Stripe.errors.StripeInvalidRequestError);
        assert.equal(error.statusCode, 400, `${method} ${path}`);
        assert.equal(error.code, 'parameter_unknown', `${method} ${path}`);
        // An unknown hash is named itself, not its keys (`items[0][price_data][product_data]` in Stripe's own errors).
        assert.equal(error.param, 'foo', `${method} ${path}`);
        assert.equal(error.message, 'Received unknown parameter: foo', `${method} ${path}`);
      }
    });

    it('keeps no idempotent answer for a refused request: the key stays free', async () => {
      const idempotencyKey = `key_${randomBytes(6).toString('hex')}`;
      const params = { amount: 500, currency: 'usd', confirm: true, payment_method: 'pm_card_visa' };
      await rejection(stripe.paymentIntents.create({ ...params, colour: 'blue' } as Stripe.PaymentIntentCreateParams, { idempotencyKey }), Stripe.errors.StripeInvalidRequestError);
      assert.equal((await stripe.paymentIntents.create(params, { idempotencyKey })).status, 'succeeded');
    });
  });

  describe('the pinned API version', () => {
    it('answers in the SDK’s pinned version, and refuses to render another', async () => {
      const intent = await stripe.paymentIntents.create({ amount: 500, currency: 'usd', confirm: true, payment_method: 'pm_card_visa' });
      assert.equal(intent.lastResponse.headers['stripe-version'], Stripe.API_VERSION);
      assert.equal(api.requests.at(-1)?.headers['stripe-version'], Stripe.API_VERSION);
      const older = await rejection(stripe.paymentIntents.retrieve(intent.id, {}, { apiVersion: '2025-03-31.basil' }), Stripe.errors.StripeInvalidRequestError);
      assert.equal(older.statusCode, 400);
      const invalid = await rejection(stripe.paymentIntents.retrieve(intent.id, {}, { apiVersion: 'latest' }), Stripe.errors.StripeInvalidRequestError);
      assert.equal(invalid.message, 'Invalid Stripe API version: latest');
    });

    it('has no field the version dropped: no current period on a subscription, no subscription on an invoice, no invoice on a PaymentIntent', async () => {
      const session = await stripe.checkout.sessions.create({
        mode: 'subscription',
        line_items: [{ price_data: { currency: 'usd', unit_amount: 900, recurring: { interval: 'month' }, product_data: { name: 'Pro' } }, quantity: 1 }],
        success_url: 'https://shop.example/done',
      });
      const { subscription } = api.completeCheckout(session.id);
      const retrieved = (await stripe.rawRequest('GET', `/v1/subscriptions/${subscription!.id}`)) as unknown as Record<string, unknown> & {
        items: { data: Record<string, unknown>[] };
        latest_invoice: string;
      };
      assert.equal('current_period_start' in retrieved, false);
      assert.equal('current_period_end' in retrieved, false);
      assert.equal(typeof retrieved.items.data[0]!.current_period_start, 'number');
      assert.equal(typeof retrieved.items.data[0]!.current_period_end, 'number');
      const invoice = (await stripe.rawRequest('GET', `/v1/invoices/${retrieved.latest_invoice}`)) as unknown as Record<string, unknown> & {
        parent: { subscription_details: { subscription: string } };
      };
      assert.equal('subscription' in invoice, false);
      assert.equal(invoice.parent.subscription_details.subscription, subscription!.id);
      const intent = (await stripe.rawRequest('POST', '/v1/payment_intents', { amount: 500, currency: 'usd' })) as unknown as Record<string, unknown>;
      assert.equal('invoice' in intent, false);
      assert.equal('shared_payment_granted_token' in intent, false);
    });

    it('carries the fields the version always returns, decimals as strings the SDK parses', async () => {
      const price = await stripe.prices.create({ currency: 'usd', unit_amount: 2900, recurring: { interval: 'month' }, product_data: { name: 'Team' } });
      assert.equal(price.billing_scheme, 'per_unit');
      assert.equal(price.tax_behavior, 'unspecified');
      assert.equal(String(price.unit_amount_decimal), '2900');
      assert.equal(price.recurring?.usage_type, 'licensed');
      const intent = await stripe.paymentIntents.create({ amount: 500, currency: 'usd' });
      assert.deepEqual(intent.automatic_payment_methods, { enabled: true }, 'on by default since 2023-08-16');
      assert.equal(intent.capture_method, 'automatic_async');
      assert.deepEqual(intent.payment_method_types, ['card']);
    });
  });

  describe('idempotency keys', () => {
    it('replays the first answer to the same key and parameters, with Idempotent-Replayed: true', async () => {
      const params = paymentParams();
      const idempotencyKey = `key_${randomBytes(6).toString('hex')}`;
      const first = await pay(params, { idempotencyKey });
      const again = await pay(params, { idempotencyKey });
      assert.equal(again.id, first.id);
      assert.equal(first.lastResponse.headers['idempotent-replayed'], undefined);
      // lastResponse is Node's IncomingMessage, so header names are lower case.
      assert.equal(again.lastResponse.headers['idempotent-replayed'], 'true');
      assert.equal(again.lastResponse.idempotencyKey, idempotencyKey);
      assert.equal(again.lastResponse.headers['original-request'], first.lastResponse.requestId);
      assert.notEqual(again.lastResponse.requestId, first.lastResponse.requestId);
      assert.equal(api.paymentIntentsWith(params.shared_payment_granted_token!).length, 1);
    });

    it('refuses the same key with different parameters: StripeIdempotencyError', async () => {
      const idempotencyKey = `key_${randomBytes(6).toString('hex')}`;
      await pay(paymentParams(), { idempotencyKey });
      const error = await rejection(pay(paymentParams(), { idempotencyKey }), Stripe.errors.StripeIdempotencyError);
      assert.equal(error.statusCode, 400);
    });

    it('replays a decline too, but not a request that failed validation', async () => {
      const declined = paymentParams({ shared_payment_granted_token: token({ paymentMethod: 'pm_card_chargeDeclined' }) });
      const declineKey = `key_${randomBytes(6).toString('hex')}`;
      const first = await rejection(pay(declined, { idempotencyKey: declineKey }), Stripe.errors.StripeCardError);
      const again = await rejection(pay(declined, { idempotencyKey: declineKey }), Stripe.errors.StripeCardError);
      assert.equal(again.payment_intent?.id, first.payment_intent?.id);
      assert.equal(again.headers?.['idempotent-replayed'], 'true');

      // Stripe keeps no result for a request refused before it ran, so the key stays free.
      const invalidKey = `key_${randomBytes(6).toString('hex')}`;
      await rejection(pay(paymentParams({ amount: 5 }), { idempotencyKey: invalidKey }), Stripe.errors.StripeInvalidRequestError);
      const fixed = await pay(paymentParams(), { idempotencyKey: invalidKey });
      assert.equal(fixed.status, 'succeeded');
    });
  });

  describe('refunds', () => {
    it('refunds a succeeded payment once, and refuses a second full refund', async () => {
      const intent = await pay(paymentParams({ amount: 1500 }));
      const refund = await stripe.refunds.create({ payment_intent: intent.id });
      assert.match(refund.id, /^re_/);
      assert.equal(refund.object, 'refund');
      assert.equal(refund.status, 'succeeded');
      assert.equal(refund.amount, 1500);
      assert.equal(refund.payment_intent, intent.id);
      assert.equal(refund.charge, intent.latest_charge);
      assert.equal(refund.payment_method, intent.payment_method);

      const error = await rejection(stripe.refunds.create({ payment_intent: intent.id }), Stripe.errors.StripeInvalidRequestError);
      assert.equal(error.code, 'charge_already_refunded');

      const listed = await stripe.refunds.list({ payment_intent: intent.id });
      assert.deepEqual(listed.data.map((r) => r.id), [refund.id]);
      assert.equal(listed.has_more, false);
    });

    it('refunds part of a payment, and refuses more than what is left', async () => {
      const intent = await pay(paymentParams({ amount: 1000 }));
      await stripe.refunds.create({ payment_intent: intent.id, amount: 400 });
      const error = await rejection(stripe.refunds.create({ payment_intent: intent.id, amount: 700 }), Stripe.errors.StripeInvalidRequestError);
      assert.equal(error.code, 'amount_too_large');
      const rest = await stripe.refunds.create({ payment_intent: intent.id });
      assert.equal(rest.amount, 600);
    });

    it('refuses to refund a payment that did not succeed', async () => {
      const intent = await pay(paymentParams({ confirm: false }));
      const error = await rejection(stripe.refunds.create({ payment_intent: intent.id }), Stripe.errors.StripeInvalidRequestError);
      assert.equal(error.code, 'payment_intent_unexpected_state');
    });
  });

  describe('Checkout in subscription mode', () => {
    /** A monthly plan bought through Checkout, priced inline as our plan purchase does. */
    function planSession(overrides: Partial<Stripe.Checkout.SessionCreateParams> = {}): Stripe.Checkout.SessionCreateParams {
      return {
        mode: 'subscription',
        line_items: [
          {
            price_data: { currency: 'usd', unit_amount: 900, recurring: { interval: 'month' }, product_data: { name: 'Restock Pro' } },
            quantity: 1,
          },
        ],
        success_url: 'https://shop.example/plan/done?session={CHECKOUT_SESSION_ID}',
        cancel_url: 'https://shop.example/plan',
        client_reference_id: 'acct_42',
        customer_email: 'buyer@example.com',
        metadata: { plan: 'pro', account: 'acct_42' },
        subscription_data: { metadata: { plan: 'pro', account: 'acct_42' } },
        ...overrides,
      };
    }

    /**
     * `months` calendar months after `unix` (UTC), as Stripe bills a monthly price: the same day
     * of the month, or the month's last day when it is shorter (a Jan 31 start renews on Feb 28).
     */
    function monthsAfter(unix: number, months: number): number {
      const from = new Date(unix * 1000);
      const month = from.getUTCMonth() + months;
      const lastDay = new Date(Date.UTC(from.getUTCFullYear(), month + 1, 0)).getUTCDate();
      const day = Math.min(from.getUTCDate(), lastDay);
      return Date.UTC(from.getUTCFullYear(), month, day, from.getUTCHours(), from.getUTCMinutes(), from.getUTCSeconds()) / 1000;
    }

    it('opens a session with an inline recurring price: a hosted url, unpaid, no subscription yet', async () => {
      const session = await stripe.checkout.sessions.create(planSession());
      assert.match(session.id, /^cs_test_/);
      assert.equal(session.object, 'checkout.session');
      assert.equal(session.url, `https://checkout.stripe.com/c/pay/${session.id}`);
      assert.equal(session.mode, 'subscription');
      assert.equal(session.status, 'open');
      assert.equal(session.payment_status, 'unpaid');
      assert.equal(session.amount_total, 900);
      assert.equal(session.currency, 'usd');
      assert.equal(session.client_reference_id, 'acct_42');
      assert.equal(session.customer_email, 'buyer@example.com');
      assert.deepEqual(session.metadata, { plan: 'pro', account: 'acct_42' });
      assert.equal(session.subscription, null);
      assert.equal(session.customer, null);
      assert.ok(session.expires_at > session.created);

      // The SDK sends line_items as an indexed array in bracket notation: line_items[0][price_data][recurring][interval]=month.
      const sent = api.requests.at(-1)!;
      assert.equal(sent.path, '/v1/checkout/sessions');
      assert.deepEqual(sent.form.line_items, [
        { price_data: { currency: 'usd', unit_amount: '900', recurring: { interval: 'month' }, product_data: { name: 'Restock Pro' } }, quantity: '1' },
      ]);
      assert.deepEqual(sent.form.subscription_data, { metadata: { plan: 'pro', account: 'acct_42' } });

      assert.equal((await stripe.checkout.sessions.retrieve(session.id)).status, 'open');
    });

    it('takes a price id made beforehand', async () => {
      const price = await stripe.prices.create({ currency: 'usd', unit_amount: 2900, recurring: { interval: 'month' }, product_data: { name: 'Restock Team' } });
      assert.match(price.id, /^price_/);
      const session = await stripe.checkout.sessions.create(planSession({ line_items: [{ price: price.id, quantity: 2 }] }));
      assert.equal(session.amount_total, 5800);
    });

    it('in payment mode: one-time prices only, and paying makes no subscription', async () => {
      const oneTime = [{ price_data: { currency: 'usd', unit_amount: 1500, product_data: { name: 'Restock credits' } }, quantity: 1 }];
      const session = await stripe.checkout.sessions.create(planSession({ mode: 'payment', line_items: oneTime, subscription_data: undefined }));
      assert.equal(session.mode, 'payment');
      const completed = api.completeCheckout(session.id);
      assert.equal(completed.subscription, null);
      assert.equal(completed.session.payment_status, 'paid');

      const recurring = await rejection(stripe.checkout.sessions.create(planSession({ mode: 'payment', subscription_data: undefined })), Stripe.errors.StripeInvalidRequestError);
      assert.equal(recurring.param, 'line_items[0]');
    });

    it('refuses what Stripe refuses: StripeInvalidRequestError naming the param', async () => {
      const noSuccessUrl = await rejection(stripe.checkout.sessions.create(planSession({ success_url: undefined })), Stripe.errors.StripeInvalidRequestError);
      assert.equal(noSuccessUrl.statusCode, 400);
      assert.equal(noSuccessUrl.code, 'parameter_missing');
      assert.equal(noSuccessUrl.param, 'success_url');

      const noLineItems = await rejection(stripe.checkout.sessions.create(planSession({ line_items: undefined })), Stripe.errors.StripeInvalidRequestError);
      assert.equal(noLineItems.param, 'line_items');

      // A subscription needs something that recurs.
      const oneTime = planSession({ line_items: [{ price_data: { currency: 'usd', unit_amount: 900, product_data: { name: 'Once' } }, quantity: 1 }] });
      const notRecurring = await rejection(stripe.checkout.sessions.create(oneTime), Stripe.errors.StripeInvalidRequestError);
      assert.equal(notRecurring.param, 'line_items');

      const unknownPrice = await rejection(
        stripe.checkout.sessions.create(planSession({ line_items: [{ price: 'price_missing', quantity: 1 }] })),
        Stripe.errors.StripeInvalidRequestError,
      );
      assert.equal(unknownPrice.code, 'resource_missing');
      assert.equal(unknownPrice.param, 'line_items[0][price]');
    });

    it('completes when the shopper pays: the session is paid and points at an active monthly subscription', async () => {
      const created = await stripe.checkout.sessions.create(planSession());
      const { subscription } = api.completeCheckout(created.id);

      const session = await stripe.checkout.sessions.retrieve(created.id);
      assert.equal(session.status, 'complete');
      assert.equal(session.payment_status, 'paid');
      assert.equal(session.url, null);
      assert.match(String(session.customer), /^cus_/);
      assert.equal(session.subscription, subscription?.id);

      const retrieved = await stripe.subscriptions.retrieve(String(session.subscription));
      assert.match(retrieved.id, /^sub_/);
      assert.equal(retrieved.status, 'active');
      assert.equal(retrieved.customer, session.customer);
      assert.deepEqual(retrieved.metadata, { plan: 'pro', account: 'acct_42' });
      assert.equal(retrieved.cancel_at_period_end, false);
      assert.match(String(retrieved.latest_invoice), /^in_/);
      const [item] = retrieved.items.data;
      assert.equal(item?.price.unit_amount, 900);
      assert.equal(item?.price.recurring?.interval, 'month');
      assert.equal(item?.current_period_end, monthsAfter(item!.current_period_start, 1));

      // Paid once: the shopper cannot pay the same session again.
      assert.throws(() => api.completeCheckout(created.id), /complete/);
    });

    it('expires an open session; an expired one cannot be paid', async () => {
      const created = await stripe.checkout.sessions.create(planSession());
      const expired = await stripe.checkout.sessions.expire(created.id);
      assert.equal(expired.status, 'expired');
      assert.equal(expired.url, null);
      assert.throws(() => api.completeCheckout(created.id), /expired/);
      await rejection(stripe.checkout.sessions.expire(created.id), Stripe.errors.StripeInvalidRequestError);
    });

    it('moves a subscription along: renewal a month on, past_due, then cancel through the API', async () => {
      const { subscription } = api.completeCheckout((await stripe.checkout.sessions.create(planSession())).id);
      const firstEnd = subscription!.items.data[0]!.current_period_end;
      const renewed = api.renewSubscription(subscription!.id).items.data[0]!;
      assert.equal(renewed.current_period_start, firstEnd);
      // Counted from the start, not from the last period's end, so short months do not shift the billing day.
      assert.equal(renewed.current_period_end, monthsAfter(subscription!.start_date, 2));

      api.setSubscriptionStatus(subscription!.id, 'past_due');
      assert.equal((await stripe.subscriptions.retrieve(subscription!.id)).status, 'past_due');

      const canceled = await stripe.subscriptions.cancel(subscription!.id);
      assert.equal(canceled.status, 'canceled');
      assert.ok(canceled.canceled_at);
      assert.equal(api.requests.at(-1)?.method, 'DELETE');
      await rejection(stripe.subscriptions.cancel(subscription!.id), Stripe.errors.StripeInvalidRequestError);

      const missing = await rejection(stripe.subscriptions.retrieve('sub_missing'), Stripe.errors.StripeInvalidRequestError);
      assert.equal(missing.statusCode, 404);
      assert.equal(missing.code, 'resource_missing');
    });
  });

  describe('webhook deliveries', () => {
    const secret = `whsec_${randomBytes(16).toString('hex')}`;

    async function paidSubscription() {
      const session = await stripe.checkout.sessions.create({
        mode: 'subscription',
        line_items: [{ price_data: { currency: 'usd', unit_amount: 900, recurring: { interval: 'month' }, product_data: { name: 'Pro' } }, quantity: 1 }],
        success_url: 'https://shop.example/done',
      });
      return api.completeCheckout(session.id);
    }

    it('signs a delivery that the SDK verifies: checkout.session.completed', async () => {
      const { session } = await paidSubscription();
      const event = api.event('checkout.session.completed', session);
      const { payload, signature } = api.signedDelivery(event, secret);
      assert.match(signature, /^t=\d+,v1=[0-9a-f]{64}$/);

      const verified = stripe.webhooks.constructEvent(payload, signature, secret);
      assert.match(verified.id, /^evt_/);
      assert.equal(verified.type, 'checkout.session.completed');
      assert.equal(verified.api_version, Stripe.API_VERSION);
      assert.equal(verified.livemode, false);
      const object = verified.data.object as Stripe.Checkout.Session;
      assert.equal(object.id, session.id);
      assert.equal(object.subscription, session.subscription);
    });

    it('carries a snapshot: later changes to the object do not show in the event', async () => {
      const { subscription } = await paidSubscription();
      const event = api.event('customer.subscription.updated', subscription!);
      api.setSubscriptionStatus(subscription!.id, 'unpaid');
      assert.equal(event.data.object.status, 'active');
    });

    it('builds a failed renewal invoice for invoice.payment_failed', async () => {
      const { subscription } = await paidSubscription();
      api.renewSubscription(subscription!.id);
      const invoice = api.invoiceFor(subscription!.id, { status: 'open', attempt_count: 2 });
      const { payload, signature } = api.signedDelivery(api.event('invoice.payment_failed', invoice), secret);

      const verified = stripe.webhooks.constructEvent(payload, signature, secret);
      assert.equal(verified.type, 'invoice.payment_failed');
      const object = verified.data.object as Stripe.Invoice;
      assert.match(object.id!, /^in_/);
      assert.equal(object.status, 'open');
      assert.equal(object.attempt_count, 2);
      assert.equal(object.billing_reason, 'subscription_cycle');
      assert.equal(object.amount_due, 900);
      assert.equal(object.customer, subscription!.customer);
      assert.equal(object.parent?.subscription_details?.subscription, subscription!.id);
      assert.equal(object.lines.data[0]?.parent?.subscription_item_details?.subscription, subscription!.id);
      // The invoice bills the period that just ended: it ends where the subscription's current one starts.
      assert.equal(object.period_end, api.subscriptions.get(subscription!.id)!.items.data[0]!.current_period_start);
      assert.equal(api.subscriptions.get(subscription!.id)!.latest_invoice, object.id);
    });

    it('fails verification for a tampered payload or a wrong secret: StripeSignatureVerificationError', async () => {
      const { session } = await paidSubscription();
      const { payload, signature } = api.signedDelivery(api.event('checkout.session.completed', session), secret);
      const tampered = payload.replace('"paid"', '"unpaid"');
      assert.notEqual(tampered, payload);
      assert.throws(() => stripe.webhooks.constructEvent(tampered, signature, secret), Stripe.errors.StripeSignatureVerificationError);
      assert.throws(
        () => stripe.webhooks.constructEvent(payload, signature, `whsec_${randomBytes(16).toString('hex')}`),
        Stripe.errors.StripeSignatureVerificationError,
      );
    });

    it('refuses a delivery signed an hour ago with the default 300 s tolerance', async () => {
      const { session } = await paidSubscription();
      const event = api.event('checkout.session.completed', session, { created: Math.floor(Date.now() / 1000) - 3600 });
      const timestamp = Math.floor(Date.now() / 1000) - 3600;
      const { payload, signature } = api.signedDelivery(event, secret, { timestamp });
      assert.ok(signature.startsWith(`t=${timestamp},`));
      assert.throws(() => stripe.webhooks.constructEvent(payload, signature, secret), (err: unknown) => {
        assert.ok(err instanceof Stripe.errors.StripeSignatureVerificationError);
        assert.match(err.message, /Timestamp outside the tolerance zone/);
        return true;
      });
      // The signature itself is good: a wider tolerance accepts it.
      assert.equal(stripe.webhooks.constructEvent(payload, signature, secret, 7200).id, event.id);
    });
  });

  describe('the wire', () => {
    it('refuses a wrong key: StripeAuthenticationError', async () => {
      const error = await rejection(
        api.client({ apiKey: 'sk_test_not_the_right_key' }).paymentIntents.create(paymentParams(), { apiVersion: PREVIEW }),
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
      const error = await rejection(pay(), Stripe.errors.StripeAPIError);
      assert.equal(error.statusCode, 500);
      assert.equal((await pay()).status, 'succeeded');
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
