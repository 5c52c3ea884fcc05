import { Receipt } from 'mppx';
import { nowIso } from '../core/clock.ts';
import { newId } from '../core/ids.ts';
import { Problem } from '../core/problems.ts';
import type { MppAcceptance, MppPayment, Unavailable } from './mpp.ts';
import { priceSheets, type PaidOperation } from './offers.ts';
import type { PaymentRow, PaymentStore } from './store.ts';
import { encodePaymentRequiredHeader, encodePaymentResponseHeader, type X402Acceptance, type X402Payment } from './x402.ts';

/** The request a payment pays for, as the ledger records it. */
export interface PaidRequest {
  operation: PaidOperation;
  method: string;
  path: string;
  url: string;
  requestId: string;
  storeDomain: string | null;
}

/** A payment accepted for a request, to be settled (or undone) once the handler has answered. */
export type AcceptedPayment =
  | { protocol: 'x402'; id: string; payer: string; x402: X402Payment }
  | { protocol: 'mpp'; id: string; payer: string; mpp: MppPayment };

/** What the client is told once the handler has answered. */
export interface Finish {
  headers: Record<string, string>;
  /** Set when the answer must become a refusal instead (the settlement failed). */
  problem?: Problem;
}

const RECONCILE_BATCH = 100;

/**
 * Pay per request, over both protocols at once: the 402 that offers both, the acceptance of a
 * proof (claimed in the ledger before anything runs, so one proof pays for one request), and
 * the settlement after the handler: only when it succeeded; otherwise nothing is taken
 * (x402) or the charge is refunded (MPP via Stripe, which charges while verifying).
 */
export class PaymentService {
  private readonly requirementsCache = new Map<string, { required: ReturnType<X402Acceptance['paymentRequired']>; header: string | undefined }>();
  private readonly gaps: Unavailable[];

  constructor(
    private readonly store: PaymentStore,
    private readonly x402: X402Acceptance,
    private readonly mpp: MppAcceptance,
    private readonly mppSecret: string,
  ) {
    this.gaps = this.unavailable();
  }

  /** Offers this deployment cannot take, with the settings that would enable them. */
  unavailable(): Unavailable[] {
    const gaps: Unavailable[] = [];
    if (!this.x402.available) {
      gaps.push({ protocol: 'x402', method: 'exact', missing: ['X402_PAY_TO'], reason: 'x402 payments need the address to pay (X402_PAY_TO).' });
    }
    return [...gaps, ...this.mpp.unavailable];
  }

  /** The x402 half of a plain 402 never changes for a resource: encoded once. */
  private plainRequirements(operation: PaidOperation, url: string) {
    const key = `${operation} ${url}`;
    let cached = this.requirementsCache.get(key);
    if (!cached) {
      const required = this.x402.paymentRequired(operation, url);
      cached = { required, header: required.accepts.length > 0 ? encodePaymentRequiredHeader(required) : undefined };
      this.requirementsCache.set(key, cached);
    }
    return cached;
  }

  /**
   * The 402: x402 requirements (header and body) and one MPP challenge per offer, as one
   * problem. `cause` replaces the plain "payment required" when a proof was refused.
   */
  async paymentRequired(request: PaidRequest, cause?: Problem): Promise<Problem> {
    const sheet = priceSheets[request.operation];
    const plain = cause ? undefined : this.plainRequirements(request.operation, request.url);
    const required = plain?.required ?? this.x402.paymentRequired(request.operation, request.url, cause?.detail);
    const challenges = await this.mpp.challenges(request.operation);
    const headers: Record<string, string | string[]> = { 'cache-control': 'no-store', ...(cause?.headers ?? {}) };
    if (required.accepts.length > 0) headers['payment-required'] = plain?.header ?? encodePaymentRequiredHeader(required);
    if (challenges.length > 0) headers['www-authenticate'] = challenges;
    const gaps = this.gaps;
    const howTo = `${sheet.description}: USD ${(sheet.usdCents / 100).toFixed(2)}. Pay with x402 (PAYMENT-SIGNATURE) or MPP (Authorization: Payment), or call with an access token from /api/agent/register.`;
    const detail = cause ? cause.detail : required.accepts.length + challenges.length > 0 ? howTo : `${howTo} No payment method is configured on this deployment: ${gaps.map((g) => g.reason).join(' ')}`;
    return new Problem(cause && cause.status === 402 ? cause.slug : 'payment-required', detail, {
      headers,
      extensions: {
        ...(cause?.extensions ?? {}),
        x402Version: required.x402Version,
        resource: required.resource,
        accepts: required.accepts,
        ...(gaps.length > 0 ? { unavailable: gaps } : {}),
      },
    });
  }

