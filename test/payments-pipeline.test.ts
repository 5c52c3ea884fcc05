/**
 * The pay-per-request pipeline's decisions, one at a time, over a payment service that records
 * what it is asked and answers as told: what each paid operation declares (the store a payment
 * is for, the inputs its price covers, the result the ledger records), the order of demand,
 * admission, acceptance, handler and settlement, the wiring of the HTTP gate, and MPP refusals
 * told apart by their error types. The protocols themselves are tested end to end in
 * payments-x402, payments-mpp, payments-tempo and mcp-payments.
 */
import assert from 'node:assert/strict';
import Fastify, { type FastifyInstance, type FastifyPluginAsync } from 'fastify';
import fp from 'fastify-plugin';
import { serializerCompiler, validatorCompiler } from 'fastify-type-provider-zod';
import { Challenge, Credential, Errors } from 'mppx';
import type Stripe from 'stripe';
import { HttpRequestError, TimeoutError } from 'viem';
import { describe, it } from './fixtures/suites.ts';
import type { PaymentsConfig } from '../src/config.ts';
import type { Caller } from '../src/core/http/caller.ts';
import { installErrorHandling } from '../src/core/http/errors.ts';
import { Problem, ValidationFailed } from '../src/core/problems.ts';
import { paymentGate } from '../src/payments/gate.ts';
import { MppAcceptance, PaymentNetworkUnreachable, verificationRefusal } from '../src/payments/mpp.ts';
import { bindOperations, type BoundPaidTerms } from '../src/core/operations.ts';
import { declaredOperations, declaredPrices } from '../src/operations.ts';
import { PriceList, type PaidOperation } from '../src/payments/offers.ts';
import { paidToolNames, restockTools } from '../src/mcp/tools.ts';
import { PaymentPipeline, type Accepted, type PaidCall, type Refused, type Served, type TransportProof } from '../src/payments/pipeline.ts';
import { PaymentService, type Acceptance, type AcceptedPayment, type PaidRequest, type PaidResource, type PaymentRequired, type Settlement } from '../src/payments/service.ts';

const PAYER = '0x00000000000000000000000000000000000000aa';
const payment: AcceptedPayment = { protocol: 'x402', id: 'pay_test', payer: PAYER, x402: {} as never };
const proof: TransportProof = { kind: 'x402', payload: {} as never };
const STARTER_ONLY = 'paying per request buys the starter plan (USD 9.99 a month); other plans are bought with an access token';
const prices = new PriceList(declaredPrices());

/** A paid operation's declared terms, bound to a service that refuses nothing before the charge. */
function termsOf(operation: PaidOperation): BoundPaidTerms {
  const declared = declaredOperations.find((declaration) => declaration.id === operation && declaration.paid);
  if (!declared) throw new Error(`"${operation}" is not a declared paid operation`);
  return bindOperations([declared], { requireAppBilling: async () => {} })[0]!.paid!;
}

/** A payment service that records each step it is asked for and answers as the test says. */
class RecordingPayments {
  readonly prices = prices;
  readonly steps: string[] = [];
  readonly requests: PaidRequest[] = [];
  acceptance: Acceptance = { kind: 'accepted', payment };
  settlement: Settlement = { kind: 'settled', receipt: { protocol: 'x402', response: { success: true, transaction: '0xtx', network: 'eip155:1' } as never } };

  async ready(): Promise<void> {}

  async paymentRequired(resource: PaidResource, refusal?: Problem): Promise<PaymentRequired> {
    this.steps.push(`offers ${resource.operation}`);
    return {
      kind: 'payment-required',
      x402: { x402Version: 2, resource: { url: resource.url, description: 'test', mimeType: 'application/json' }, accepts: [] },
      challenges: [],
      unavailable: [],
      reason: refusal ?? new Problem('payment-required', 'Pay.'),
    };
  }

  async accept(_proof: unknown, request: PaidRequest): Promise<Acceptance> {
    this.steps.push('accept');
    this.requests.push(request);
    return this.acceptance;
  }

  async settle(_payment: AcceptedPayment, resultRef: string | null): Promise<Settlement> {
    this.steps.push(`settle ${resultRef}`);
    return this.settlement;
  }

  async undo(): Promise<void> {
    this.steps.push('undo');
  }
}

function pipelineOver(payments: RecordingPayments): PaymentPipeline {
  return new PaymentPipeline(payments as unknown as PaymentService, 60);
}

