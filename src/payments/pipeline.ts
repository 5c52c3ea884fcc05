import type { Caller } from '../core/http/caller.ts';
import { noMetrics, type Metrics, type PaymentOutcome, type PaymentProtocolLabel } from '../core/metrics.ts';
import { Problem, ValidationFailed } from '../core/problems.ts';
import type { BoundPaidTerms } from '../core/operations.ts';
import { paidWithOf, type AcceptedPayment, type PaidRequest, type PaidResource, type PayerLimit, type PaymentProof, type PaymentRequired, type PaymentService, type Settlement } from './service.ts';

/** A call to a paid operation, whatever transport carried it. */
export interface PaidCall extends PaidResource {
  /** The operation's declared terms of payment, with its service bound. */
  terms: BoundPaidTerms;
  /** The operation's validated input: the HTTP body, or the MCP tool's arguments (the same schema). */
  input: unknown;
  /** How the ledger names the request paid for. */
  method: string;
  path: string;
  requestId: string;
}

/** A proof as a transport hands it over: decoded, or unreadable, with the reason to give. */
export type TransportProof = PaymentProof | { kind: 'unreadable'; refusal: Problem };

/** A credential its transport could not read, whichever transport carried it. */
export function unreadableCredential(): Problem {
  return new Problem('malformed-credential', 'The `Authorization: Payment` credential is not base64url JSON with a challenge and a payload.');
}

/** A proof that is not an x402 v2 payment payload, whichever transport carried it. */
export function unreadableX402Payment(): Problem {
  return new Problem('malformed-credential', 'PAYMENT-SIGNATURE is not base64 JSON of an x402 v2 payment payload (`x402Version`, `accepted`, `payload`).');
}

/** Refused without offers: the input is not one the price covers, or the refusal is not the payer's to fix by paying. */
export interface Refused {
  kind: 'refused';
  problem: Problem;
}

/** A proof taken: the handler runs as `caller`, then `finish` settles or undoes the payment. */
export interface Accepted {
  kind: 'accepted';
  call: PaidCall;
  payment: AcceptedPayment;
  caller: Caller;
}

/** How the handler ended: its result (for the ledger), or a failure. */
export type HandlerOutcome = { succeeded: true; result: unknown } | { succeeded: false };

/** A settlement that let the answer through: taken, with its receipt, or pending. */
export type Taken = Exclude<Settlement, { kind: 'refused' }>;

/** After the handler: taken (or pending), given back, or refused after all with fresh offers. */
export type Finish = Taken | { kind: 'undone' } | PaymentRequired;

/**
 * Each payment service's payer limit. The limiter belongs to the HTTP app (its rate-limit gate),
 * which the payment gate installs here; every pipeline over the same service finds it, so a paid
 * MCP tool call is limited per payer as a paid route is.
 */
const payerLimits = new WeakMap<PaymentService, PayerLimit>();

export function limitPayers(service: PaymentService, limit: PayerLimit): void {
  payerLimits.set(service, limit);
}

export interface Served<T> {
  kind: 'served';
  result: T;
  settlement: Taken;
}

/**
 * Pay per request, the one lifecycle every paid operation goes through whatever its transport:
 * - demand: no proof, so every offer;
 * - accept: the operation's declaration admits the input and its feature's rule allows it
 *   (before any charge), the proof is claimed in the ledger and verified; a refused proof gets
 *   fresh offers and the reason;
 * - the handler runs as the payer;
 * - finish: settled with a receipt if the handler succeeded, otherwise nothing is taken or it is
 *   given back; a settlement refused turns the answer into fresh offers.
 * Transports decode their proof into a `TransportProof` and write the decisions back; the HTTP
 * gate calls the steps from its hooks, the MCP tools call `pay`, which runs them all.
 */
export class PaymentPipeline {
  constructor(
    private readonly service: PaymentService,
    private readonly payerRateLimitPerMinute: number,
    /** Where each step's outcome is counted, by protocol. */
    private readonly metrics: Metrics = noMetrics,
  ) {}

  /** No proof (or none this service reads): every offer, with `reason` when one came. */
  demand(resource: PaidResource, reason?: Problem): Promise<PaymentRequired> {
    this.metrics.paymentOutcome('none', 'challenged');
    return this.service.paymentRequired(resource, reason);
  }

