import type { FastifyInstance, FastifyReply } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { pushKeyResponse } from './schemas.ts';
import type { PushService } from './service.ts';

/** Where the service worker is served on our origin; through Shopify's app proxy, `/apps/restock/push/sw.js` on the store's. */
export const SERVICE_WORKER_PATH = '/push/sw.js';
/** The VAPID public key, on our origin and, through the app proxy, `/apps/restock/push/v1/key` on the store's. */
export const KEY_PATH = '/push/v1/key';

/**
 * The service worker, on our origin for the standalone tag's pages and under each platform's
 * storefront proxy (`proxies`: Shopify's app proxy) for the store's; and the VAPID public key the
 * widget subscribes with. The script is the
 * same static file for every store, so the proxied copy needs no signature check: nothing in it
 * depends on who asks. Both are public and cookie-free.
 */
export function pushRoutes(service: PushService, serviceWorker: Buffer, proxies: readonly string[] = []) {
  return async function (app: FastifyInstance) {
    const api = app.withTypeProvider<ZodTypeProvider>();
    const sendServiceWorker = async (_request: unknown, reply: FastifyReply) => serveScript(reply, serviceWorker);
    app.get(SERVICE_WORKER_PATH, { schema: { hide: true } }, sendServiceWorker);
    for (const proxy of proxies) app.get(`${proxy}${SERVICE_WORKER_PATH}`, { schema: { hide: true } }, sendServiceWorker);

    const sendKey = async (_request: unknown, reply: FastifyReply) => {
      reply.header('access-control-allow-origin', '*').header('cache-control', 'public, max-age=3600');
      return { publicKey: service.publicKey() };
    };
    api.get(KEY_PATH, {
      schema: {
        operationId: 'getPushPublicKey',
        summary: "The key a shopper's browser subscribes to web push with (for the storefront widget)",
        tags: ['storefront'],
        response: { 200: pushKeyResponse },
      },
      handler: sendKey,
    });
    // The theme block's widget is loaded from Shopify's CDN and knows only the store's origin, so
    // it reads the key through the app proxy too. The key is the same public value for every
    // store, so, like the worker, it needs no signature check.
    for (const proxy of proxies) api.get(`${proxy}${KEY_PATH}`, { schema: { hide: true, response: { 200: pushKeyResponse } }, handler: sendKey });
  };
}

/**
 * Browsers check a registered worker for updates by fetching it again (bypassing the HTTP cache
 * after a day at most); a short max-age lets a new version reach them within minutes.
 */
function serveScript(reply: FastifyReply, script: Buffer) {
  return reply
    .header('cache-control', 'public, max-age=300')
    .header('x-content-type-options', 'nosniff')
    .type('text/javascript; charset=utf-8')
    .send(script);
}