function callOf(operation: PaidOperation, input: unknown): PaidCall {
  return { operation, terms: termsOf(operation), input, method: 'POST', path: `/${operation}`, url: `http://restock.test/${operation}`, requestId: 'req-1' };
}

type Outcome = Served<unknown> | PaymentRequired | Refused;

/** A handler that must not run. */
const never = async (): Promise<Record<string, unknown>> => assert.fail('the handler ran');

const subscription = (extra: Record<string, unknown> = {}) => ({ productId: 'gid://shopify/Product/1', email: 'a@example.com', ...extra });

describe('what each paid operation declares', () => {
  it('the price list is exactly the declarations\' paid terms', () => {
    const paid = declaredOperations.filter((declaration) => declaration.paid);
    assert.deepEqual(prices.operations().sort(), paid.map((declaration) => declaration.id).sort());
    for (const declaration of paid) assert.equal(prices.of(declaration.id).usdCents, declaration.paid!.price.usdCents, declaration.id);
    assert.deepEqual(prices.operations().sort(), ['checkoutPlan', 'getApiIndex', 'subscribeAlert']);
  });

  it('an operation without paid terms has no price', () => {
    assert.throws(() => prices.of('refundEverything'), /"refundEverything" is not a declared paid operation/);
    assert.throws(() => prices.of('getSubscription'), /"getSubscription" is not a declared paid operation/);
  });

  it('records the store the input names, lowercased, and none where the operation names none', async () => {
    const cases: Array<[PaidOperation, unknown, string | null]> = [
      ['subscribeAlert', subscription({ shop: 'Mixed-Case.myshopify.com' }), 'mixed-case.myshopify.com'],
      ['subscribeAlert', subscription(), null],
      ['checkoutPlan', { plan: 'starter', shop: 'plans.myshopify.com' }, 'plans.myshopify.com'],
      ['getApiIndex', undefined, null],
    ];
    for (const [operation, input, store] of cases) {
      const payments = new RecordingPayments();
      const decision = await pipelineOver(payments).accept(callOf(operation, input), proof);
      assert.equal(decision.kind, 'accepted');
      assert.equal(payments.requests[0]!.storeDomain, store, `${operation} ${JSON.stringify(input)}`);
      assert.deepEqual({ ...payments.requests[0]!, storeDomain: undefined }, { operation, url: `http://restock.test/${operation}`, method: 'POST', path: `/${operation}`, requestId: 'req-1', storeDomain: undefined });
    }
  });

  it('a paid checkout admits the starter plan only, refused on /body/plan before the proof is looked at', async () => {
    for (const given of [proof, { kind: 'unreadable', refusal: new Problem('malformed-credential', 'unreadable') } as TransportProof]) {
      const payments = new RecordingPayments();
      const decision = await pipelineOver(payments).accept(callOf('checkoutPlan', { plan: 'growth', shop: 'plans.myshopify.com' }), given);
      assert.equal(decision.kind, 'refused');
      const problem = (decision as { problem: Problem }).problem;
      assert.ok(problem instanceof ValidationFailed);
      assert.deepEqual(problem.errors, [{ pointer: '/body/plan', message: STARTER_ONLY }]);
      assert.deepEqual(payments.steps, [], 'no offers, no claim, no charge');
    }
    const payments = new RecordingPayments();
    assert.equal((await pipelineOver(payments).accept(callOf('checkoutPlan', { plan: 'starter', shop: 'plans.myshopify.com' }), proof)).kind, 'accepted');
    for (const operation of ['subscribeAlert', 'getApiIndex'] as const) {
      assert.equal(termsOf(operation).admits(operation === 'getApiIndex' ? undefined : subscription({ plan: 'growth' })), true, operation);
    }
  });

  it('records as the result what the operation declares, not whichever id the answer happens to carry', async () => {
    const cases: Array<[PaidOperation, unknown, Record<string, unknown>, string]> = [
      ['subscribeAlert', subscription(), { subscriptionId: 'sub_1', status: 'active', sessionId: 'cs_decoy' }, 'settle sub_1'],
      ['checkoutPlan', { plan: 'starter', shop: 'plans.myshopify.com' }, { sessionId: 'cs_1', subscriptionId: 'sub_decoy', checkoutUrl: 'https://x.test' }, 'settle cs_1'],
      ['getApiIndex', undefined, { subscriptionId: 'sub_decoy', sessionId: 'cs_decoy' }, 'settle null'],
    ];
    for (const [operation, input, result, settled] of cases) {
      const payments = new RecordingPayments();
      const outcome: Outcome = await pipelineOver(payments).pay(callOf(operation, input), proof, async () => result);
      assert.equal(outcome.kind, 'served');
      assert.deepEqual(payments.steps, ['accept', settled], operation);
    }
  });
});

