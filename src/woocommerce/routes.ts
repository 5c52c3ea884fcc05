import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { isUnavailableError } from '../core/db/dialect.ts';
import { rawBodyOf, takeRawBodies } from '../core/http/raw-body.ts';
import { problemResponses } from '../core/http/openapi-responses.ts';
import { html, page } from '../core/html.ts';
import { ServiceUnavailable } from '../core/problems.ts';
import { storeParams } from '../stores/schemas.ts';
import { keysCallbackSchema, wooKeysSchema, type WooCommerceService } from './service.ts';

/** A product with its variations, as WooCommerce renders it, fits well within this. */
export const DELIVERY_BODY_LIMIT = 1024 * 1024;
export const DELIVERY_PATH = '/webhooks/woocommerce';

const connectionSchema = z
  .object({
    storeDomain: z.string(),
    siteUrl: z.string().describe('The WooCommerce site, where /wp-json/wc/v3 is'),
    status: z.enum(['connected', 'disconnected']),
    webhookIds: z.array(z.number()).describe('The webhooks the service made on the site (product.created, product.updated, product.restored)'),
    connectedAt: z.string(),
    disconnectedAt: z.string().nullable(),
    disconnectReason: z.string().nullable(),
    reconciledAt: z.string().nullable(),
  })
  .describe("A store's connection to its WooCommerce site; its keys are never shown back");

const siteUrlSchema = z.string().max(2048).describe('The WooCommerce site, e.g. https://shop.example.com');

/**
 * A WooCommerce store's connection, for the agents bound to it (and its owner's dashboard), and
 * the two addresses the site itself calls: the keys callback and the webhook deliveries.
 */
export function wooCommerceRoutes(service: WooCommerceService, baseUrl: string) {
  return async function (app: FastifyInstance) {
    const api = app.withTypeProvider<ZodTypeProvider>();

    api.put('/api/v1/stores/:domain/woocommerce', {
      config: { scope: 'inventory:alerts' },
      schema: {
        operationId: 'connectWooCommerce',
        summary: 'Connect a WooCommerce store with REST API keys (read/write) made on its site (agents bound to the store only)',
        tags: ['stores'],
        params: storeParams,
        body: z.object({ siteUrl: siteUrlSchema, ...wooKeysSchema.shape }).strict(),
        response: { 200: connectionSchema, ...problemResponses(400, 404, 409, 413, 415, 502, 503) },
      },
      handler: async (request) => service.connectWithKeys(request.caller!, request.params.domain, request.body),
    });

    api.post('/api/v1/stores/:domain/woocommerce/authorization', {
      config: { scope: 'inventory:alerts' },
      schema: {
        operationId: 'authorizeWooCommerce',
        summary: "The address of the site's approval page: once its owner approves, the site hands the service its keys (agents bound to the store only)",
        tags: ['stores'],
        params: storeParams,
        body: z.object({ siteUrl: siteUrlSchema }).strict(),
        response: { 200: z.object({ authorizeUrl: z.string().describe("WooCommerce's /wc-auth/v1/authorize on the site, for its owner to open") }), ...problemResponses(400, 404, 409, 413, 415, 503) },
      },
      handler: async (request) => ({ authorizeUrl: await service.authorizationUrl(request.caller!, request.params.domain, request.body.siteUrl) }),
    });

    api.get('/api/v1/stores/:domain/woocommerce', {
      config: { scope: 'api:read' },
      schema: {
        operationId: 'getWooCommerceConnection',
        summary: "A store's WooCommerce connection (agents bound to the store only)",
        tags: ['stores'],
        params: storeParams,
        response: { 200: connectionSchema, ...problemResponses(400, 404) },
      },
      handler: async (request) => service.connectionFor(request.caller!, request.params.domain),
    });

    api.delete('/api/v1/stores/:domain/woocommerce', {
      config: { scope: 'inventory:alerts' },
      schema: {
        operationId: 'disconnectWooCommerce',
        summary: 'Disconnect a WooCommerce store: its webhooks are deleted and no alert is sent (agents bound to the store only)',
        tags: ['stores'],
        params: storeParams,
        response: { 200: connectionSchema, ...problemResponses(400, 404, 503) },
      },
      handler: async (request) => service.disconnect(request.caller!, request.params.domain),
    });

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

/** `POST /webhooks/woocommerce/{store}`: the raw bytes the site signed, checked, then reported. */
export function deliveryRoutes(service: WooCommerceService, baseUrl: string) {
  return async function (app: FastifyInstance) {
    takeRawBodies(app, { bodyLimit: DELIVERY_BODY_LIMIT, baseUrl, sender: 'WooCommerce' });
    app.post(`${DELIVERY_PATH}/:domain`, {
      bodyLimit: DELIVERY_BODY_LIMIT,
      schema: { hide: true, params: storeParams },
      handler: async (request, reply) => {
        const { domain } = storeParams.parse(request.params);
        try {
          return reply.code(200).send(await service.receiveDelivery(domain, request.headers, rawBodyOf(request)));
        } catch (err) {
          // Not stored: the site does not deliver again, but the next reconciliation reads the product.
          if (isUnavailableError(err)) throw new ServiceUnavailable('The delivery could not be stored.');
          throw err;
        }
      },
    });
  };
}
