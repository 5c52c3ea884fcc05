// Longer than most files on purpose: MPP's three methods (Stripe, Tempo, card) share one challenge
// binding, one verification path through mppx and one mapping of its errors to problems.
import { AsyncLocalStorage } from 'node:async_hooks';
import { createHmac, randomBytes } from 'node:crypto';
import { Challenge, Credential, Errors, Method, PaymentRequest, z as mz, type Receipt } from 'mppx';
import { Mppx, stripe, tempo } from 'mppx/server';
import type Stripe from 'stripe';
import { BaseError as ViemError, createPublicClient, http, HttpRequestError, SocketClosedError, TimeoutError, WebSocketRequestError } from 'viem';
import { Transaction as TempoTransaction } from 'viem/tempo';
import type { PaymentsConfig } from '../config.ts';
import { Problem, type ProblemSlug } from '../core/problems.ts';
import { usdDecimal, type MppMethod, type MppOffer } from '../core/operations.ts';
import { offerAvailability, TEST_CARD_REFERENCE_PREFIX, type PaidOperation, type PriceList, type Unavailable } from './offers.ts';

/** Stripe's smallest charge in USD cents (docs.stripe.com/currencies#minimum-and-maximum-charge-amounts). */
const STRIPE_MINIMUM_USD_CENTS = 50;
/**
 * Shared payment tokens are in preview: `shared_payment_granted_token` exists only in preview API
 * versions, not in the one the SDK pins. The same version mppx's own Stripe charge sends.
 * https://docs.stripe.com/api/shared-payment/granted-token?api-version=2026-04-22.preview
 */
const STRIPE_PREVIEW_VERSION = '2026-07-29.preview';
const CHALLENGE_TTL_MS = 5 * 60_000;
/** mppx's own key for the route a challenge is bound to (it checks it when verifying). */
const SCOPE_KEY = '_mppx_scope';
const NONCE_KEY = 'nonce';

/** A verified and charged MPP credential, waiting for the handler's outcome. */
export interface MppPayment {
  challengeId: string;
  method: MppMethod;
  intent: string;
  amount: string;
  currency: string;
  payer: string | null;
  receipt: Receipt.Receipt;
}

/** The session intent (the seed's checkout offers) as a method: stripe and card define only charge. */
function sessionMethod(name: 'stripe' | 'card') {
  return Method.from({
    name,
    intent: 'session',
    schema: {
      credential: { payload: mz.object({ spt: mz.optional(mz.string()), token: mz.optional(mz.string()) }) },
      request: mz.pipe(
        mz.object({ amount: mz.amount(), currency: mz.string(), decimals: mz.number(), description: mz.optional(mz.string()) }),
        mz.transform(({ amount, decimals, ...rest }: { amount: string; decimals: number; currency: string; description?: string }) => ({
          ...rest,
          amount: toBaseUnits(amount, decimals),
        })),
      ),
    },
  });
}

function toBaseUnits(decimal: string, decimals: number): string {
  const [whole = '0', fraction = ''] = decimal.split('.');
  return (BigInt(whole) * 10n ** BigInt(decimals) + BigInt((fraction + '0'.repeat(decimals)).slice(0, decimals) || '0')).toString();
}

/**
 * MPP (the Machine Payments Protocol) through `mppx`: challenges bound to one operation by HMAC
 * (the `scope` travels in the challenge's `opaque`), credentials verified by the SDK's own
 * methods. Offers whose settings are missing are left out of the challenges and named instead.
 */
export class MppAcceptance {
  private readonly mppx;
  private readonly offered: Set<string>;
  private readonly gaps: Unavailable[];
  private readonly challengeTemplates = new Map<PaidOperation, Promise<ChallengeTemplate[]>>();
  private readonly noncePrefix = randomBytes(9).toString('base64url');
  private nonceCount = 0;
  readonly stripe: Stripe | undefined;

  constructor(
    private readonly config: PaymentsConfig,
    private readonly secretKey: string,
    realm: string,
    stripe: Stripe | undefined,
    private readonly prices: PriceList,
  ) {
    const methods: Method.AnyServer[] = [];
    ({ mpp: this.offered, unavailable: this.gaps } = offerAvailability(config, stripe !== undefined));
    if (stripe && this.offered.has('stripe/charge')) {
      this.stripe = stripe;
      methods.push(this.stripeCharge(stripe, config.stripe.networkId!), this.stripeSession(stripe));
    }
    if (config.tempo.recipient) methods.push(this.tempoCharge(config.tempo.recipient));
    methods.push(config.card.testCheckout ? testCardSession() : Method.toServer(sessionMethod('card'), { verify: async () => { throw cardProcessorMissing(); } }));
    this.mppx = Mppx.create({ methods: methods as never, secretKey, realm });
  }

