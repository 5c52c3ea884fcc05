import type { FastifyInstance } from 'fastify';
import { isUnavailableError } from '../core/db/dialect.ts';
import { rawBodyOf, takeRawBodies } from '../core/http/raw-body.ts';
import { ServiceUnavailable } from '../core/problems.ts';
import { storeInput } from '../stores/schemas.ts';
import type { VendureService } from './service.ts';

/** An order of a thousand lines fits well within this. */
export const DELIVERY_BODY_LIMIT = 512 * 1024;
export const DELIVERY_PATH = '/webhooks/vendure';

/** `POST /webhooks/vendure/{store}`: the plugin's deliveries, checked against the raw bytes it signed. */
export function deliveryRoutes(service: VendureService, baseUrl: string) {
  return async function (app: FastifyInstance) {
    takeRawBodies(app, { bodyLimit: DELIVERY_BODY_LIMIT, baseUrl, sender: 'The Restock plugin' });
    app.post(`${DELIVERY_PATH}/:shop`, {
      bodyLimit: DELIVERY_BODY_LIMIT,
      schema: { hide: true, params: storeInput },
      handler: async (request, reply) => {
        const { shop } = storeInput.parse(request.params);
        try {
          return reply.code(200).send(await service.receiveDelivery(shop, request.headers, rawBodyOf(request)));
        } catch (err) {
          // A 503 makes the plugin try again.
          if (isUnavailableError(err)) throw new ServiceUnavailable('The delivery could not be stored.');
          throw err;
        }
      },
    });
  };
}
