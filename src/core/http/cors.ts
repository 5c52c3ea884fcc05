import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';

/**
 * The API (and the storefront widget's calls) may be called from browsers on any origin: it uses no cookies, only explicit
 * credentials (bearer tokens, payment proofs), so `*` exposes nothing a page could not send
 * itself. The payment headers are exposed so a paying page can read its offers and receipts.
 */
const EXPOSED = ['PAYMENT-REQUIRED', 'PAYMENT-RESPONSE', 'Payment-Receipt', 'Payment-Status', 'WWW-Authenticate', 'X-Request-Id', 'Idempotent-Replayed', 'Retry-After', 'RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset'].join(', ');
const ALLOWED_HEADERS = ['Authorization', 'Content-Type', 'Idempotency-Key', 'PAYMENT-SIGNATURE', 'X-Request-Id'].join(', ');

export const apiCors = fp(async (app) => installApiCors(app), { name: 'api-cors', fastify: '5.x' });

/** The API and the storefront widget's calls: the paths other sites' pages may call and read. */
export function isCrossOriginApi(url: string): boolean {
  return url === '/api' || url.startsWith('/api/') || url.startsWith('/api?') || url.startsWith('/storefront/');
}

function installApiCors(app: FastifyInstance): void {
  app.addHook('onSend', (request, reply, payload, done) => {
    if (isCrossOriginApi(request.url)) {
      reply.header('access-control-allow-origin', '*');
      reply.header('access-control-expose-headers', EXPOSED);
    }
    done(null, payload);
  });
  const preflight = async (_request: unknown, reply: import('fastify').FastifyReply) =>
    reply
      .code(204)
      .header('access-control-allow-methods', 'GET, POST, PATCH, DELETE')
      .header('access-control-allow-headers', ALLOWED_HEADERS)
      .header('access-control-max-age', '600')
      .send();
  app.options('/api', { schema: { hide: true } }, preflight);
  app.options('/api/*', { schema: { hide: true } }, preflight);
  app.options('/storefront/*', { schema: { hide: true } }, preflight);
}
