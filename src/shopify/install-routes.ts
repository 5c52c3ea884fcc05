import type { FastifyInstance, FastifyReply } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { framedByShopifyAdmin, html, page } from '../core/html.ts';
import { Problem } from '../core/problems.ts';
import { shopifyShopSchema } from '../stores/schemas.ts';
import { CALLBACK_PATH, CapturedResponse, type ShopifyInstaller } from './install.ts';

/**
 * Installing the app. `/shopify/install` is the app URL: opened by the embedded app with its
 * session token, it installs by token exchange; otherwise it begins OAuth, unless Shopify signed
 * the request for a store already connected. `/shopify/token-exchange` takes the session token
 * from the embedded app's own requests.
 */
export function installRoutes(options: { installer: ShopifyInstaller; apiKey: string }) {
  const { installer, apiKey } = options;
  return async function (app: FastifyInstance) {
    const routes = app.withTypeProvider<ZodTypeProvider>();

    routes.get('/shopify/install', {
      config: { page: true },
      schema: {
        hide: true,
        // Shopify adds hmac, host, timestamp (and id_token for an embedded app) when it opens the app URL.
        querystring: z.object({ shop: shopifyShopSchema, id_token: z.string().max(8192).optional() }).catchall(z.string().max(2048)),
      },
      handler: async (request, reply) => {
        const shop = request.query.shop.toLowerCase();
        if (request.query.id_token) {
          await installer.openEmbedded(request.query.id_token, shop);
          // Inside the admin the app is the store's dashboard, whose pages take the same token.
          return reply.header('content-security-policy', framedByShopifyAdmin(shop)).redirect(`/dashboard?${adminQuery(shop, request.query)}`, 303);
        }
        // The app URL is also where Shopify sends the merchant after the callback: beginning
        // OAuth again there would go round in circles.
        if ((await installer.isSignedByShopify(request.query)) && (await installer.isConnected(shop))) {
          return connectedPage(reply, shop, apiKey, request.query.host);
        }
        return sendCaptured(reply, await installer.beginOAuth(shop, request.raw));
      },
    });

    routes.get(CALLBACK_PATH, {
      config: { page: true },
      schema: { hide: true },
      handler: async (request, reply) => {
        const response = new CapturedResponse();
        const installed = await installer.installWithOAuth(request.raw, response);
        copyHeaders(reply, response);
        // Back into the store's admin, where the app now opens.
        return reply.redirect(`https://${installed.shop}/admin/apps/${encodeURIComponent(apiKey)}`, 302);
      },
    });

    routes.post('/shopify/token-exchange', {
      schema: { hide: true },
      handler: async (request, reply) => {
        const installed = await installer.installWithTokenExchange(bearerToken(request.headers.authorization));
        return reply.header('cache-control', 'no-store').send({
          shop: installed.shop,
          status: 'installed',
          scopes: installed.scopes,
        });
      },
    });
  };
}

/** What the admin put on the app's URL that the dashboard's pages carry on: `embedded`, `shop`, `host`, `id_token`. */
function adminQuery(shop: string, query: Record<string, string | undefined>): URLSearchParams {
  const carried = new URLSearchParams({ embedded: '1', shop });
  if (query.host) carried.set('host', query.host);
  if (query.id_token) carried.set('id_token', query.id_token);
  return carried;
}

/**
 * What the merchant sees when the app opens in their admin without a session token; framed only by
 * their admin, and loading App Bridge like every page there. Its link opens the dashboard inside
 * the admin, where App Bridge supplies the token.
 */
function connectedPage(reply: FastifyReply, shop: string, apiKey: string, host: string | undefined) {
  const dashboard = `/dashboard?${adminQuery(shop, { host })}`;
  const body = html`<h1>Restock is connected</h1>
<p>${shop} is connected. Shoppers who ask to hear about a sold-out product are e-mailed when it is back in stock.</p>
<p><a class="button" href="${dashboard}">Open the dashboard</a></p>`;
  return reply
    .header('content-security-policy', framedByShopifyAdmin(shop))
    .header('cache-control', 'no-store')
    .type('text/html; charset=utf-8')
    .send(page('Restock', body, { appBridge: { apiKey } }));
}

function bearerToken(header: string | undefined): string {
  const match = header?.match(/^Bearer ([A-Za-z0-9._~+/=-]+)$/i);
  if (!match?.[1]) {
    throw new Problem('invalid-token', 'Send the App Bridge session token as `Authorization: Bearer <token>`.');
  }
  return match[1];
}

function copyHeaders(reply: FastifyReply, response: CapturedResponse): void {
  for (const [name, value] of response.headerEntries()) reply.header(name, value);
}

function sendCaptured(reply: FastifyReply, response: CapturedResponse) {
  copyHeaders(reply, response);
  return reply.code(response.statusCode).send(response.body === '' ? undefined : response.body);
}
