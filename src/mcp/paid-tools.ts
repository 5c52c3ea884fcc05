import type { PaymentPayload } from '@x402/core/types';
import type { Credential } from 'mppx';
import type { Caller } from '../core/http/caller.ts';
import type { Metrics } from '../core/metrics.ts';
import { Problem } from '../core/problems.ts';
import type { BoundPaidTerms } from '../core/operations.ts';
import { PaymentPipeline, unreadableCredential, type PaidCall, type Taken, type TransportProof } from '../payments/service.ts';
import type { PaymentRequired, PaymentService } from '../payments/service.ts';

/**
 * Paying for a tool call without a token, as the MCP payment conventions carry it:
 * - x402 (transports-v2/mcp): an unpaid call is a tool error whose `structuredContent` is the
 *   PaymentRequired and whose text is `{"x402/error": {...}}`; the payment comes in
 *   `params._meta["x402/payment"]`, the settlement goes back in `_meta["x402/payment-response"]`.
 * - MPP: the challenges in `_meta["org.paymentauth/payment-required"]`, the credential in
 *   `params._meta["org.paymentauth/credential"]`, the receipt in `_meta["org.paymentauth/receipt"]`.
 * The pipeline (src/payments/pipeline.ts) decides, as for the HTTP routes; this file reads the
 * proof from `_meta` and writes the decisions back as tool results.
 */
export const X402_PAYMENT = 'x402/payment';
export const X402_PAYMENT_RESPONSE = 'x402/payment-response';
export const MPP_CREDENTIAL = 'org.paymentauth/credential';
export const MPP_PAYMENT_REQUIRED = 'org.paymentauth/payment-required';
export const MPP_RECEIPT = 'org.paymentauth/receipt';
const PAYMENT_STATUS = 'org.restock/payment-status';

export interface ToolResult {
  [key: string]: unknown;
  content: Array<{ type: 'text'; text: string }>;
  structuredContent?: Record<string, unknown>;
  isError?: boolean;
  _meta?: Record<string, unknown>;
}

export interface PaidToolCall {
  tool: string;
  terms: BoundPaidTerms;
  input: Record<string, unknown>;
  meta: Record<string, unknown> | undefined;
  requestId: string;
}

export async function payForToolCall(
  payments: PaymentService,
  rateLimitPerMinute: number,
  call: PaidToolCall,
  run: (caller: Caller, paidWith: 'x402' | 'mpp' | undefined) => Promise<Record<string, unknown>>,
  asError: (err: Problem) => ToolResult,
  metrics?: Metrics,
): Promise<ToolResult> {
  const paid: PaidCall = {
    operation: call.terms.operation,
    terms: call.terms,
    input: call.input,
    method: 'MCP',
    path: `/mcp tools/call ${call.tool}`,
    url: `mcp://tool/${call.tool}`,
    requestId: call.requestId,
  };
  // Loaded at the first paid call, as the HTTP gate loads it: it brings viem.
  const mppx = await import('mppx');
  let outcome;
  try {
    outcome = await new PaymentPipeline(payments, rateLimitPerMinute, metrics).pay(paid, proofOf(call.meta, mppx), run);
  } catch (err) {
    if (err instanceof Problem) return asError(err);
    throw err;
  }
  switch (outcome.kind) {
    case 'payment-required':
      return paymentRequired(outcome);
    case 'refused':
      return asError(outcome.problem);
    case 'served':
      return { content: [{ type: 'text', text: JSON.stringify(outcome.result) }], structuredContent: outcome.result, _meta: receiptMeta(outcome.settlement, mppx) };
  }
}

/** The `mppx` module, loaded at the first paid call. */
type Mppx = typeof import('mppx');

/** The proof in `_meta`, decoded: an x402 payment payload (checked by the pipeline), or an MPP credential. */
function proofOf(meta: Record<string, unknown> | undefined, mppx: Mppx): TransportProof | undefined {
  const x402 = meta?.[X402_PAYMENT];
  const credential = meta?.[MPP_CREDENTIAL];
  if (x402) return { kind: 'x402', payload: x402 as PaymentPayload };
  if (!credential) return undefined;
  const read = credentialOf(credential, mppx);
  return read ? { kind: 'mpp', credential: read } : { kind: 'unreadable', refusal: unreadableCredential() };
}

/**
 * A credential given as an object, read as mppx reads one from a header: its challenge through
 * mppx's own schema, an `opaque` given as an object (older clients) turned into its string form.
 */
function credentialOf(value: unknown, { Challenge, Credential, PaymentRequest }: Mppx): Credential.Credential | undefined {
  if (!isRecord(value) || !isRecord(value.challenge) || !('payload' in value)) return undefined;
  const { opaque, meta, ...fields } = value.challenge;
  const { payload } = value;
  const source = value.source || undefined;
  if (source !== undefined && typeof source !== 'string') return undefined;
  try {
    // As on the wire: `opaque` when given, else `meta` in its string form.
    const wire = opaque ?? (meta === undefined ? undefined : PaymentRequest.serialize(meta as Record<string, unknown>));
    const bound = wire === undefined ? {} : typeof wire === 'string' ? { opaque: wire } : isStringRecord(wire) ? { meta: wire, opaque: PaymentRequest.serialize(wire) } : undefined;
    const challenge = bound && Challenge.Schema.safeParse({ ...fields, ...bound });
    if (!challenge?.success) return undefined;
    return Credential.from({ challenge: challenge.data, payload, ...(source ? { source } : {}) });
  } catch {
    return undefined;
  }
}

/** The settlement proof, as each protocol's client reads it from the result's `_meta`. */
function receiptMeta(settlement: Taken, { Receipt }: Mppx): Record<string, unknown> {
  if (settlement.kind === 'pending') return { [PAYMENT_STATUS]: 'pending' };
  const { receipt } = settlement;
  if (receipt.protocol === 'mpp') return { [MPP_RECEIPT]: Receipt.from(receipt.receipt) };
  // What the buyer is shown, as in the PAYMENT-RESPONSE header: the facilitator's extension data stays here.
  const { extensionResponses: _extensions, ...buyerFacing } = receipt.response;
  return { [X402_PAYMENT_RESPONSE]: buyerFacing };
}

/** The 402 of the HTTP API, as a tool error both protocols' MCP clients understand. */
function paymentRequired({ x402, challenges, unavailable, reason }: PaymentRequired): ToolResult {
  const required = { x402Version: x402.x402Version, error: reason.detail, resource: x402.resource, accepts: x402.accepts };
  return {
    isError: true,
    content: [{ type: 'text', text: JSON.stringify({ 'x402/error': { code: 402, message: reason.detail, data: required } }) }],
    structuredContent: required,
    _meta: {
      [MPP_PAYMENT_REQUIRED]: {
        httpStatus: 402,
        challenges: challenges.map((challenge) => challenge.toChallenge()),
        problem: { type: reason.slug, title: reason.title, status: reason.status, detail: reason.detail, ...(unavailable.length > 0 ? { unavailable } : {}) },
      },
    },
  };
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function isStringRecord(value: unknown): value is Record<string, string> {
  return isRecord(value) && Object.values(value).every((entry) => typeof entry === 'string');
}
