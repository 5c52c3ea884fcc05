import type { FastifyError, FastifyInstance } from 'fastify';
import { isUnavailableError } from '../core/db/dialect.ts';
import { sendProblem, toProblem } from '../core/http/errors.ts';
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
    // The signature covers the raw bytes: no parser may touch them.
    app.removeAllContentTypeParsers();
    app.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: STRIPE_WEBHOOK_BODY_LIMIT }, (_request, body, done) => done(null, body));
    app.setErrorHandler((err: FastifyError, request, reply) => {
      const problem = toProblem(err, STRIPE_WEBHOOK_BODY_LIMIT);
      if (problem.status >= 500) request.log.error({ err }, 'Stripe webhook failed');
      return sendProblem(request, reply, problem, baseUrl);
    });

    app.post('/webhooks/stripe', {
      bodyLimit: STRIPE_WEBHOOK_BODY_LIMIT,
      schema: { hide: true },
      handler: async (request, reply) => {
        const body = Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);
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
