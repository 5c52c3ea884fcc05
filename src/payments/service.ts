// Longer than most files on purpose: both protocols' acceptance, settlement, undo and
// reconciliation over the one ledger, so the order of checks, claims and calls reads in one place.
import type { SettleResponse, PaymentPayload, PaymentRequired as X402PaymentRequired } from '@x402/core/types';
import type { Credential, Receipt } from 'mppx';
import { nowIso } from '../core/clock.ts';
import { ownStore, type Caller } from '../core/http/caller.ts';
import { newId } from '../core/ids.ts';
import { Problem } from '../core/problems.ts';
import type { PaymentsConfig } from '../config.ts';
import type { IssuedChallenge, MppAcceptance, MppPayment } from './mpp.ts';
import { paymentInfo, x402Requirements, TEST_CARD_REFERENCE_PREFIX, type PaidOperation, type PriceList, type Unavailable } from './offers.ts';
import type { PaymentRow, PaymentRepository } from './repository.ts';
import type { X402Acceptance, X402Check, X402Payment } from './x402.ts';

/** What the MCP and A2A endpoints use to charge a paid call. */
export { PaymentPipeline, unreadableCredential, type PaidCall, type Taken, type TransportProof } from './pipeline.ts';

/** Each protocol's acceptance: x402 through its facilitator, MPP through `mppx`. */
export interface PaymentEngines {
  x402: X402Acceptance;
  mpp: MppAcceptance;
}

/** What a 402 offers payment for: an operation, at the address its offers name as the resource. */
export interface PaidResource {
  operation: PaidOperation;
  url: string;
}

/** The request a payment pays for, as the ledger records it. */
export interface PaidRequest extends PaidResource {
  method: string;
  path: string;
  requestId: string;
  storeDomain: string | null;
}

/** A proof of payment as its transport decoded it: x402's payment payload, or an MPP credential. */
export type PaymentProof = { kind: 'x402'; payload: PaymentPayload } | { kind: 'mpp'; credential: Credential.Credential };

/** A payment accepted for a request, to be settled (or undone) once the handler has answered. */
export type AcceptedPayment =
  | { protocol: 'x402'; id: string; payer: string; x402: X402Payment }
  | { protocol: 'mpp'; id: string; payer: string; mpp: MppPayment };

/**
 * What the operation is told it was paid with: nothing for a card session taken in test mode
 * (no money moved, so a checkout it opens is a plain one, completed on the hosted test page).
 */
export function paidWithOf(payment: AcceptedPayment): AcceptedPayment['protocol'] | undefined {
  return payment.protocol === 'mpp' && isTestCardSession(payment.mpp) ? undefined : payment.protocol;
}

function isTestCardSession(payment: MppPayment): boolean {
  return payment.method === 'card' && (payment.receipt.reference ?? '').startsWith(TEST_CARD_REFERENCE_PREFIX);
}

/** A refusal: its problem says why (402: pay again; 400: not a method offered; 503: a network down). */
export interface Refused {
  kind: 'refused';
  refusal: Problem;
}

export type Acceptance = { kind: 'accepted'; payment: AcceptedPayment } | Refused;

/**
 * A payer's requests per minute. `take` counts one and throws the 429 problem when it is over the
 * limit; `check` throws it when none is left, counting nothing; `record` counts one already paid
 * for and never refuses.
 */
export type PayerLimit = (protocol: AcceptedPayment['protocol'], payer: string, how: 'take' | 'check' | 'record') => Promise<void>;

/** Longer payer names are not looked up before verification (they are the client's word until then). */
const PAYER_KEY_MAX = 256;

/**
 * The answer to a request that must be paid first: every offer of both protocols, the offers
 * this deployment cannot take, and why payment is asked for.
 */
export interface PaymentRequired {
  kind: 'payment-required';
  /** x402 v2 requirements; `accepts` is empty when x402 is not configured. */
  x402: X402PaymentRequired;
  /** One MPP challenge per offer this deployment can take. */
  challenges: IssuedChallenge[];
  unavailable: Unavailable[];
  /** `payment-required` with how to pay, or the refusal of the proof that came (always a 402). */
  reason: Problem;
}

