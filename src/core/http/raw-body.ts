import type { FastifyError, FastifyInstance, FastifyRequest } from 'fastify';
import { sendProblem, toProblem } from './errors.ts';

/**
 * For the routes of one plugin that take deliveries signed over their raw bytes (Stripe's,
 * Shopify's, WooCommerce's webhooks): every body is kept as the bytes sent, whatever the
 * Content-Type says, up to `bodyLimit`, and failures are problems quoting that limit, not the
 * API's. `sender` names the deliveries in the log of a failure.
 */
export function takeRawBodies(app: FastifyInstance, options: { bodyLimit: number; baseUrl: string; sender: string }): void {
  const { bodyLimit, baseUrl, sender } = options;
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit }, (_request, body, done) => done(null, body));
  app.setErrorHandler((err: FastifyError, request, reply) => {
    const problem = toProblem(err, bodyLimit);
    if (problem.status >= 500) request.log.error({ err }, `${sender} webhook failed`);
    return sendProblem(request, reply, problem, baseUrl);
  });
}

/** The bytes of a request read by a plugin that `takeRawBodies` (none when it had no body). */
export function rawBodyOf(request: FastifyRequest): Buffer {
  return Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);
}

/** One header of a delivery (the first, when it came more than once). */
export function headerOf(headers: Record<string, string | string[] | undefined>, name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
}
