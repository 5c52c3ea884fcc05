import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { problemResponses } from '../core/http/openapi-responses.ts';
import { subscribeAlertBody, subscribeAlertResponse, subscriptionParams, subscriptionSchema } from './schemas.ts';
import type { SubscriptionService } from './service.ts';

/** The alert subscription API under /api/v1/alerts. */
export function alertRoutes(service: SubscriptionService) {
  return async function (app: FastifyInstance) {
    const api = app.withTypeProvider<ZodTypeProvider>();

    api.post('/api/v1/alerts/subscribe', {
      config: { idempotent: true, scope: 'api:write', payment: 'subscribeAlert' },
      schema: {
        operationId: 'subscribeAlert',
        summary: 'Subscribe a customer e-mail to a restock alert',
        description:
          'Creates a subscription that sends one e-mail when the product (or the given variant) is back in stock. ' +
          'Subscribing the same product, variant and e-mail again returns the existing active subscription. ' +
          'Without an access token, the request is paid per request (x402 or MPP, USD 0.05).',
        tags: ['alerts'],
        body: subscribeAlertBody,
        response: { 200: subscribeAlertResponse, ...problemResponses(400, 403, 409, 413, 415, 422, 503) },
      },
      handler: async (request) => {
        const { subscriptionId, status } = await service.subscribeAlert(request.body, request.caller!);
        return { subscriptionId, status };
      },
    });

    api.get('/api/v1/alerts/:subscriptionId', {
      config: { scope: 'api:read' },
      schema: {
        operationId: 'getSubscription',
        summary: 'Read an alert subscription',
        tags: ['alerts'],
        params: subscriptionParams,
        response: { 200: subscriptionSchema, ...problemResponses(400, 404, 503) },
      },
      handler: (request) => service.getSubscription(request.params.subscriptionId, request.caller!),
    });

    api.delete('/api/v1/alerts/:subscriptionId', {
      config: { idempotent: true, scope: 'api:write' },
      schema: {
        operationId: 'cancelSubscription',
        summary: 'Cancel an alert subscription',
        description: 'Stops a waiting alert. Cancelling a cancelled subscription returns it unchanged; one already notified or unsubscribed answers 409.',
        tags: ['alerts'],
        params: subscriptionParams,
        response: { 200: subscriptionSchema, ...problemResponses(400, 404, 409, 503) },
      },
      handler: (request) => service.cancelSubscription(request.params.subscriptionId, request.caller!),
    });
  };
}