/** The protocol's own proof that the payment was taken. */
export type SettlementReceipt = { protocol: 'x402'; response: SettleResponse } | { protocol: 'mpp'; receipt: Receipt.Receipt };

/** What became of a payment once the handler succeeded. */
export type Settlement =
  | { kind: 'settled'; receipt: SettlementReceipt }
  /** Its outcome is unknown (a timeout): served all the same; reconciliation settles it or finds out. */
  | { kind: 'pending' }
  /** The network refused it: the answer becomes a refusal. */
  | Refused;

const RECONCILE_BATCH = 100;
/** When a payer refused for a payment in flight may try again: a request's verification, handler and settlement take about this. */
const IN_FLIGHT_RETRY_AFTER_SECONDS = 1;
/** How often the worker reconciles settlements whose outcome was unknown. */
export const RECONCILE_EVERY_MS = 60_000;
/** A settlement left unknown is asked again at the next reconciliation. */
const PENDING_RETRY_AFTER_SECONDS = RECONCILE_EVERY_MS / 1000;

/** The ways one 402 carries: x402 requirements, and its MPP challenges' methods. */
export interface CarriedOffers {
  x402: boolean;
  mpp: readonly string[];
}

/**
 * Pay per request, over both protocols at once, on proofs its transports decoded: the offers of
 * a 402, the acceptance of a proof (claimed in the ledger before anything runs, so one proof pays
 * for one request), and the settlement after the handler: only when it succeeded; otherwise
 * nothing is taken (x402) or the charge is refunded (MPP via Stripe, which charges while
 * verifying). Every answer is a decision value; the transports write it their own way.
 */
export class PaymentService {
  private readonly plainRequirements = new Map<string, X402PaymentRequired>();
  /** The plain 402's reason per operation: the offers and the gaps are fixed at start-up. */
  private readonly howTo = new Map<string, Problem>();
  private readonly gaps: Unavailable[];
  private settings: PaymentsConfig | undefined;

  /**
   * @param protocols the payment settings in force (`settings`, read as the app starts: the
   *   offers in `/openapi.json` come from them) and the two protocols' engines (`engines`), made
   *   at the first payment or 402: their SDKs are most of the service's code in memory, and a
   *   process that takes no payment never loads them.
   * @param gaps the offers this deployment cannot take (`offerAvailability`).
   * @param prices the declared paid operations' price sheets.
   */
  constructor(
    readonly prices: PriceList,
    private readonly store: PaymentRepository,
    private readonly protocols: { settings: () => Promise<PaymentsConfig>; engines: () => Promise<PaymentEngines> },
    gaps: Unavailable[],
    private readonly mppSecret: string,
    /** What is said of test-network payments: of every way (no argument), or of those a 402 carries; undefined for real ones. */
    private readonly noticeFor: (carried?: CarriedOffers) => string | undefined = () => undefined,
  ) {
    this.gaps = gaps;
  }

  /**
   * `x-payment-info` of a paid operation, for /openapi.json: its MPP offers, and the x402
   * requirements its 402 holds once the settings in force are read (a serving process reads them
   * before it listens).
   */
  paymentInfo(operation: PaidOperation) {
    const sheet = this.prices.of(operation);
    return paymentInfo(sheet, this.settings ? x402Requirements(this.settings.x402, sheet) : []);
  }

  /** Resolves once the settings in force are read (a serving process waits for it at start-up). */
  async ready(): Promise<void> {
    this.settings = await this.protocols.settings();
  }

  /** Offers this deployment cannot take, with the settings that would enable them. */
  unavailable(): Unavailable[] {
    return this.gaps;
  }

  /** What `/api` and the front door say of test-network payments (every way the service takes). */
  get testNetworkNotice(): string | undefined {
    return this.noticeFor();
  }

