import type { PaymentRequired as X402PaymentRequired } from '@x402/core/types';
import type { FastifyInstance, FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { PROBLEM_CONTENT_TYPE, problemDocument } from '../core/http/errors.ts';
import { problemResponses } from '../core/http/openapi-responses.ts';
import type { Metrics } from '../core/metrics.ts';
import { Problem, problemTypeUri } from '../core/problems.ts';
import { PaymentPipeline, limitPayers, payerAgentId, unreadableCredential, unreadableX402Payment, type Accepted, type PaidCall, type Taken, type TransportProof } from './pipeline.ts';
import { paidWithOf, type AcceptedPayment, type PaidResource, type PaymentRequired, type PaymentService } from './service.ts';

declare module 'fastify' {
  interface FastifyRequest {
    paymentProof?: TransportProof;
    payment?: AcceptedPayment;
  }
}

/** RFC 9110 auth-scheme `Payment` (MPP); anything else in Authorization is the token check's business. */
const PAYMENT_SCHEME = /^Payment\s+/i;
/** Answers larger than this are not read for what the payment bought. */
const RESULT_READ_LIMIT = 65_536;

export interface PaymentGateOptions {
  payments: PaymentService;
  baseUrl: string;
  /** How many requests a payer may make per minute, as for an anonymous agent. */
  rateLimitPerMinute: number;
  /** Where payment outcomes are counted. */
  metrics?: Metrics;
}

/**
 * Pay per request on the routes whose config names a `payment` operation, over HTTP: the
 * pipeline (pipeline.ts) decides; this plugin reads the proof from the headers and writes the
 * decisions back as headers and problem+json. After the access-token check (a caller with a
 * token pays nothing), the rate limits and the Idempotency-Key (a replayed request is not
 * charged twice):
 * - onRequest: no token and no proof → 402 with every offer, before the body is even read;
 * - preParsing (the rate-limit gate): a request with a proof and no token counts against its
 *   client address's `payment` policy, before anything looks at the proof;
 * - preHandler (once the body is valid and the key claimed, so neither a bad request nor a
 *   replay is charged): the proof is accepted, and the payer becomes the request's caller;
 * - onSend: settled only if the handler succeeded, with the receipt header; otherwise nothing
 *   is taken, or it is given back.
 */
export function paymentGate(options: PaymentGateOptions): FastifyPluginAsync {
  return fp(
    async (app) => {
      await options.payments.ready();
      installGate(app, options);
    },
    { name: 'payment-gate', dependencies: ['identity-gate', 'idempotency-gate'], fastify: '5.x' },
  );
}

/** The protocols' header codecs: MPP's from `mppx`, x402's from `@x402/core`. */
interface PaymentCodecs {
  Credential: typeof import('mppx').Credential;
  Receipt: typeof import('mppx').Receipt;
  x402: typeof import('@x402/core/http');
}

let codecs: Promise<PaymentCodecs> | undefined;

/**
 * Loaded with the first request a paid route answers without a token, beside the engines that
 * request needs anyway: `mppx` brings viem, and a process no agent pays through never loads either.
 */
function paymentCodecs(): Promise<PaymentCodecs> {
  return (codecs ??= Promise.all([import('mppx'), import('@x402/core/http')]).then(([{ Credential, Receipt }, x402]) => ({ Credential, Receipt, x402 })));
}

function installGate(app: FastifyInstance, { payments, baseUrl, rateLimitPerMinute, metrics }: PaymentGateOptions): void {
  const pipeline = new PaymentPipeline(payments, rateLimitPerMinute, metrics);
  const accepted = new WeakMap<FastifyRequest, Accepted>();
  // Payers are limited as anonymous agents are, once their proof names them (over MCP too: same
  // service). The limiter is looked up when used: the rate-limit gate, one of the shared gates,
  // need not be registered before this one, and an app without it counts no payer.
  limitPayers(payments, async (protocol, payer, how) => {
    if (!app.hasDecorator('rateLimits')) return;
    await app.rateLimits.countCaller({ agentId: payerAgentId(protocol, payer), rateLimitPerMinute }, app.log, how);
  });
  const asProblem = paymentRequiredProblems();
  const sendPlainDemand = plainDemandAnswers(asProblem, baseUrl);

  const resourceOf = (request: FastifyRequest): PaidResource => ({
    operation: request.routeOptions.config.payment!.operation,
    url: `${baseUrl}${pathOf(request)}`,
  });
  const callOf = (request: FastifyRequest): PaidCall => ({
    ...resourceOf(request),
    terms: request.routeOptions.config.payment!,
    input: request.body,
    method: request.method,
    path: pathOf(request),
    requestId: request.id,
  });

  const demandPayment = async (request: FastifyRequest, reply: FastifyReply) => {
    if (request.caller) return;
    const codecs = await paymentCodecs();
    const proof = proofOf(request, codecs);
    if (proof) {
      request.paymentProof = proof;
    } else if (request.headers['x-payment'] !== undefined) {
      throw asProblem(await pipeline.demand(resourceOf(request), x402VersionOne()), codecs);
    } else {
      // The common case for agents finding their way: answered here, not through the error path.
      return sendPlainDemand(request, reply, await pipeline.demand(resourceOf(request)), codecs);
    }
  };

  const acceptPayment = async (request: FastifyRequest) => {
    const proof = request.paymentProof;
    if (request.caller || !proof) return;
    const decision = await pipeline.accept(callOf(request), proof);
    if (decision.kind === 'payment-required') throw asProblem(decision, await paymentCodecs());
    if (decision.kind === 'refused') throw decision.problem;
    accepted.set(request, decision);
    request.payment = decision.payment;
    const paidWith = paidWithOf(decision.payment);
    if (paidWith) request.paidWith = paidWith;
    request.caller = decision.caller;
  };

  const finishPayment = async (request: FastifyRequest, reply: FastifyReply, payload: unknown) => {
    const paid = accepted.get(request);
    if (!paid) return payload;
    accepted.delete(request);
    request.payment = undefined;
    const finished = await pipeline.finish(paid, reply.statusCode < 400 ? { succeeded: true, result: answerOf(payload) } : { succeeded: false });
    if (finished.kind === 'undone') return payload;
    const codecs = await paymentCodecs();
    if (finished.kind !== 'payment-required') {
      for (const [name, value] of Object.entries(settlementHeaders(finished, codecs))) reply.header(name, value);
      return payload;
    }
    // Refused after all: a 402 like any other, with fresh offers to pay again.
    const refusal = asProblem(finished, codecs);
    for (const [name, value] of Object.entries(refusal.headers)) reply.header(name, value);
    reply.code(refusal.status).type(PROBLEM_CONTENT_TYPE);
    return JSON.stringify(problemDocument(request, refusal, baseUrl));
  };

  app.addHook('onRoute', (route) => {
    if (!route.config?.payment) return;
    // Priced only by a declaration: one the price list lacks fails here, at start-up.
    payments.prices.of(route.config.payment.operation);
    route.config.rateLimitByAddressWithoutCaller ??= 'payment';
    route.onRequest = [...[route.onRequest ?? []].flat(), demandPayment];
    route.preHandler = [...[route.preHandler ?? []].flat(), acceptPayment];
    // Before the Idempotency-Key stores the answer, so a settlement that fails is not replayed as a success.
    route.onSend = [finishPayment, ...[route.onSend ?? []].flat()];
    const schema = (route.schema ??= {});
    schema.response = { ...problemResponses(402), ...(schema.response as object) };
  });
}

function pathOf(request: FastifyRequest): string {
  return request.url.split('?')[0]!;
}

/** The proof in the headers, decoded: x402's PAYMENT-SIGNATURE, or MPP's `Authorization: Payment`. */
function proofOf(request: FastifyRequest, { Credential, x402 }: PaymentCodecs): TransportProof | undefined {
  const signature = request.headers['payment-signature'];
  const authorization = request.headers.authorization;
  if (typeof signature === 'string' && signature.length > 0) {
    try {
      return { kind: 'x402', payload: x402.decodePaymentSignatureHeader(signature) };
    } catch {
      return { kind: 'unreadable', refusal: unreadableX402Payment() };
    }
  }
  if (authorization && PAYMENT_SCHEME.test(authorization)) {
    try {
      const scheme = Credential.extractPaymentScheme(authorization);
      if (scheme) return { kind: 'mpp', credential: Credential.deserialize(scheme) };
    } catch {
      // Refused below, as unreadable.
    }
    return { kind: 'unreadable', refusal: unreadableCredential() };
  }
  return undefined;
}

function x402VersionOne(): Problem {
  return new Problem('malformed-credential', 'X-PAYMENT is x402 version 1; this service takes version 2: send PAYMENT-SIGNATURE built from the PAYMENT-REQUIRED header.');
}

/** The handler's answer, read back for what the payment bought; nothing when it cannot be. */
function answerOf(payload: unknown): unknown {
  if (typeof payload !== 'string' || payload.length > RESULT_READ_LIMIT) return undefined;
  try {
    return JSON.parse(payload);
  } catch {
    return undefined;
  }
}

/**
 * A payment-required decision as the 402 problem: x402's requirements in PAYMENT-REQUIRED and
 * the body, MPP's challenges in WWW-Authenticate. The requirements of a plain 402 are the same
 * object every time, so their header is encoded once.
 */
function paymentRequiredProblems(): (required: PaymentRequired, codecs: PaymentCodecs) => Problem {
  const encoded = new WeakMap<X402PaymentRequired, string>();
  const requirementsHeader = (x402: X402PaymentRequired, codecs: PaymentCodecs) => {
    let header = encoded.get(x402);
    if (header === undefined) {
      header = codecs.x402.encodePaymentRequiredHeader(x402);
      encoded.set(x402, header);
    }
    return header;
  };
  return ({ x402, challenges, unavailable, reason }, codecs) => {
    const headers: Record<string, string | string[]> = { 'cache-control': 'no-store', ...reason.headers };
    if (x402.accepts.length > 0) headers['payment-required'] = requirementsHeader(x402, codecs);
    if (challenges.length > 0) headers['www-authenticate'] = challenges.map((challenge) => challenge.serialize());
    return new Problem(reason.slug, reason.detail, {
      headers,
      extensions: {
        ...reason.extensions,
        x402Version: x402.x402Version,
        resource: x402.resource,
        accepts: x402.accepts,
        ...(unavailable.length > 0 ? { unavailable } : {}),
      },
    });
  };
}

/**
 * The plain 402 (no proof sent), the answer every agent finding its way gets: its document and
 * headers are the same for every request to one resource but for the path, the request id and
 * the MPP challenges (signed per answer), so the rest is serialised once per offer set and the
 * answer is put together from strings, without a Problem or a serialiser per request. Byte for
 * byte what `sendProblem` would send.
 */
function plainDemandAnswers(asProblem: ReturnType<typeof paymentRequiredProblems>, baseUrl: string) {
  interface Built {
    reason: Problem;
    head: string;
    tail: string;
    headers: Record<string, string | string[]>;
  }
  const built = new WeakMap<X402PaymentRequired, Built>();
  const build = (required: PaymentRequired, codecs: PaymentCodecs): Built => {
    const problem = asProblem({ ...required, challenges: [] }, codecs);
    const head = JSON.stringify({ type: problemTypeUri(baseUrl, problem.slug), title: problem.title, status: problem.status, detail: problem.detail });
    const extensions = JSON.stringify(problem.extensions);
    return { reason: required.reason, head: head.slice(0, -1), tail: extensions === '{}' ? '}' : `,${extensions.slice(1)}`, headers: problem.headers };
  };
  return (request: FastifyRequest, reply: FastifyReply, required: PaymentRequired, codecs: PaymentCodecs) => {
    let answer = built.get(required.x402);
    if (!answer || answer.reason !== required.reason) {
      answer = build(required, codecs);
      built.set(required.x402, answer);
    }
    reply.headers(answer.headers);
    if (required.challenges.length > 0) reply.header('www-authenticate', required.challenges.map((challenge) => challenge.serialize()));
    reply.header('x-request-id', request.id);
    reply.code(402).type(PROBLEM_CONTENT_TYPE);
    return reply.send(`${answer.head},"instance":${JSON.stringify(pathOf(request))},"requestId":${JSON.stringify(request.id)}${answer.tail}`);
  };
}

/** The settlement as each protocol's client reads it from the answer's headers. */
function settlementHeaders(settlement: Taken, { Receipt, x402 }: PaymentCodecs): Record<string, string> {
  if (settlement.kind === 'pending') return { 'payment-status': 'pending' };
  const { receipt } = settlement;
  return receipt.protocol === 'x402' ? { 'payment-response': x402.encodePaymentResponseHeader(receipt.response) } : { 'payment-receipt': Receipt.serialize(receipt.receipt) };
}