describe("the pipeline's decisions", () => {
  it('without a proof: payment required with every offer, and the handler never runs', async () => {
    const payments = new RecordingPayments();
    const outcome = await pipelineOver(payments).pay(callOf('subscribeAlert', subscription()), undefined, never);
    assert.equal(outcome.kind, 'payment-required');
    assert.equal((outcome as PaymentRequired).reason.slug, 'payment-required');
    assert.deepEqual(payments.steps, ['offers subscribeAlert']);
  });

  it('an unreadable proof of an admitted input: fresh offers with its reason, nothing claimed', async () => {
    const payments = new RecordingPayments();
    const refusal = new Problem('malformed-credential', 'cannot read it');
    const outcome = await pipelineOver(payments).accept(callOf('subscribeAlert', subscription()), { kind: 'unreadable', refusal });
    assert.equal(outcome.kind, 'payment-required');
    assert.equal((outcome as PaymentRequired).reason, refusal);
    assert.deepEqual(payments.steps, ['offers subscribeAlert']);
  });

  it('a proof refused as the payer’s fault gets fresh offers; one that paying again cannot fix is refused as it is', async () => {
    const cases: Array<[Problem, string]> = [
      [new Problem('verification-failed', 'no'), 'payment-required'],
      [new Problem('payment-network-unreachable', 'down', { headers: { 'retry-after': '5' } }), 'refused'],
      [new Problem('method-unsupported', 'not here'), 'refused'],
    ];
    for (const [refusal, kind] of cases) {
      const payments = new RecordingPayments();
      payments.acceptance = { kind: 'refused', refusal };
      const outcome: Outcome = await pipelineOver(payments).pay(callOf('subscribeAlert', subscription()), proof, never);
      assert.equal(outcome.kind, kind, refusal.slug);
      if (outcome.kind === 'payment-required') assert.equal(outcome.reason, refusal);
      if (outcome.kind === 'refused') assert.equal(outcome.problem, refusal);
    }
  });

  it('runs the handler as the payer: its own agent, both API scopes, bound to no store', async () => {
    let caller: Caller | undefined;
    let paidWith: string | undefined;
    const payments = new RecordingPayments();
    await pipelineOver(payments).pay(callOf('subscribeAlert', subscription({ shop: 'bound.myshopify.com' })), proof, async (payer, protocol) => {
      caller = payer;
      paidWith = protocol;
      return { subscriptionId: 'sub_1' };
    });
    assert.deepEqual({ ...caller!, scopes: [...caller!.scopes].sort() }, { agentId: `payer:x402:${PAYER}`, scopes: ['api:read', 'api:write'], storeDomain: null, rateLimitPerMinute: 60, tokenId: 'pay_test' });
    assert.equal(paidWith, 'x402');
  });

  it('a handler that fails: the payment is undone, nothing settled, and the failure passed on', async () => {
    const payments = new RecordingPayments();
    const failure = new Problem('conflict', 'no');
    await assert.rejects(pipelineOver(payments).pay(callOf('subscribeAlert', subscription()), proof, async () => Promise.reject(failure)), (err) => err === failure);
    assert.deepEqual(payments.steps, ['accept', 'undo']);
  });

  it('finishes with the answer the transport read back: a failure undoes, an answer that is not an object records no result', async () => {
    const payments = new RecordingPayments();
    const pipeline = pipelineOver(payments);
    const accepted = (await pipeline.accept(callOf('subscribeAlert', subscription()), proof)) as Accepted;
    assert.equal((await pipeline.finish(accepted, { succeeded: false })).kind, 'undone');
    for (const result of [undefined, null, 'sub_1', 42]) assert.equal((await pipeline.finish(accepted, { succeeded: true, result })).kind, 'settled');
    assert.deepEqual(payments.steps, ['accept', 'undo', 'settle null', 'settle null', 'settle null', 'settle null']);
  });

  it('a settlement refused turns the answer into fresh offers with the refusal; a pending one is served', async () => {
    const payments = new RecordingPayments();
    const refusal = new Problem('settlement-failed', 'refused', { extensions: { paymentId: 'pay_test' } });
    payments.settlement = { kind: 'refused', refusal };
    const refused = await pipelineOver(payments).pay(callOf('subscribeAlert', subscription()), proof, async () => ({ subscriptionId: 'sub_1' }));
    assert.equal(refused.kind, 'payment-required');
    assert.equal((refused as PaymentRequired).reason, refusal);
    assert.deepEqual(payments.steps, ['accept', 'settle sub_1', 'offers subscribeAlert']);

    payments.settlement = { kind: 'pending' };
    const pending = await pipelineOver(payments).pay(callOf('subscribeAlert', subscription()), proof, async () => ({ subscriptionId: 'sub_2' }));
    assert.deepEqual(pending, { kind: 'served', result: { subscriptionId: 'sub_2' }, settlement: { kind: 'pending' } });
  });
});