  /**
   * Every offer for the resource: x402 requirements and one fresh MPP challenge per offer.
   * `refusal` (a 402) replaces the plain "payment required" when a proof was refused.
   */
  async paymentRequired(resource: PaidResource, refusal?: Problem): Promise<PaymentRequired> {
    const engines = await this.protocols.engines();
    const x402 = refusal ? engines.x402.paymentRequired(resource.operation, resource.url, refusal.detail) : this.plainX402(engines.x402, resource);
    const challenges = await engines.mpp.challenges(resource.operation);
    const reason = refusal ?? this.howToPay(resource.operation, { x402: x402.accepts.length > 0, mpp: [...new Set(challenges.map((challenge) => challenge.method))] });
    return { kind: 'payment-required', x402, challenges, unavailable: this.gaps, reason };
  }

  /**
   * Takes a proof: offline checks, the payer's limit (`payerLimit`, when the transport has one),
   * the claim in the ledger, then the network's verification.
   */
  async accept(proof: PaymentProof, request: PaidRequest, payerLimit?: PayerLimit): Promise<Acceptance> {
    try {
      const payment = proof.kind === 'x402' ? await this.acceptX402(proof.payload, request, payerLimit) : await this.acceptMpp(proof.credential, request, payerLimit);
      return { kind: 'accepted', payment };
    } catch (err) {
      if (err instanceof Problem) return { kind: 'refused', refusal: err };
      throw err;
    }
  }

  /** After the handler succeeded: takes what it earned. `resultRef` is what the payment bought. */
  settle(payment: AcceptedPayment, resultRef: string | null): Promise<Settlement> {
    return payment.protocol === 'x402' ? this.settleX402(payment, resultRef) : this.settleMpp(payment, resultRef);
  }

  /** After the handler failed: nothing is taken (x402), or it is given back (MPP). */
  undo(payment: AcceptedPayment): Promise<void> {
    return payment.protocol === 'x402' ? this.cancelX402(payment) : this.refundMpp(payment);
  }

  /**
   * Gives back the MPP payments that bought `resultRef` through `operation` when what they bought
   * was not delivered after all (billing: a plan proposal its store's owner declined or let
   * expire). True when none of them is left unrefunded; a refund that fails keeps its row
   * settled, with the error, for the caller to try again.
   */
  async refundResult(operation: PaidOperation, resultRef: string): Promise<boolean> {
    let all = true;
    for (const row of await this.store.settledFor(operation, resultRef)) {
      const challengeId = row.proof_key.startsWith('mpp:') ? row.proof_key.slice('mpp:'.length) : undefined;
      if (row.protocol !== 'mpp' || !row.reference || !challengeId) {
        all = false;
        continue;
      }
      try {
        const payment = { challengeId, method: row.method, receipt: { reference: row.reference } as Receipt.Receipt } as MppPayment;
        const refund = await (await this.protocols.engines()).mpp.refund(payment);
        if (!refund) throw new Error(`the ${row.method} method cannot refund`);
        await this.store.update(row.id, { status: 'refunded', error: `not delivered; refund ${refund}` }, nowIso());
      } catch (err) {
        all = false;
        await this.store.update(row.id, { error: `not delivered; the refund failed: ${(err as Error).message}` }, nowIso());
      }
    }
    return all;
  }

  /** Settlements left unknown (timeouts) asked again; the facilitator's answer on a reused nonce says it went through. */
  async reconcile(olderThanMs = 30_000): Promise<number> {
    const rows = await this.store.pending(new Date(Date.now() - olderThanMs).toISOString(), RECONCILE_BATCH);
    for (const row of rows) await this.reconcileOne(row);
    return rows.length;
  }

  /** The payments of requests that named a store, for an agent bound to that store (any other: not found). */
  async listPayments(caller: Caller, shop: string, limit = 100) {
    const rows = await this.store.listForStore(ownStore(caller, shop), limit);
    return rows.map(presentPayment);
  }

  /** The x402 half of a plain 402 never changes for a resource: made once. */
  private plainX402(x402: X402Acceptance, resource: PaidResource): X402PaymentRequired {
    const key = `${resource.operation} ${resource.url}`;
    let required = this.plainRequirements.get(key);
    if (!required) {
      required = x402.paymentRequired(resource.operation, resource.url);
      this.plainRequirements.set(key, required);
    }
    return required;
  }