  /**
   * One challenge per offer this deployment can take. Each carries a nonce in its HMAC-covered
   * `opaque`, so no two answers share a challenge id (an id pays for one request; two clients
   * handed the same one would race for it). Unique is all the nonce must be (the HMAC is what
   * cannot be forged): this process's random prefix and a counter, cheaper than random bytes
   * per answer.
   */
  async challenges(operation: PaidOperation): Promise<IssuedChallenge[]> {
    const expires = new Date(Date.now() + CHALLENGE_TTL_MS).toISOString();
    const nonce = `${this.noncePrefix}${(++this.nonceCount).toString(36)}`;
    const opaque = opaqueOf(operation, nonce);
    return (await this.templates(operation)).map((template) => {
      // The id is mppx's binding (realm|method|intent|request|expires|digest|opaque), computed
      // with Node's HMAC: the SDK's portable one costs more than the rest of the 402 together.
      // The tests check every id with mppx's own Challenge.verify.
      const id = createHmac('sha256', this.secretKey).update(`${template.bindingPrefix}|${expires}||${opaque}`).digest('base64url');
      return new IssuedChallenge(template, id, expires, opaque);
    });
  }

  /**
   * The offers' challenges as mppx makes them (its own request schemas and defaults), made once
   * per operation: each 402 only re-signs them with a new expiry and nonce.
   */
  private templates(operation: PaidOperation): Promise<ChallengeTemplate[]> {
    let made = this.challengeTemplates.get(operation);
    if (!made) {
      made = Promise.all(
        this.prices.of(operation).mpp
          .filter((offer) => this.offered.has(`${offer.method}/${offer.intent}`))
          .map(async (offer) => {
            const handlers = (this.mppx.challenge as Record<string, Record<string, (options: object) => Promise<Challenge.Challenge>>>)[offer.method]!;
            const made = await handlers[offer.intent]!({ ...this.routeRequest(operation, offer), description: offer.description });
            return templateOf(made);
          }),
      );
      made.catch(() => this.challengeTemplates.delete(operation));
      this.challengeTemplates.set(operation, made);
    }
    return made;
  }

  /**
   * The offline half of verification of a credential its transport decoded: one of ours (HMAC),
   * for this operation, not expired, a method this deployment can take. Nothing is charged yet,
   * so a refusal here burns nothing.
   */
  precheck(credential: Credential.Credential, operation: PaidOperation, secretKey: string): void {
    const { challenge } = credential;
    const offer = this.prices.of(operation).mpp.find((o) => o.method === challenge.method && o.intent === challenge.intent);
    if (!offer) {
      throw new Problem('method-unsupported', `${challenge.method}/${challenge.intent} is not offered for ${operation}.`);
    }
    if (!Challenge.verify(challenge, { secretKey })) {
      throw new Problem('invalid-challenge', 'This challenge was not issued by this service, or was altered.');
    }
    if (scopeOf(challenge) !== operation) {
      throw new Problem('invalid-challenge', `This challenge was issued for another operation, not ${operation}.`);
    }
    if (!challenge.expires || new Date(challenge.expires).getTime() <= Date.now()) {
      throw new Problem('payment-expired', `The challenge expired at ${challenge.expires ?? 'an unknown time'}.`);
    }
    if (!this.offered.has(`${challenge.method}/${challenge.intent}`)) {
      const gap = this.gaps.find((u) => u.method === challenge.method);
      throw new Problem('payment-method-unavailable', gap?.reason ?? `${challenge.method} is not available.`, {
        extensions: { method: challenge.method, ...(gap?.missing ? { missing: gap.missing } : {}) },
      });
    }
  }

  /** The online half: the method's own verification through mppx (for stripe: the charge). */
  async verify(credential: Credential.Credential, operation: PaidOperation): Promise<MppPayment> {
    const { challenge } = credential;
    const offer = this.prices.of(operation).mpp.find((o) => o.method === challenge.method && o.intent === challenge.intent)!;
    let receipt: Receipt.Receipt;
    try {
      const nonce = metaOf(challenge)?.[NONCE_KEY];
      receipt = await this.mppx.verifyCredential(credential, {
        scope: operation,
        request: this.routeRequest(operation, offer),
        ...(nonce ? { meta: { [NONCE_KEY]: nonce } } : {}),
      });
    } catch (err) {
      throw verificationRefusal(err);
    }
    const request = challenge.request as { amount?: string; currency?: string };
    return {
      challengeId: challenge.id,
      method: offer.method,
      intent: offer.intent,
      amount: String(request.amount ?? this.prices.of(operation).usdCents),
      currency: String(request.currency ?? 'usd'),
      payer: credential.source ?? null,
      receipt,
    };
  }