  async accept(call: PaidCall, proof: TransportProof): Promise<Accepted | PaymentRequired | Refused> {
    const protocol: PaymentProtocolLabel = proof.kind === 'unreadable' ? 'unknown' : proof.kind;
    const admitted = call.terms.admits(call.input);
    if (admitted !== true) return this.counted(protocol, 'refused', { kind: 'refused', problem: new ValidationFailed([admitted]) });
    const refused = await this.refusedBeforeCharge(call);
    if (refused) return this.counted(protocol, 'refused', refused);
    if (proof.kind === 'unreadable') return this.counted(protocol, 'rejected', await this.refusal(call, proof.refusal));
    const acceptance = await this.service.accept(proof, ledgerRequest(call), payerLimits.get(this.service));
    if (acceptance.kind === 'refused') return this.counted(protocol, 'rejected', await this.refusal(call, acceptance.refusal));
    const { payment } = acceptance;
    return { kind: 'accepted', call, payment, caller: payerCaller(payment, this.payerRateLimitPerMinute) };
  }

  async finish(accepted: Accepted, outcome: HandlerOutcome): Promise<Finish> {
    if (outcome.succeeded) return this.settle(accepted, outcome.result);
    await this.service.undo(accepted.payment);
    return this.counted(accepted.payment.protocol, 'undone', { kind: 'undone' });
  }

  /** The whole lifecycle around `handler`, for a transport that runs the handler itself. A handler's failure is thrown once the payment is undone. */
  async pay<T>(call: PaidCall, proof: TransportProof | undefined, handler: (payer: Caller, paidWith: AcceptedPayment['protocol'] | undefined) => Promise<T>): Promise<Served<T> | PaymentRequired | Refused> {
    // The input is at hand before any offer here: a call no payment could buy is told so first.
    if (!proof) {
      const refused = await this.refusedBeforeCharge(call);
      return refused ? this.counted('none', 'refused', refused) : this.demand(call);
    }
    const accepted = await this.accept(call, proof);
    if (accepted.kind !== 'accepted') return accepted;
    let result: T;
    try {
      result = await handler(accepted.caller, paidWithOf(accepted.payment));
    } catch (err) {
      await this.finish(accepted, { succeeded: false });
      throw err;
    }
    const settled = await this.settle(accepted, result);
    if (settled.kind === 'payment-required') return settled;
    return { kind: 'served', result, settlement: settled };
  }

  /** The owning module's own refusal of the input, made before any proof is looked at. */
  private async refusedBeforeCharge(call: PaidCall): Promise<Refused | undefined> {
    try {
      await call.terms.beforeCharge(call.input);
      return undefined;
    } catch (err) {
      if (err instanceof Problem) return { kind: 'refused', problem: err };
      throw err;
    }
  }

  private async settle(accepted: Accepted, result: unknown): Promise<Taken | PaymentRequired> {
    const reference = resultReference(accepted.call.terms, result);
    const settlement = await this.service.settle(accepted.payment, reference);
    this.metrics.paymentOutcome(accepted.payment.protocol, settlement.kind === 'refused' ? 'settle-refused' : settlement.kind);
    if (settlement.kind !== 'refused') return settlement;
    return this.service.paymentRequired(accepted.call, settlement.refusal);
  }

  private counted<T>(protocol: PaymentProtocolLabel, outcome: PaymentOutcome, result: T): T {
    this.metrics.paymentOutcome(protocol, outcome);
    return result;
  }

  /** A refused proof gets fresh offers with the reason, as both protocols expect; a refusal that paying again cannot fix (a method not offered, a network down) does not. */
  private async refusal(resource: PaidResource, refusal: Problem): Promise<PaymentRequired | Refused> {
    if (refusal.status === 402) return this.service.paymentRequired(resource, refusal);
    return { kind: 'refused', problem: refusal };
  }
}

/** The agent id a payer acts (and is rate limited) as. */
export function payerAgentId(protocol: AcceptedPayment['protocol'], payer: string): string {
  return `payer:${protocol}:${payer}`;
}

/** Who a paid request acts as: its payer, owning what it creates, bound to no store. */
export function payerCaller(payment: AcceptedPayment, rateLimitPerMinute: number): Caller {
  return {
    agentId: payerAgentId(payment.protocol, payment.payer),
    scopes: new Set(['api:read', 'api:write']),
    storeDomain: null,
    rateLimitPerMinute,
    tokenId: payment.id,
  };
}

/** The ledger's view of the call: the store it is for is the declaration's, by its lowercased domain. */
function ledgerRequest(call: PaidCall): PaidRequest {
  const store = call.terms.storeOf(call.input);
  return {
    operation: call.operation,
    url: call.url,
    method: call.method,
    path: call.path,
    requestId: call.requestId,
    storeDomain: typeof store === 'string' ? store.toLowerCase() : null,
  };
}

/** The declared result reference; a result that is not an object (an answer that did not parse) records none. */
function resultReference(terms: BoundPaidTerms, result: unknown): string | null {
  if (typeof result !== 'object' || result === null) return null;
  const reference = terms.resultReference(result);
  return typeof reference === 'string' ? reference : null;
}
