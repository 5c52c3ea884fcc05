import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { problemResponses } from '../core/http/openapi-responses.ts';
import { PROBLEM_CONTENT_TYPE, problemDocument, sendProblem } from '../core/http/errors.ts';
import type { Caller } from '../core/http/caller.ts';
import { Problem, ValidationFailed } from '../core/problems.ts';
import type { PaidOperation } from './offers.ts';
import type { AcceptedPayment, PaidRequest, PaymentService } from './service.ts';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Callers without an access token may pay for this route per request (x402 or MPP). */
    payment?: PaidOperation;
  }
  interface FastifyRequest {
    paymentProof?: { protocol: 'x402' | 'mpp'; header: string };
    payment?: AcceptedPayment;
  }
}

/** RFC 9110 auth-scheme `Payment` (MPP); anything else in Authorization is the token check's business. */
const PAYMENT_SCHEME = /^Payment\s+/i;

export interface PaymentGateOptions {
  baseUrl: string;
  /** How many requests a payer may make per minute, as for an anonymous agent. */
  rateLimitPerMinute: number;
}

/**
 * Pay per request on the routes whose config names a `payment` operation (install after the
 * access-token check and Idempotency-Key, before the routes register):
 * - onRequest: no token and no proof → 402 with every offer, before the body is even read;
 * - preHandler (after the body is valid and the Idempotency-Key is claimed, so neither a bad
 *   request nor a replayed one is charged): the proof is claimed in the ledger and verified,
 *   and the payer becomes the request's caller;
 * - onSend: settled only if the handler succeeded, with the receipt header; otherwise nothing
 *   is taken, or it is given back.
 */
export function installPaymentGate(app: FastifyInstance, service: PaymentService, options: PaymentGateOptions): void {
  const paidRequest = (request: FastifyRequest): PaidRequest => {
    const body = request.body as { shop?: unknown } | undefined;
    const path = request.url.split('?')[0]!;
    return {
      operation: request.routeOptions.config.payment!,
      method: request.method,
      path,
      url: `${options.baseUrl}${path}`,
      requestId: request.id,
      storeDomain: typeof body?.shop === 'string' ? body.shop.toLowerCase() : null,
    };
  };

  const demandPayment = async (request: FastifyRequest, reply: FastifyReply) => {
    if (request.caller) return;
    const signature = request.headers['payment-signature'];
    const authorization = request.headers.authorization;
    if (typeof signature === 'string' && signature.length > 0) {
      request.paymentProof = { protocol: 'x402', header: signature };
    } else if (authorization && PAYMENT_SCHEME.test(authorization)) {
      request.paymentProof = { protocol: 'mpp', header: authorization };
    } else if (request.headers['x-payment'] !== undefined) {
      throw await service.paymentRequired(
        paidRequest(request),
        new Problem('malformed-credential', 'X-PAYMENT is x402 version 1; this service takes version 2: send PAYMENT-SIGNATURE built from the PAYMENT-REQUIRED header.'),
      );
    } else {
      // The common case for agents finding their way: answered here, not through the error path.
      return sendProblem(request, reply, await service.paymentRequired(paidRequest(request)), options.baseUrl);
    }
  };

  const acceptPayment = async (request: FastifyRequest) => {
    const proof = request.paymentProof;
    if (request.caller || !proof) return;
    const paid = paidRequest(request);
    refuseUnpricedRequest(paid.operation, request.body);
    let payment: AcceptedPayment;
    try {
      payment = proof.protocol === 'x402' ? await service.acceptX402(proof.header, paid) : await service.acceptMpp(proof.header, paid);
    } catch (err) {
      // A refused proof gets fresh offers with the reason, as both protocols expect.
      if (err instanceof Problem && err.status === 402) throw await service.paymentRequired(paid, err);
      throw err;
    }
    request.payment = payment;
    request.caller = payerCaller(payment, options.rateLimitPerMinute);
  };

  const settlePayment = async (request: FastifyRequest, reply: FastifyReply, payload: unknown) => {
    const payment = request.payment;
    if (!payment) return payload;
    request.payment = undefined;
    const succeeded = reply.statusCode < 400;
    const outcome = await service.finish(payment, succeeded, succeeded ? resultReference(payload) : null);
    for (const [name, value] of Object.entries(outcome.headers)) reply.header(name, value);
    if (!outcome.problem) return payload;
    // Refused after all: a 402 like any other, with fresh offers to pay again.
    const refusal = await service.paymentRequired(paidRequest(request), outcome.problem);
    for (const [name, value] of Object.entries(refusal.headers)) reply.header(name, value);
    reply.code(refusal.status).type(PROBLEM_CONTENT_TYPE);
    return JSON.stringify(problemDocument(request, refusal, options.baseUrl));
  };

  app.addHook('onRoute', (route) => {
    if (!route.config?.payment) return;
    route.onRequest = [...[route.onRequest ?? []].flat(), demandPayment];
    route.preHandler = [...[route.preHandler ?? []].flat(), acceptPayment];
    // Before the Idempotency-Key stores the answer, so a settlement that fails is not replayed as a success.
    route.onSend = [settlePayment, ...[route.onSend ?? []].flat()];
    const schema = (route.schema ??= {});
    schema.response = { ...problemResponses(402), ...(schema.response as object) };
  });
}

/** Who a paid request acts as: its payer, owning what it creates, bound to no store. */
export function payerCaller(payment: AcceptedPayment, rateLimitPerMinute: number): Caller {
  return {
    agentId: `payer:${payment.protocol}:${payment.payer}`,
    scopes: new Set(['api:read', 'api:write']),
    storeDomain: null,
    rateLimitPerMinute,
    tokenId: payment.id,
  };
}

/** The checkout offer prices the starter plan; a paid request for another plan is refused before any charge. */
export function refuseUnpricedRequest(operation: PaidOperation, body: unknown): void {
  if (operation !== 'checkoutPlan') return;
  const plan = (body as { plan?: unknown } | undefined)?.plan;
  if (plan !== 'starter') {
    throw new ValidationFailed([
      { pointer: '/body/plan', message: 'paying per request buys the starter plan (USD 9.99 a month); other plans are bought with an access token' },
    ]);
  }
}

/** The id of what the payment bought (a subscription, a checkout session), for the ledger. */
function resultReference(payload: unknown): string | null {
  if (typeof payload !== 'string' || payload.length > 65_536) return null;
  try {
    const body = JSON.parse(payload) as { subscriptionId?: unknown; sessionId?: unknown };
    const ref = body.subscriptionId ?? body.sessionId;
    return typeof ref === 'string' ? ref : null;
  } catch {
    return null;
  }
}
