import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { deliveryRoute } from '../core/connectors/delivery-route.ts';
import { html, page } from '../core/html.ts';
import { NotConfigured } from '../core/problems.ts';
import { storeInput } from '../stores/schemas.ts';
import { authCallbackSchema, CALLBACK_PATHS, WEBHOOK_PATH, type BigCommerceService } from './service.ts';

/** A webhook is a few hundred bytes: BigCommerce sends what changed, not the product. */
export const WEBHOOK_BODY_LIMIT = 64 * 1024;

const signedQuery = z.object({ signed_payload_jwt: z.string().min(1).max(8192) });

/**
 * The app's callbacks that BigCommerce calls (install, load, uninstall, remove user).
 */
export function bigCommerceRoutes(service: BigCommerceService, baseUrl: string) {
  return async function (app: FastifyInstance) {
    const api = app.withTypeProvider<ZodTypeProvider>();
    // The dashboard opens in a tab of its own: its cookies would be third-party in the control panel's frame.
    const dashboardLink = (store: string) =>
      html`<p><a href="${baseUrl}/dashboard/sign-in" target="_blank" rel="noopener">Open the Restock dashboard</a> and sign in with <strong>${store}</strong>: a link reaches the store owner's e-mail.</p>`;

    // The merchant's browser, in the control panel's frame, right after Install.
    api.get(CALLBACK_PATHS.auth, {
      config: { page: true },
      schema: { hide: true, querystring: authCallbackSchema },
      handler: async (request, reply) => {
        const store = await service.install(request.query);
        return reply.type('text/html; charset=utf-8').send(page('Restock', html`<h1>Restock is installed</h1><p>${store} now sends back-in-stock alerts as soon as a product is restocked.</p>${dashboardLink(store)}`));
      },
    });

    api.get(CALLBACK_PATHS.load, {
      config: { page: true },
      schema: { hide: true, querystring: signedQuery },
      handler: async (request, reply) => {
        const { store, connected } = await service.load(request.query.signed_payload_jwt);
        const state = connected ? html`<p>${store} sends back-in-stock alerts.</p>` : html`<p>${store} is not connected: install the app again from the control panel.</p>`;
        return reply.type('text/html; charset=utf-8').send(page('Restock', html`<h1>Restock</h1>${state}${dashboardLink(store)}`));
      },
    });

    api.get(CALLBACK_PATHS.uninstall, {
      schema: { hide: true, querystring: signedQuery },
      handler: async (request) => ({ store: await service.uninstall(request.query.signed_payload_jwt), status: 'disconnected' }),
    });

    api.get(CALLBACK_PATHS.removeUser, {
      schema: { hide: true, querystring: signedQuery },
      handler: async (request) => {
        await service.removeUser(request.query.signed_payload_jwt);
        return { status: 'ok' };
      },
    });
  };
}

/** `POST /webhooks/bigcommerce/{store}`: checked, then the product read back and reported; BigCommerce delivers again after a 503. */
export function webhookRoutes(service: BigCommerceService, baseUrl: string) {
  return deliveryRoute({
    path: WEBHOOK_PATH,
    bodyLimit: WEBHOOK_BODY_LIMIT,
    baseUrl,
    sender: 'BigCommerce',
    params: storeInput,
    receive: (shop, headers, raw) => service.receiveWebhook(shop, headers, raw),
  });
}

export const NOT_CONFIGURED = 'The BigCommerce app is not configured: set BIGCOMMERCE_CLIENT_ID and BIGCOMMERCE_CLIENT_SECRET (and RESTOCK_ENCRYPTION_KEY, which seals the stores\' tokens).';

/** The same addresses, answering 501 before reading a body, so a misconfiguration is plain to see. */
export async function notConfiguredRoutes(app: FastifyInstance): Promise<void> {
  const refuse = async () => {
    throw new NotConfigured(NOT_CONFIGURED);
  };
  const hidden = { schema: { hide: true }, onRequest: refuse, handler: refuse };
  app.get(CALLBACK_PATHS.auth, { ...hidden, config: { page: true } });
  app.get(CALLBACK_PATHS.load, { ...hidden, config: { page: true } });
  app.get(CALLBACK_PATHS.uninstall, hidden);
  app.get(CALLBACK_PATHS.removeUser, hidden);
  app.post(`${WEBHOOK_PATH}/:shop`, hidden);
}
