import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { deliveryRoute } from '../core/connectors/delivery-route.ts';
import { html, page } from '../core/html.ts';
import { storeInput } from '../stores/schemas.ts';
import { keysCallbackSchema, type WooCommerceService } from './service.ts';

/** A product with its variations, as WooCommerce renders it, fits well within this. */
export const DELIVERY_BODY_LIMIT = 1024 * 1024;
export const DELIVERY_PATH = '/webhooks/woocommerce';

/** The two addresses the site itself calls: the keys callback and the webhook deliveries. */
export function wooCommerceRoutes(service: WooCommerceService, baseUrl: string) {
  return async function (app: FastifyInstance) {
    const api = app.withTypeProvider<ZodTypeProvider>();

    // WooCommerce treats anything but 200 as a failure, and then deletes the keys it made.
    api.post('/woocommerce/keys', {
      schema: { hide: true, body: keysCallbackSchema },
      handler: async (request, reply) => {
        await service.acceptKeys(request.body);
        return reply.code(200).send({ status: 'connected' });
      },
    });

    // WooCommerce sends the owner here with `success` and the `user_id` we gave it; anyone can
    // make such an address, so the page says only what the connection itself shows.
    api.get('/woocommerce/connected', {
      config: { page: true },
      schema: { hide: true, querystring: z.object({ user_id: z.string().max(2048).optional() }).catchall(z.string().max(2048)) },
      handler: async (request, reply) => {
        const outcome = request.query.user_id === undefined ? undefined : await service.authorizationOutcome(request.query.user_id);
        const text =
          outcome === undefined
            ? 'The dashboard shows the WooCommerce connection of your store.'
            : outcome.connected
              ? `${outcome.store} is connected: Restock hears of every product change and sends back-in-stock alerts.`
              : `${outcome.store} is not connected: the site did not hand over working keys. Ask for a new approval to try again.`;
        return reply.type('text/html; charset=utf-8').send(page('WooCommerce', html`<h1>WooCommerce</h1><p>${text}</p><p><a href="${baseUrl}/dashboard">Open the dashboard</a></p>`));
      },
    });
  };
}

/**
 * `POST /webhooks/woocommerce/{store}`: the raw bytes the site signed, checked, then reported. A
 * delivery not stored is a 503: the site does not deliver again, but the next reconciliation
 * reads the product.
 */
export function deliveryRoutes(service: WooCommerceService, baseUrl: string) {
  return deliveryRoute({
    path: DELIVERY_PATH,
    bodyLimit: DELIVERY_BODY_LIMIT,
    baseUrl,
    sender: 'WooCommerce',
    params: storeInput,
    receive: (shop, headers, raw) => service.receiveDelivery(shop, headers, raw),
  });
}