  /** Gives the money back when the paid-for request did not succeed (Stripe charges at verification). */
  async refund(payment: MppPayment): Promise<string | undefined> {
    if (payment.method !== 'stripe' || !this.stripe || !payment.receipt.reference) return undefined;
    const refund = await this.stripe.refunds.create(
      { payment_intent: payment.receipt.reference },
      { idempotencyKey: `refund_${payment.challengeId}` },
    );
    return refund.id;
  }

  private routeRequest(operation: PaidOperation, offer: MppOffer): Record<string, unknown> {
    const cents = this.prices.of(operation).usdCents;
    if (offer.method === 'tempo') return { amount: usdDecimal(cents) };
    return { amount: usdDecimal(cents), currency: 'usd', decimals: 2 };
  }

  /**
   * mppx's Stripe charge, except that an amount below Stripe's minimum is still offered (the seed
   * lists it) and refused when paid, with a problem that says so, instead of vanishing; and that
   * Stripe out of reach is told apart from a refusal (mppx reports both as a failed verification).
   */
  private stripeCharge(client: Stripe, networkId: string) {
    const reporting = {
      paymentIntents: {
        create: async (...args: Parameters<Stripe['paymentIntents']['create']>) => {
          try {
            return await client.paymentIntents.create(...args);
          } catch (err) {
            const unreachable = stripeUnreachable(err);
            const call = stripeCalls.getStore();
            if (unreachable && call) call.unreachable = unreachable;
            throw err;
          }
        },
      },
    };
    const charge = stripe.charge({ client: reporting as never, networkId, paymentMethodTypes: ['card'], currency: 'usd', decimals: 2 });
    return Method.toServer(charge, {
      defaults: charge.defaults,
      verify: async (parameters) => {
        const cents = Number(boundRequest(parameters.credential.challenge).amount);
        if (cents < STRIPE_MINIMUM_USD_CENTS) throw belowStripeMinimum(cents);
        const call: StripeCall = {};
        try {
          return await stripeCalls.run(call, () => charge.verify(parameters));
        } catch (err) {
          throw call.unreachable ?? err;
        }
      },
    });
  }

  /** The starter plan's first month through Stripe: a confirmed PaymentIntent on the Shared Payment Token. */
  private stripeSession(client: Stripe) {
    return Method.toServer(sessionMethod('stripe'), {
      defaults: { currency: 'usd', decimals: 2 },
      verify: async ({ credential }) => {
        const request = boundRequest(credential.challenge);
        const spt = (credential.payload as { spt?: string }).spt;
        if (!spt) throw new Errors.InvalidPayloadError();
        let intent: Stripe.PaymentIntent;
        try {
          intent = await client.paymentIntents.create(
            {
              amount: Number(request.amount),
              currency: request.currency,
              confirm: true,
              automatic_payment_methods: { enabled: true, allow_redirects: 'never' },
              metadata: { mpp_challenge: credential.challenge.id, purpose: 'starter plan, first month' },
              shared_payment_granted_token: spt,
            } as Stripe.PaymentIntentCreateParams,
            { idempotencyKey: `mpp_${credential.challenge.id}`, apiVersion: STRIPE_PREVIEW_VERSION },
          );
        } catch (err) {
          throw stripeFailure(err);
        }
        if (intent.status !== 'succeeded') {
          throw new Errors.VerificationFailedError({ reason: `Stripe PaymentIntent status: ${intent.status}` });
        }
        return { method: 'stripe', status: 'success', timestamp: new Date().toISOString(), reference: intent.id };
      },
    });
  }

  private tempoCharge(recipient: string) {
    const { rpcUrl, currency, testnet } = this.config.tempo;
    const charge = tempo.charge({
      recipient: recipient as `0x${string}`,
      ...(testnet ? { testnet: true } : {}),
      ...(currency ? { currency: currency as `0x${string}` } : {}),
      ...(rpcUrl ? { getClient: () => createPublicClient({ transport: http(rpcUrl, { timeout: this.config.settleTimeoutMs, retryCount: 0 }) }) } : {}),
    } as never);
    const validate = charge.validate!;
    const broadcast = charge.broadcast!;
    return {
      ...charge,
      validate: async (parameters: Parameters<typeof validate>[0]) => {
        assertSourceSigned(parameters.credential);
        return validate(parameters);
      },
      broadcast: async (parameters: Parameters<typeof broadcast>[0]) => {
        assertSourceSigned(parameters.credential);
        return broadcast(parameters);
      },
    };
  }
}