describe('the HTTP gate', () => {
  /** Stand-ins for the gates the payment gate must follow. */
  const after = (name: string): FastifyPluginAsync => fp(async () => {}, { name });

  async function appWith(plugins: FastifyPluginAsync[], operation: string): Promise<FastifyInstance> {
    const app = Fastify();
    app.setValidatorCompiler(validatorCompiler);
    app.setSerializerCompiler(serializerCompiler);
    installErrorHandling(app, 'http://restock.test', 1024);
    for (const plugin of plugins) await app.register(plugin);
    await app.register(async (scope) => {
      scope.get('/paid', { config: { payment: { ...termsOf('getApiIndex'), operation } } }, async () => ({ ok: true }));
    });
    return app;
  }
  const gate = () => paymentGate({ payments: new RecordingPayments() as unknown as PaymentService, baseUrl: 'http://restock.test', rateLimitPerMinute: 60 });

  it('is the plugin payment-gate, registered only after identity-gate and idempotency-gate', async () => {
    await assert.rejects(appWith([gate()], 'getApiIndex').then((app) => app.ready()), /identity-gate/);
    await assert.rejects(appWith([after('identity-gate'), gate()], 'getApiIndex').then((app) => app.ready()), /idempotency-gate/);
    const app = await appWith([after('identity-gate'), after('idempotency-gate'), gate()], 'getApiIndex');
    const res = await app.inject({ method: 'GET', url: '/paid' });
    assert.equal(res.statusCode, 402);
    assert.equal(res.headers['cache-control'], 'no-store');
    assert.equal(res.json().type, 'https://paymentauth.org/problems/payment-required');
    await app.close();
  });

  it('refuses at start-up a route whose payment operation has no declaration', async () => {
    await assert.rejects(
      appWith([after('identity-gate'), after('idempotency-gate'), gate()], 'refundEverything').then((app) => app.ready()),
      /"refundEverything" is not a declared paid operation/,
    );
  });

  it('lets a caller without a token reach exactly the MCP tools of paid operations', () => {
    const served = declaredOperations.flatMap((declaration) => bindOperations([declaration], {}));
    const expected = declaredOperations.filter((declaration) => declaration.paid && declaration.tool).map((declaration) => declaration.id.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`));
    assert.deepEqual([...paidToolNames(restockTools(served))].sort(), expected.sort());
    assert.deepEqual(expected.sort(), ['checkout_plan', 'subscribe_alert']);
  });
});

describe('MPP refusals, by error type', () => {
  it('maps mppx’s error classes onto the MPP problem types, and anything unknown onto verification-failed', () => {
    const cases: Array<[unknown, string]> = [
      [new Errors.PaymentInsufficientError(), 'payment-insufficient'],
      [new Errors.PaymentExpiredError({ expires: '2020-01-01T00:00:00Z' }), 'payment-expired'],
      [new Errors.MalformedCredentialError(), 'malformed-credential'],
      [new Errors.InvalidChallengeError({ id: 'x' }), 'invalid-challenge'],
      [new Errors.PaymentMethodUnsupportedError({ method: 'x' }), 'method-unsupported'],
      [new Errors.VerificationFailedError({ reason: 'no' }), 'verification-failed'],
      [new Errors.PaymentActionRequiredError({ reason: '3DS' }), 'verification-failed'],
      [new HttpRequestError({ url: 'http://rpc.test', details: 'fetch failed' }), 'payment-network-unreachable'],
      [new TimeoutError({ body: {}, url: 'http://rpc.test' }), 'payment-network-unreachable'],
      // Words in a message decide nothing: only the error's type says the network was at fault.
      [new Error('fetch failed: connect ECONNREFUSED, timed out'), 'verification-failed'],
      [new Errors.VerificationFailedError({ reason: 'Stripe PaymentIntent failed: connect ECONNREFUSED' }), 'verification-failed'],
    ];
    for (const [err, slug] of cases) assert.equal(verificationRefusal(err).slug, slug, String((err as Error).message));
    assert.equal(verificationRefusal(new HttpRequestError({ url: 'http://rpc.test' })).headers['retry-after'], '5');
  });

  /** MPP acceptance with Stripe configured over `create`, the only Stripe call mppx's charge makes. */
  function stripeAcceptance(create: () => Promise<unknown>, list = prices) {
    const config = { stripe: { secretKey: 'sk_test_pipeline', networkId: 'profile_pipeline' }, tempo: {}, card: { testCheckout: false }, x402: {}, settleTimeoutMs: 500 } as unknown as PaymentsConfig;
    const stripe = { paymentIntents: { create } } as unknown as Stripe;
    return new MppAcceptance(config, 'k'.repeat(64), 'restock.test', stripe, list);
  }

  /** A Stripe charge the size Stripe takes (the paid operations' own are below its minimum). */
  const dearer = new PriceList([{ ...prices.of('getApiIndex'), usdCents: 100 }]);
  async function chargeAbove(mpp: MppAcceptance, run: (credential: Credential.Credential) => Promise<unknown>) {
    const issued = (await mpp.challenges('getApiIndex')).find((c) => c.method === 'stripe')!;
    const credential = Credential.from({ challenge: issued.toChallenge(), payload: { spt: 'spt_pipeline' } });
    mpp.precheck(credential, 'getApiIndex', 'k'.repeat(64));
    return run(credential);
  }

  it('tells Stripe out of reach inside mppx’s charge from a refusal, by the Stripe client’s error type', async () => {
    const unreachable = stripeAcceptance(async () => Promise.reject(Object.assign(new Error('An error occurred with our connection to Stripe.'), { type: 'StripeConnectionError' })), dearer);
    await chargeAbove(unreachable, (credential) => assert.rejects(unreachable.verify(credential, 'getApiIndex'), (err) => err instanceof PaymentNetworkUnreachable));
    const declined = stripeAcceptance(async () => Promise.reject(Object.assign(new Error('Your card was declined; connection fine.'), { type: 'StripeCardError' })), dearer);
    await chargeAbove(declined, (credential) =>
      assert.rejects(declined.verify(credential, 'getApiIndex'), (err) => err instanceof Problem && err.slug === 'verification-failed' && /declined/.test(err.detail)),
    );
  });

  it('issues challenges that read back exactly as mppx reads their header, each verifiable with the key', async () => {
    const mpp = stripeAcceptance(async () => ({}));
    for (const operation of prices.operations()) {
      for (const issued of await mpp.challenges(operation)) {
        const read = Challenge.deserialize(issued.serialize());
        assert.equal(JSON.stringify(issued.toChallenge()), JSON.stringify(read), `${operation} ${issued.method}`);
        assert.ok(Challenge.verify(issued.toChallenge(), { secretKey: 'k'.repeat(64) }));
      }
    }
  });
});

describe('the payment ledger, by tenancy', () => {
  it('lists a store’s payments only to an agent bound to it, as if the store did not exist to any other', async () => {
    const asked: string[] = [];
    const store = { listForStore: async (domain: string) => (asked.push(domain), []) };
    const service = new PaymentService(prices, store as never, { settings: () => Promise.reject(new Error('no setting is read here')), engines: () => Promise.reject(new Error('no payment is taken here')) }, [], 'secret');
    const agent = (storeDomain: string | null): Caller => ({ agentId: 'agent', scopes: new Set(['api:read']), storeDomain, rateLimitPerMinute: 60, tokenId: 't' });
    assert.deepEqual(await service.listPayments(agent('shop.myshopify.com'), 'Shop.myshopify.com'), []);
    await assert.rejects(service.listPayments(agent('other.myshopify.com'), 'shop.myshopify.com'), (err) => err instanceof Problem && err.status === 404);
    await assert.rejects(service.listPayments(agent(null), 'shop.myshopify.com'), (err) => err instanceof Problem && err.status === 404);
    assert.deepEqual(asked, ['shop.myshopify.com']);
  });
});