  /**
   * The 402's detail, naming only the ways this answer carries (its x402 requirements, its MPP
   * challenges' methods): a client told of a protocol the answer does not offer would look for it.
   */
  private howToPay(operation: PaidOperation, carried: CarriedOffers): Problem {
    const key = `${operation} ${carried.x402} ${carried.mpp.join(',')}`;
    let reason = this.howTo.get(key);
    if (!reason) {
      const sheet = this.prices.of(operation);
      const ways = [carried.x402 && 'x402 (PAYMENT-SIGNATURE)', carried.mpp.length > 0 && `MPP (Authorization: Payment; ${carried.mpp.join(', ')})`].filter((way): way is string => typeof way === 'string');
      const price = `${sheet.description}: USD ${(sheet.usdCents / 100).toFixed(2)}.`;
      const howTo = ways.length > 0 ? `${price} Pay with ${ways.join(' or ')}, or call with an access token from /api/agent/register.` : `${price} Call with an access token from /api/agent/register.`;
      const notice = this.noticeFor(carried);
      reason = new Problem('payment-required', ways.length > 0 ? `${howTo}${notice ? ` ${notice}` : ''}` : `${howTo} No payment method is configured on this deployment: ${this.gaps.map((g) => g.reason).join(' ')}`);
      this.howTo.set(key, reason);
    }
    return reason;
  }

  /**
   * Offline checks first (signature, terms, window): a proof that fails them leaves no row and
   * calls no one. Then the payer's limit, then a facilitator slot for the claim and the verification.
   */
  private async acceptX402(payload: PaymentPayload, request: PaidRequest, payerLimit: PayerLimit | undefined): Promise<AcceptedPayment> {
    const { x402 } = await this.protocols.engines();
    const checked = await x402.check(payload, request.operation);
    // `from` is proven by the signature: counted at once.
    await payerLimit?.('x402', checked.payer, 'take');
    return x402.verifying(() => this.claimAndVerifyX402(x402, checked, request));
  }

  private async claimAndVerifyX402(x402: X402Acceptance, checked: X402Check, request: PaidRequest): Promise<AcceptedPayment> {
    const id = newId('pay');
    const now = nowIso();
    // The facilitator checks the balance when it verifies, but the transfer waits until the
    // handler has answered: a payer's proofs verified side by side would all be served against
    // one balance. One in flight per payer at a time: the next one is verified once the one
    // before has settled (or been given up), against what is left.
    const claim = await this.store.claimAlone(
      {
        ...this.ledgerRow(id, request, now),
        proof_key: `x402:${checked.requirements.network}:${checked.payer}:${checked.nonce}`,
        protocol: 'x402',
        method: `exact:${checked.requirements.network}`,
        intent: 'charge',
        amount: checked.requirements.amount,
        currency: checked.requirements.asset,
        payer: checked.payer,
        proof: JSON.stringify({ payload: checked.payload, requirements: checked.requirements }),
      },
      mayStillSettle,
    );
    if (claim.kind === 'used') {
      throw new Problem('verification-failed', 'This payment authorisation (payer and nonce) has already been used for another request.', {
        extensions: { reason: 'proof_already_used' },
      });
    }
    if (claim.kind === 'held') throw paymentInFlight(claim.by);
    try {
      await x402.verify(checked.payload, checked.requirements);
    } catch (err) {
      await this.recordRefusal(id, err);
      throw err;
    }
    await this.store.update(id, { status: 'verified' }, nowIso());
    return { protocol: 'x402', id, payer: checked.payer, x402: { ...checked, amount: checked.requirements.amount } };
  }

