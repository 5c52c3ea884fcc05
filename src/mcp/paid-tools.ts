import { decodePaymentResponseHeader, encodePaymentSignatureHeader } from '@x402/core/http';
import type { PaymentPayload } from '@x402/core/types';
import { Challenge, Credential, Receipt } from 'mppx';
import { Problem } from '../core/problems.ts';
import { payerCaller, refuseUnpricedRequest } from '../payments/gate.ts';
import type { PaidOperation } from '../payments/offers.ts';
import type { AcceptedPayment, PaidRequest, PaymentService } from '../payments/service.ts';
import type { Caller } from '../core/http/caller.ts';

/**
 * Paying for a tool call without a token, as the MCP payment conventions carry it:
 * - x402 (transports-v2/mcp): an unpaid call is a tool error whose `structuredContent` is the
 *   PaymentRequired and whose text is `{"x402/error": {...}}`; the payment comes in
 *   `params._meta["x402/payment"]`, the settlement goes back in `_meta["x402/payment-response"]`.
 * - MPP: the challenges in `_meta["org.paymentauth/payment-required"]`, the credential in
 *   `params._meta["org.paymentauth/credential"]`, the receipt in `_meta["org.paymentauth/receipt"]`.
 * The same ledger, claims, verification and settlement as the HTTP routes.
 */
export const X402_PAYMENT = 'x402/payment';
export const X402_PAYMENT_RESPONSE = 'x402/payment-response';
export const MPP_CREDENTIAL = 'org.paymentauth/credential';
export const MPP_PAYMENT_REQUIRED = 'org.paymentauth/payment-required';
export const MPP_RECEIPT = 'org.paymentauth/receipt';

export interface ToolResult {
  [key: string]: unknown;
  content: Array<{ type: 'text'; text: string }>;
  structuredContent?: Record<string, unknown>;
  isError?: boolean;
  _meta?: Record<string, unknown>;
}

export interface PaidCall {
  tool: string;
  operation: PaidOperation;
  input: Record<string, unknown>;
  meta: Record<string, unknown> | undefined;
  requestId: string;
}

export async function payForToolCall(
  payments: PaymentService,
  rateLimitPerMinute: number,
  call: PaidCall,
  run: (caller: Caller, paidWith: 'x402' | 'mpp') => Promise<Record<string, unknown>>,
  asError: (err: Problem) => ToolResult,
): Promise<ToolResult> {
  const request: PaidRequest = {
    operation: call.operation,
    method: 'MCP',
    path: `/mcp tools/call ${call.tool}`,
    url: `mcp://tool/${call.tool}`,
    requestId: call.requestId,
    storeDomain: typeof call.input.shop === 'string' ? call.input.shop.toLowerCase() : null,
  };
  const x402 = call.meta?.[X402_PAYMENT];
  const credential = call.meta?.[MPP_CREDENTIAL];
  if (!x402 && !credential) return paymentRequired(await payments.paymentRequired(request));

  let payment: AcceptedPayment;
  try {
    refuseUnpricedRequest(call.operation, call.input);
    payment = x402
      ? await payments.acceptX402(encodePaymentSignatureHeader(x402 as PaymentPayload), request)
      : await payments.acceptMpp(Credential.serialize(credential as Credential.Credential), request);
  } catch (err) {
    if (err instanceof Problem && err.status === 402) return paymentRequired(await payments.paymentRequired(request, err));
    if (err instanceof Problem) return asError(err);
    throw err;
  }

  let result: Record<string, unknown> | undefined;
  let failure: unknown;
  try {
    result = await run(payerCaller(payment, rateLimitPerMinute), payment.protocol);
  } catch (err) {
    failure = err;
  }
  const ref = result ? String(result.subscriptionId ?? result.sessionId ?? '') || null : null;
  const finish = await payments.finish(payment, result !== undefined, ref);
  if (failure !== undefined) {
    if (failure instanceof Problem) return asError(failure);
    throw failure;
  }
  if (finish.problem) return paymentRequired(await payments.paymentRequired(request, finish.problem));
  return { content: [{ type: 'text', text: JSON.stringify(result) }], structuredContent: result, _meta: receiptMeta(finish.headers) };
}

/** The settlement proof, as each protocol's client reads it from the result's `_meta`. */
function receiptMeta(headers: Record<string, string>): Record<string, unknown> {
  const meta: Record<string, unknown> = {};
  if (headers['payment-response']) meta[X402_PAYMENT_RESPONSE] = decodePaymentResponseHeader(headers['payment-response']);
  if (headers['payment-receipt']) meta[MPP_RECEIPT] = Receipt.deserialize(headers['payment-receipt']);
  if (headers['payment-status']) meta['org.restock/payment-status'] = headers['payment-status'];
  return meta;
}

/** The 402 of the HTTP API, as a tool error both protocols' MCP clients understand. */
function paymentRequired(problem: Problem): ToolResult {
  const { x402Version, resource, accepts, unavailable } = problem.extensions as Record<string, unknown>;
  const required = { x402Version, error: problem.detail, resource, accepts };
  const headers = problem.headers['www-authenticate'];
  const challenges = (Array.isArray(headers) ? headers : headers ? [headers] : []).map((value) => Challenge.deserialize(value));
  return {
    isError: true,
    content: [{ type: 'text', text: JSON.stringify({ 'x402/error': { code: 402, message: problem.detail, data: required } }) }],
    structuredContent: required,
    _meta: {
      [MPP_PAYMENT_REQUIRED]: {
        httpStatus: 402,
        challenges,
        problem: { type: problem.slug, title: problem.title, status: problem.status, detail: problem.detail, ...(unavailable ? { unavailable } : {}) },
      },
    },
  };
}
