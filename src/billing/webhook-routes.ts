import type { FastifyInstance } from 'fastify';
import { isUnavailableError } from '../core/db/dialect.ts';
import { rawBodyOf, takeRawBodies } from '../core/http/raw-body.ts';
import { Problem, ServiceUnavailable } from '../core/problems.ts';
import type { BillingService } from './service.ts';

const STRIPE_WEBHOOK_BODY_LIMIT = 512 * 1024;

/**
 * `POST /webhooks/stripe`: Stripe's events about plans, verified over the raw bytes with the
 * SDK (signature and a 5-minute age limit, so an old delivery replayed is refused), applied
 * once per event id, in any order (see plan-state.ts).
 */
export function billingWebhookRoutes(billing: BillingService, baseUrl: string) {
  return async function (app: FastifyInstance) {
    takeRawBodies(app, { bodyLimit: STRIPE_WEBHOOK_BODY_LIMIT, baseUrl, sender: 'Stripe' });

    app.post('/webhooks/stripe', {
      bodyLimit: STRIPE_WEBHOOK_BODY_LIMIT,
      schema: { hide: true },
      handler: async (request, reply) => {
        const body = rawBodyOf(request);
        const signature = request.headers['stripe-signature'];
        let outcome: string;
        try {
          outcome = await billing.stripeWebhook(body, typeof signature === 'string' ? signature : undefined);
        } catch (err) {
          if (err instanceof Problem) throw err;
          // Not applied: Stripe delivers again after a failure, so say 503, not "bug".
          if (!isUnavailableError(err)) request.log.error({ err }, 'Stripe webhook could not be applied');
          throw new ServiceUnavailable('The event could not be applied; deliver it again.');
        }
        request.log.info({ outcome }, 'Stripe webhook');
        return reply.code(200).send({ received: true, outcome });
      },
    });
  };
}