/**
 * The payer of a signed tempo transfer is its signer. mppx compares the credential's `source`
 * with the sender of a transfer the payer broadcast, but not with the signer of one it
 * broadcasts itself, so without this a credential could name anyone as the payer (the ledger's
 * payer, and the owner of what the request creates).
 */
function assertSourceSigned(credential: Credential.Credential): void {
  const payload = credential.payload as { type?: unknown; signature?: unknown };
  if (payload.type !== 'transaction' || typeof payload.signature !== 'string' || !credential.source) return;
  let signer: string | undefined;
  let chainId: number | undefined;
  try {
    ({ from: signer, chainId } = TempoTransaction.deserialize(payload.signature as `0x76${string}`));
  } catch {
    return; // Not a transaction: mppx refuses it itself.
  }
  if (credential.source.toLowerCase() !== `did:pkh:eip155:${chainId}:${signer}`.toLowerCase()) {
    throw new Errors.VerificationFailedError({ reason: 'the credential names a source that did not sign the transaction' });
  }
}

function belowStripeMinimum(cents: number): Problem {
  return new Problem(
    'payment-method-unavailable',
    `Stripe cannot charge USD ${usdDecimal(cents)}: its minimum charge is USD ${usdDecimal(STRIPE_MINIMUM_USD_CENTS)}. Nothing was charged; pay with another way the 402 offers, or use an access token.`,
    { extensions: { method: 'stripe', reason: 'amount_below_minimum', minimumAmount: String(STRIPE_MINIMUM_USD_CENTS), currency: 'usd' } },
  );
}

/**
 * The card checkout session beside the hosted test checkout: the network token is not charged
 * (there is no processor, and nothing may be charged in test mode), so any token the challenge
 * is paid with is taken, once; what the session buys is completed on the hosted page.
 */
function testCardSession() {
  return Method.toServer(sessionMethod('card'), {
    defaults: { currency: 'usd', decimals: 2 },
    verify: async ({ credential }) => {
      const token = (credential.payload as { token?: string }).token;
      if (!token) throw new Errors.InvalidPayloadError();
      return { method: 'card', status: 'success', timestamp: new Date().toISOString(), reference: `${TEST_CARD_REFERENCE_PREFIX}${credential.challenge.id}` };
    },
  });
}

function cardProcessorMissing(): Problem {
  return new Problem(
    'payment-method-unavailable',
    'Card checkout sessions need a card processor to charge the network token, and none is configured. Nothing was charged; pay with another way the 402 offers, or use an access token.',
    { extensions: { method: 'card', reason: 'no_processor' } },
  );
}

/** A Stripe API failure: unreachable is the network's fault (503); a refusal is the payer's (402). */
function stripeFailure(err: unknown): Error {
  return stripeUnreachable(err) ?? new Errors.VerificationFailedError({ reason: `Stripe refused the payment: ${(err as Error).message}` });
}

/** The Stripe SDK's error types for a Stripe that could not be reached or failed on its side. */
function stripeUnreachable(err: unknown): PaymentNetworkUnreachable | undefined {
  const type = (err as { type?: string } | undefined)?.type;
  if (type !== 'StripeConnectionError' && type !== 'StripeAPIError') return undefined;
  return new PaymentNetworkUnreachable('Stripe could not be reached to take the payment; nothing was served.');
}

/** What a Stripe call made inside mppx's charge found, for the verification that made it. */
interface StripeCall {
  unreachable?: PaymentNetworkUnreachable;
}
const stripeCalls = new AsyncLocalStorage<StripeCall>();

/** The processor or RPC that verifies a payment did not answer: nothing was served; retry later. */
export class PaymentNetworkUnreachable extends Problem {
  constructor(detail: string) {
    super('payment-network-unreachable', detail, { headers: { 'retry-after': '5' } });
  }
}

/**
 * A failed verification as the problem the client is answered with, decided by the error's
 * type: ours are problems already; mppx's classes are the MPP problem types clients know; viem's
 * transport errors mean the RPC did not answer; anything else is a failed verification.
 */
export function verificationRefusal(err: unknown): Problem {
  if (err instanceof Problem) return err;
  if (err instanceof Errors.PaymentError) return new Problem(slugOfMppxRefusal(err), err.message);
  if (rpcUnreachable(err)) return new PaymentNetworkUnreachable(`The payment network did not answer: ${firstLine(err)}`);
  return new Problem('verification-failed', `The payment could not be verified: ${firstLine(err)}`);
}