  /** Takes an x402 PAYMENT-SIGNATURE: offline checks, the claim, then the facilitator's verification. */
  async acceptX402(header: string, request: PaidRequest): Promise<AcceptedPayment> {
    const decoded = this.x402.decode(header, request.operation);
    const id = newId('pay');
    const now = nowIso();
    const claimed = await this.store.claim({
      ...this.ledgerRow(id, request, now),
      proof_key: `x402:${decoded.requirements.network}:${decoded.payer}:${decoded.nonce}`,
      protocol: 'x402',
      method: `exact:${decoded.requirements.network}`,
      intent: 'charge',
      amount: decoded.requirements.amount,
      currency: decoded.requirements.asset,
      payer: decoded.payer,
      proof: JSON.stringify({ payload: decoded.payload, requirements: decoded.requirements }),
    });
    if (!claimed) {
      throw new Problem('verification-failed', 'This payment authorisation (payer and nonce) has already been used for another request.', {
        extensions: { reason: 'proof_already_used' },
      });
    }
    try {
      await this.x402.verify(decoded.payload, decoded.requirements);
    } catch (err) {
      await this.recordRefusal(id, err);
      throw err;
    }
    await this.store.update(id, { status: 'verified' }, nowIso());
    return { protocol: 'x402', id, payer: decoded.payer, x402: { ...decoded, amount: decoded.requirements.amount } };
  }

  /** Takes an MPP credential: offline checks (HMAC, operation, expiry), the claim, then the method's verification. */
  async acceptMpp(header: string, request: PaidRequest): Promise<AcceptedPayment> {
    const credential = this.mpp.precheck(header, request.operation, this.mppSecret);
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
      payment = await this.mpp.verify(credential, request.operation);
    } catch (err) {
      await this.recordRefusal(id, err);
      throw err;
    }
    await this.store.update(id, { status: 'verified', reference: payment.receipt.reference ?? null }, nowIso());
    return { protocol: 'mpp', id, payer: payment.payer ?? `challenge:${payment.challengeId}`, mpp: payment };
  }

  /** After the handler: settle what it earned, or take nothing / give it back. */
  async finish(payment: AcceptedPayment, succeeded: boolean, resultRef: string | null): Promise<Finish> {
    return payment.protocol === 'x402' ? this.finishX402(payment, succeeded, resultRef) : this.finishMpp(payment, succeeded, resultRef);
  }

  /** Settlements left unknown (timeouts) asked again; the facilitator's answer on a reused nonce says it went through. */
  async reconcile(olderThanMs = 30_000): Promise<number> {
    const rows = await this.store.pending(new Date(Date.now() - olderThanMs).toISOString(), RECONCILE_BATCH);
    for (const row of rows) await this.reconcileOne(row);
    return rows.length;
  }

  listForStore(storeDomain: string, limit = 100) {
    return this.store.listForStore(storeDomain, limit).then((rows) => rows.map(presentPayment));
  }

  private async finishX402(payment: Extract<AcceptedPayment, { protocol: 'x402' }>, succeeded: boolean, resultRef: string | null): Promise<Finish> {
    if (!succeeded) {
      // Never settled, so the authorisation took nothing and may pay for a retry.
      await this.store.release(payment.id, { status: 'cancelled', error: 'the request failed; not settled' }, nowIso());
      return { headers: {} };
    }
    await this.store.update(payment.id, { result_ref: resultRef }, nowIso());
    const outcome = await this.x402.settle(payment.x402.payload, payment.x402.requirements);
    if (outcome.kind === 'settled') {
      await this.store.update(payment.id, { status: 'settled', reference: outcome.response.transaction }, nowIso());
      return { headers: { 'payment-response': encodePaymentResponseHeader(outcome.response) } };
    }
    if (outcome.kind === 'unknown') {
      // The work is done and the payment may well go (or have gone) through: serve, and let
      // reconciliation settle it or find out. The ledger says so meanwhile.
      await this.store.update(payment.id, { status: 'pending', error: outcome.reason }, nowIso());
      return { headers: { 'payment-status': 'pending' } };
    }
    await this.store.update(payment.id, { status: 'failed', error: `settlement refused: ${outcome.reason}` }, nowIso());
    return {
      headers: {},
      problem: new Problem('settlement-failed', `The payment was verified but its settlement was refused (${outcome.reason}); the request's result is kept in the ledger as unpaid.`, {
        extensions: { paymentId: payment.id, reason: outcome.reason, ...(resultRef ? { resultRef } : {}) },
      }),
    };
  }

  private async finishMpp(payment: Extract<AcceptedPayment, { protocol: 'mpp' }>, succeeded: boolean, resultRef: string | null): Promise<Finish> {
    if (succeeded) {
      await this.store.update(payment.id, { status: 'settled', result_ref: resultRef }, nowIso());
      return { headers: { 'payment-receipt': Receipt.serialize(payment.mpp.receipt) } };
    }
    try {
      const refund = await this.mpp.refund(payment.mpp);
      await this.store.update(payment.id, { status: refund ? 'refunded' : 'cancelled', error: refund ? `the request failed; refund ${refund}` : 'the request failed' }, nowIso());
    } catch (err) {
      // Kept visibly: an operator must refund by hand.
      await this.store.update(payment.id, { status: 'verified', error: `the request failed and the refund failed: ${(err as Error).message}` }, nowIso());
    }
    return { headers: {} };
  }

  private async reconcileOne(row: PaymentRow): Promise<void> {
    const proof = row.proof ? (JSON.parse(row.proof) as { payload: X402Payment['payload']; requirements: X402Payment['requirements'] }) : undefined;
    if (row.protocol !== 'x402' || !proof) return;
    const outcome = await this.x402.settle(proof.payload, proof.requirements);
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
