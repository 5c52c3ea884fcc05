import type { FastifyInstance } from 'fastify';

/**
 * Pages whose URL carries a secret (a sign-in link, a checkout key, the shopper's page token):
 * never cached, never handed on as a referrer; optionally kept out of search engines, and out of
 * other sites' frames unless a route set its own frame policy (the dashboard inside Shopify's
 * admin). Applies to the routes of the plugin it is called in.
 */
export function keepCapabilityPagesPrivate(app: FastifyInstance, options: { noindex?: boolean; unframed?: boolean } = {}): void {
  app.addHook('onSend', async (_request, reply, payload) => {
    reply.header('cache-control', 'no-store');
    reply.header('referrer-policy', 'no-referrer');
    if (options.noindex) reply.header('x-robots-tag', 'noindex');
    if (options.unframed && !reply.hasHeader('content-security-policy')) reply.header('content-security-policy', "frame-ancestors 'none'");
    return payload;
  });
}
