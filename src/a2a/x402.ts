import type { PaymentPayload } from '@x402/core/types';
import type { Problem } from '../core/problems.ts';
import type { Taken } from '../payments/service.ts';
import type { PaymentRequired } from '../payments/service.ts';
import { isRecord } from './skills.ts';

/**
 * The x402 payments extension for A2A, standalone flow (google-agentic-commerce/a2a-x402, spec
 * v0.2, section 7): the keys it puts in message metadata and what they carry. The SDK knows no
 * extension, so the flow is written here, over the same payment pipeline as the HTTP 402 and the
 * paid MCP tools: this file only reads the proof out of metadata and writes the decisions back.
 */
export const X402_STATUS = 'x402.payment.status';
export const X402_REQUIRED = 'x402.payment.required';
export const X402_PAYLOAD = 'x402.payment.payload';
export const X402_RECEIPTS = 'x402.payment.receipts';
export const X402_ERROR = 'x402.payment.error';

export type PaymentStatus = 'payment-required' | 'payment-submitted' | 'payment-rejected' | 'payment-verified' | 'payment-completed' | 'payment-failed';

/** What the client's message says of the payment: nothing, a payload submitted, or the offer declined. */
export type ClientPayment = { kind: 'none' } | { kind: 'submitted'; payload: PaymentPayload } | { kind: 'rejected' } | { kind: 'malformed'; message: string };

export function clientPayment(metadata: unknown): ClientPayment {
  const status = isRecord(metadata) ? metadata[X402_STATUS] : undefined;
  if (status === undefined) return { kind: 'none' };
  if (status === 'payment-rejected') return { kind: 'rejected' };
  if (status !== 'payment-submitted') {
    return { kind: 'malformed', message: `${X402_STATUS} from a client is "payment-submitted" (with ${X402_PAYLOAD}) or "payment-rejected", not ${JSON.stringify(status).slice(0, 60)}.` };
  }
  const payload = (metadata as Record<string, unknown>)[X402_PAYLOAD];
  if (!isRecord(payload)) return { kind: 'malformed', message: `"payment-submitted" needs ${X402_PAYLOAD}: the signed x402 payment payload, an object.` };
  return { kind: 'submitted', payload: payload as unknown as PaymentPayload };
}

/** The task message's metadata asking for payment: x402's PaymentRequired (v2), as the 402 and the paid MCP tools carry it. */
export function paymentRequiredMetadata({ x402, reason }: PaymentRequired): Record<string, unknown> {
  const required = { x402Version: x402.x402Version, ...(reason.slug === 'payment-required' ? {} : { error: reason.detail }), resource: x402.resource, accepts: x402.accepts };
  return { [X402_STATUS]: 'payment-required', [X402_REQUIRED]: required };
}

/** The receipts of a payment taken: the facilitator's settlement as the buyer is shown it (the PAYMENT-RESPONSE of HTTP). */
export function completedMetadata(settlement: Taken): Record<string, unknown> {
  if (settlement.kind === 'pending') return { [X402_STATUS]: 'payment-verified', [X402_RECEIPTS]: [], 'org.restock/payment-status': 'pending' };
  if (settlement.receipt.protocol !== 'x402') throw new Error('An A2A payment is settled by x402 only.');
  const { extensionResponses: _extensions, ...buyerFacing } = settlement.receipt.response;
  return { [X402_STATUS]: 'payment-completed', [X402_RECEIPTS]: [buyerFacing] };
}

/**
 * A payment refused or given back: `payment-failed`, a short code (the spec's where one fits,
 * otherwise the problem's type), and a failed receipt naming the reason. Nothing was taken.
 */
export function failedMetadata(problem: Problem, payload: PaymentPayload | undefined): Record<string, unknown> {
  const network = payload && isRecord(payload.accepted) && typeof payload.accepted.network === 'string' ? payload.accepted.network : '';
  return {
    [X402_STATUS]: 'payment-failed',
    [X402_ERROR]: ERROR_CODES[problem.slug] ?? problem.slug.toUpperCase().replace(/-/g, '_'),
    [X402_RECEIPTS]: [{ success: false, errorReason: problem.detail, network, transaction: '' }],
  };
}

/** The spec's common error codes (section 9.1), for the problems that mean the same. */
const ERROR_CODES: Partial<Record<Problem['slug'], string>> = {
  'payment-insufficient': 'INVALID_AMOUNT',
  'payment-expired': 'EXPIRED_PAYMENT',
  'settlement-failed': 'SETTLEMENT_FAILED',
};
