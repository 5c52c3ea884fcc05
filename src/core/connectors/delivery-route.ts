import type { FastifyInstance } from 'fastify';
import type { z } from 'zod';
import { isUnavailableError } from '../db/dialect.ts';
import { rawBodyOf, takeRawBodies } from '../http/raw-body.ts';
import { ServiceUnavailable } from '../problems.ts';

export interface DeliveryRoute {
  /** `/webhooks/<platform>`: the store's domain follows (`…/:shop`). */
  path: string;
  bodyLimit: number;
  baseUrl: string;
  /** Who sends them, for the refusal of a body that is too large or not JSON. */
  sender: string;
  /** The store's part of the address, as the stores module checks a domain. */
  params: z.ZodType<{ shop: string }>;
  /** Checks the delivery against the raw bytes its sender signed, then takes it; answers what it came to. */
  receive(shop: string, headers: Record<string, string | string[] | undefined>, raw: Buffer): Promise<unknown>;
}

/**
 * `POST <path>/{store}`: a platform's signed deliveries, read as raw bytes (a signature covers the
 * bytes, not a re-serialised body), answered 200 with what they came to. A delivery that could not
 * be stored is a 503, which every platform that delivers again takes as "try later".
 */
export function deliveryRoute(route: DeliveryRoute) {
  return async function (app: FastifyInstance) {
    takeRawBodies(app, { bodyLimit: route.bodyLimit, baseUrl: route.baseUrl, sender: route.sender });
    app.post(`${route.path}/:shop`, {
      bodyLimit: route.bodyLimit,
      schema: { hide: true, params: route.params },
      handler: async (request, reply) => {
        const { shop } = route.params.parse(request.params);
        try {
          return reply.code(200).send(await route.receive(shop, request.headers, rawBodyOf(request)));
        } catch (err) {
          if (isUnavailableError(err)) throw new ServiceUnavailable('The delivery could not be stored.');
          throw err;
        }
      },
    });
  };
}