function slugOfMppxRefusal(err: Errors.PaymentError): ProblemSlug {
  if (err instanceof Errors.PaymentInsufficientError) return 'payment-insufficient';
  if (err instanceof Errors.PaymentExpiredError) return 'payment-expired';
  if (err instanceof Errors.MalformedCredentialError) return 'malformed-credential';
  if (err instanceof Errors.InvalidChallengeError) return 'invalid-challenge';
  if (err instanceof Errors.PaymentMethodUnsupportedError) return 'method-unsupported';
  // VerificationFailedError, and the kinds with no problem type of ours (action required, invalid payload, ...).
  return 'verification-failed';
}

/** An RPC call that failed in transport (refused, reset, timed out), wherever viem wrapped it. */
function rpcUnreachable(err: unknown): boolean {
  if (!(err instanceof ViemError)) return false;
  return err.walk((cause) => cause instanceof HttpRequestError || cause instanceof TimeoutError || cause instanceof SocketClosedError || cause instanceof WebSocketRequestError) !== null;
}

function firstLine(err: unknown): string {
  return String((err as Error | undefined)?.message ?? err).split('\n')[0]!;
}

/**
 * What `PaymentRequest.serialize({ _mppx_scope, nonce })` makes (RFC 8785 canonical JSON, keys in
 * that order, as base64url), written out: the SDK's portable encoder was 5% of a 402's CPU.
 * Both values are plain ASCII (an operation name, a base64url nonce); a test compares the two.
 */
export function opaqueOf(operation: PaidOperation, nonce: string): string {
  return Buffer.from(`{"${SCOPE_KEY}":${JSON.stringify(operation)},"${NONCE_KEY}":${JSON.stringify(nonce)}}`).toString('base64url');
}

/**
 * A challenge issued for one 402, signed on the fast path from its offer's template: written
 * into a header as mppx's Challenge.serialize writes it, or read as mppx reads it from one.
 */
export class IssuedChallenge {
  constructor(
    private readonly template: ChallengeTemplate,
    readonly id: string,
    readonly expires: string,
    readonly opaque: string,
  ) {}

  get method(): string {
    return this.template.fields.method;
  }

  get intent(): string {
    return this.template.fields.intent;
  }

  /** The `WWW-Authenticate: Payment` value. */
  serialize(): string {
    return `Payment id="${this.id}", ${this.template.fixedParams}, expires="${this.expires}", opaque="${this.opaque}"`;
  }

  /** The challenge as a client holds it once it has read the header. */
  toChallenge(): Challenge.Challenge {
    return Challenge.from({ ...this.template.fields, id: this.id, expires: this.expires, opaque: this.opaque });
  }
}

/** What every challenge of one offer shares; each 402 adds its id, expiry and opaque data. */
interface ChallengeTemplate {
  /** `realm|method|intent|request`: the start of the HMAC input. */
  bindingPrefix: string;
  /** The quoted realm … description parameters, in mppx's order. */
  fixedParams: string;
  /** The same parameters as a client reads them back (the request decoded from its wire form). */
  fields: Pick<Challenge.Challenge, 'realm' | 'method' | 'intent' | 'request' | 'description'>;
}

function templateOf(challenge: Challenge.Challenge): ChallengeTemplate {
  const { realm, method, intent, request, description } = challenge;
  const serialized = Challenge.serialize({ ...challenge, id: 'ID', expires: undefined, opaque: undefined, meta: undefined, digest: undefined });
  const wireRequest = PaymentRequest.serialize(request);
  return {
    bindingPrefix: [realm, method, intent, wireRequest].join('|'),
    fixedParams: serialized.slice('Payment id="ID", '.length),
    fields: { realm, method, intent, request: PaymentRequest.deserialize(wireRequest), ...(description !== undefined ? { description } : {}) },
  };
}

/** The challenge's `opaque` data (covered by its HMAC): the operation it pays for and its nonce. */
function metaOf(challenge: Challenge.Challenge): Record<string, string> | undefined {
  return challenge.meta ?? (challenge.opaque ? (PaymentRequest.deserialize(challenge.opaque) as Record<string, string>) : undefined);
}

function scopeOf(challenge: Challenge.Challenge): string | undefined {
  return metaOf(challenge)?.[SCOPE_KEY];
}

/** The challenge's request in base units, as issued and covered by its HMAC (mppx checked both). */
function boundRequest(challenge: Challenge.Challenge): { amount: string; currency: string } {
  const request = challenge.request as { amount?: unknown; currency?: unknown };
  return { amount: String(request.amount), currency: String(request.currency ?? 'usd') };
}