  /**
   * The payer an MPP credential names is only its word until verification, which charges: a payer
   * already over its limit is refused before that, and only verified payments count, so naming
   * someone else cannot use up their limit.
   */
  private async acceptMpp(credential: Credential.Credential, request: PaidRequest, payerLimit: PayerLimit | undefined): Promise<AcceptedPayment> {
    const { mpp } = await this.protocols.engines();
    mpp.precheck(credential, request.operation, this.mppSecret);
    const named = credential.source && credential.source.length <= PAYER_KEY_MAX ? credential.source.toLowerCase() : undefined;
    if (named) await payerLimit?.('mpp', named, 'check');
    const id = newId('pay');
    const now = nowIso();
    const challengeRequest = credential.challenge.request as { amount?: unknown; currency?: unknown };
    const claimed = await this.store.claim({
      ...this.ledgerRow(id, request, now),
      proof_key: `mpp:${credential.challenge.id}`,
      protocol: 'mpp',
      method: credential.challenge.method,
      intent: credential.challenge.intent,
      amount: String(challengeRequest.amount ?? ''),
      currency: String(challengeRequest.currency ?? ''),
      payer: credential.source ?? null,
    });
    if (!claimed) throw new Problem('invalid-challenge', 'This challenge has already paid for a request; each pays for one.');
    let payment: MppPayment;
    try {
      payment = await mpp.verify(credential, request.operation);
    } catch (err) {
      await this.recordRefusal(id, err);
      throw err;
    }
    await this.store.update(id, { status: 'verified', reference: payment.receipt.reference ?? null }, nowIso());
    if (named) await payerLimit?.('mpp', named, 'record');
    return { protocol: 'mpp', id, payer: payment.payer ?? `challenge:${payment.challengeId}`, mpp: payment };
  }

  private async settleX402(payment: Extract<AcceptedPayment, { protocol: 'x402' }>, resultRef: string | null): Promise<Settlement> {
    await this.store.update(payment.id, { result_ref: resultRef }, nowIso());
    const outcome = await (await this.protocols.engines()).x402.settle(payment.x402.payload, payment.x402.requirements);
    if (outcome.kind === 'settled') {
      await this.store.update(payment.id, { status: 'settled', reference: outcome.response.transaction }, nowIso());
      return { kind: 'settled', receipt: { protocol: 'x402', response: outcome.response } };
    }
    if (outcome.kind === 'unknown') {
      // The work is done and the payment may well go (or have gone) through: serve, and let
      // reconciliation settle it or find out. The ledger says so meanwhile.
      await this.store.update(payment.id, { status: 'pending', error: outcome.reason }, nowIso());
      return { kind: 'pending' };
    }
    await this.store.update(payment.id, { status: 'failed', error: `settlement refused: ${outcome.reason}` }, nowIso());
    return {
      kind: 'refused',
      refusal: new Problem('settlement-failed', `The payment was verified but its settlement was refused (${outcome.code}); the request's result is kept in the ledger as unpaid.`, {
        extensions: { paymentId: payment.id, reason: outcome.code, ...(resultRef ? { resultRef } : {}) },
      }),
    };
  }

  private async cancelX402(payment: Extract<AcceptedPayment, { protocol: 'x402' }>): Promise<void> {
    // Never settled, so the authorisation took nothing and may pay for a retry.
    await this.store.release(payment.id, { status: 'cancelled', error: 'the request failed; not settled' }, nowIso());
  }

  private async settleMpp(payment: Extract<AcceptedPayment, { protocol: 'mpp' }>, resultRef: string | null): Promise<Settlement> {
    await this.store.update(payment.id, { status: 'settled', result_ref: resultRef }, nowIso());
    return { kind: 'settled', receipt: { protocol: 'mpp', receipt: payment.mpp.receipt } };
  }

  private async refundMpp(payment: Extract<AcceptedPayment, { protocol: 'mpp' }>): Promise<void> {
    try {
      const refund = await (await this.protocols.engines()).mpp.refund(payment.mpp);
      await this.store.update(payment.id, { status: refund ? 'refunded' : 'cancelled', error: refund ? `the request failed; refund ${refund}` : 'the request failed' }, nowIso());
    } catch (err) {
      // Kept visibly: an operator must refund by hand.
      await this.store.update(payment.id, { status: 'verified', error: `the request failed and the refund failed: ${(err as Error).message}` }, nowIso());
    }
  }

