import { InvalidHmacError } from '@shopify/shopify-api';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { productIdSchema } from '../alerts/schemas.ts';
import { Problem } from '../core/problems.ts';
import { availabilityResponse, proxySubscribeBody, shopperSubscribeResponse } from '../storefront/schemas.ts';
import type { StorefrontService } from '../storefront/service.ts';
import { shopifyShopSchema } from '../stores/schemas.ts';
import type { OutboundPolicy } from '../core/net/outbound-guard.ts';
import { APP_PROXY_PATH } from './platform.ts';
import type { ShopifyApi } from './shopify-api.ts';


/**
 * The widget's two calls as the theme block makes them, on the store's own origin through
 * Shopify's app proxy. Shopify adds `shop`, `logged_in_customer_id`, `path_prefix`, `timestamp`
 * and `signature` to the query; the signature is checked (with the library) before anything else,
 * even before the body is read, and the store is taken from the signed query only. The answers
 * and the per-address limits are the storefront routes' own.
 */
export function appProxyRoutes(options: { shopify: ShopifyApi; storefront: StorefrontService; policy: OutboundPolicy }) {
  const { shopify, storefront } = options;
  const subscribeBody = proxySubscribeBody(options.policy);
  return async function (app: FastifyInstance) {
    const api = app.withTypeProvider<ZodTypeProvider>();
    const signedShops = new WeakMap<FastifyRequest, string>();
    const verify = async (request: FastifyRequest) => {
      signedShops.set(request, await shopOfProxyRequest(shopify, request.raw.url ?? ''));
    };
    const shopOf = (request: FastifyRequest) => signedShops.get(request)!;

    api.get(`${APP_PROXY_PATH}/availability`, {
      config: { rateLimitByAddress: 'storefront-read' },
      onRequest: verify,
      schema: { hide: true, querystring: z.object({ productId: productIdSchema }), response: { 200: availabilityResponse } },
      handler: async (request, reply) => {
        const answer = await storefront.availability(shopOf(request), request.query.productId);
        reply.header('cache-control', 'public, max-age=30');
        return answer;
      },
    });

    api.post(`${APP_PROXY_PATH}/subscriptions`, {
      config: { rateLimitByAddress: 'storefront' },
      onRequest: verify,
      schema: { hide: true, body: subscribeBody, response: { 201: shopperSubscribeResponse } },
      handler: async (request, reply) => reply.code(201).send(await storefront.subscribeShopper({ ...request.body, shop: shopOf(request) })),
    });
  };
}

/**
 * The store a request forwarded by Shopify's app proxy was signed for. The library checks the
 * signature (HMAC-SHA256 with the app secret over the sorted `key=value` pairs) and refuses a
 * timestamp more than 90 s away from our clock; it lets a query without any timestamp through,
 * which Shopify never sends, so that is refused here.
 */
async function shopOfProxyRequest(shopify: ShopifyApi, url: string): Promise<string> {
  const query = signedQuery(url);
  if (!query.signature) throw refused('The request carries no `signature`: it did not come through Shopify’s app proxy.');
  if (!/^[0-9]{1,12}$/.test(query.timestamp ?? '')) throw refused('The request carries no `timestamp`: Shopify signs every proxied request with one.');
  let valid: boolean;
  try {
    valid = await shopify.utils.validateHmac(query, { signator: 'appProxy' });
  } catch (err) {
    if (err instanceof InvalidHmacError) throw refused('The signature’s `timestamp` is more than 90 seconds from now.');
    throw err;
  }
  if (!valid) throw refused('The `signature` does not match the query: it was not signed by Shopify with this app’s secret.');
  const shop = shopifyShopSchema.safeParse(query.shop);
  if (!shop.success) throw new Problem('malformed-request', 'The signed query names no single store in `shop`.');
  return shop.data.toLowerCase();
}

/**
 * The query as Shopify signs it: every parameter once, a repeated one with its values joined by
 * commas (`extra=1&extra=2` is signed as `extra=1,2`).
 */
function signedQuery(url: string): Record<string, string> {
  const start = url.indexOf('?');
  const params = new URLSearchParams(start < 0 ? '' : url.slice(start + 1));
  const query: Record<string, string> = Object.create(null);
  for (const key of new Set(params.keys())) query[key] = params.getAll(key).join(',');
  return query;
}

function refused(detail: string): Problem {
  return new Problem('invalid-proxy-signature', `${detail} Nothing was changed.`);
}