  private async reconcileOne(row: PaymentRow): Promise<void> {
    const proof = row.proof ? (JSON.parse(row.proof) as { payload: X402Payment['payload']; requirements: X402Payment['requirements'] }) : undefined;
    if (row.protocol !== 'x402' || !proof) return;
    const outcome = await (await this.protocols.engines()).x402.settle(proof.payload, proof.requirements);
    const now = nowIso();
    if (outcome.kind === 'settled') {
      await this.store.update(row.id, { status: 'settled', reference: outcome.response.transaction, error: null }, now);
    } else if (outcome.kind === 'failed' && /nonce_already_used/.test(outcome.reason)) {
      // The authorisation can only have been used by its own transfer: the first settle went through.
      await this.store.update(row.id, { status: 'settled', error: null }, now);
    } else if (outcome.kind === 'failed' || authorisationExpired(proof.payload)) {
      await this.store.update(row.id, { status: 'failed', error: `settlement refused on reconciliation: ${outcome.reason}` }, now);
    } else {
      await this.store.update(row.id, { attempts: row.attempts + 1, error: outcome.reason }, now);
    }
  }

  /** A refusal keeps its row; one due to the network frees the proof for a retry. */
  private async recordRefusal(id: string, err: unknown): Promise<void> {
    const problem = err instanceof Problem ? err : undefined;
    const error = problem ? `${problem.slug}: ${problem.detail}` : String((err as Error)?.message ?? err);
    if (problem?.slug === 'payment-network-unreachable' || problem?.slug === 'payment-method-unavailable') {
      await this.store.release(id, { status: 'failed', error }, nowIso());
    } else {
      await this.store.update(id, { status: 'failed', error }, nowIso());
    }
  }

  private ledgerRow(id: string, request: PaidRequest, now: string): Omit<PaymentRow, 'proof_key' | 'protocol' | 'method' | 'intent' | 'amount' | 'currency' | 'payer'> {
    return {
      id,
      operation: request.operation,
      reference: null,
      status: 'verifying',
      error: null,
      request_method: request.method,
      request_path: request.path,
      request_id: request.requestId,
      store_domain: request.storeDomain,
      result_ref: null,
      proof: null,
      attempts: 0,
      created_at: now,
      updated_at: now,
    };
  }
}

/**
 * Whether an x402 payment in flight may still move its payer's money: until its authorisation's
 * `validBefore`. One whose proof cannot be read is taken to hold.
 */
function mayStillSettle(row: PaymentRow): boolean {
  try {
    const { payload } = JSON.parse(row.proof ?? '') as { payload: X402Payment['payload'] };
    return !authorisationExpired(payload);
  } catch {
    return true;
  }
}

/**
 * Refused before any row, the proof untouched: the same request may be sent again with it once
 * the payer's payment in flight has finished (at once, or after reconciliation when its
 * settlement's outcome is unknown).
 */
function paymentInFlight(inFlight: PaymentRow): Problem {
  const settling = inFlight.status === 'pending';
  const retryAfter = settling ? PENDING_RETRY_AFTER_SECONDS : IN_FLIGHT_RETRY_AFTER_SECONDS;
  const why = settling
    ? 'the settlement of an earlier payment from this payer is not known yet; it is checked again every minute'
    : 'another payment from this payer is being verified or served';
  return new Problem('conflict', `An x402 payer pays for one request at a time, and ${why}. Nothing was recorded or charged: send this request again with the same payment after ${retryAfter} s.`, {
    headers: { 'retry-after': String(retryAfter) },
    extensions: { reason: 'payment_in_flight' },
  });
}

/** An EIP-3009 authorisation past its `validBefore` can no longer be settled. */
function authorisationExpired(payload: X402Payment['payload']): boolean {
  const validBefore = Number((payload.payload as { authorization?: { validBefore?: unknown } }).authorization?.validBefore);
  return Number.isFinite(validBefore) && validBefore * 1000 < Date.now();
}

export function presentPayment(row: PaymentRow) {
  return {
    paymentId: row.id,
    protocol: row.protocol as 'x402' | 'mpp',
    method: row.method,
    intent: row.intent,
    operation: row.operation,
    amount: row.amount,
    currency: row.currency,
    payer: row.payer,
    reference: row.reference,
    status: row.status,
    error: row.error,
    request: { method: row.request_method, path: row.request_path, requestId: row.request_id },
    result: row.result_ref,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}
