import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { problemResponses } from '../core/http/openapi-responses.ts';
import {
  checkoutPlanAnswer,
  checkoutPlanBody,
  checkoutPlanResponse,
  checkoutSessionParams,
  checkoutSessionSchema,
  planListSchema,
} from './schemas.ts';
import type { BillingService } from './service.ts';

/** The plan API under /api/v1/plans. */
export function billingRoutes(service: BillingService) {
  return async function (app: FastifyInstance) {
    const api = app.withTypeProvider<ZodTypeProvider>();

    // Public: prices are no secret, and merchants follow the landing page's link to them.
    api.get('/api/v1/plans', {
      schema: {
        operationId: 'listPlans',
        summary: 'List the plans on sale',
        tags: ['plans'],
        // The catalogue as configured, so the document shows the prices and quotas on sale.
        response: { 200: planListSchema.meta({ examples: [{ plans: service.listPlans() }] }) },
      },
      handler: async () => ({ plans: service.listPlans() }),
    });

    api.post('/api/v1/plans/checkout', {
      config: { idempotent: true, scope: 'api:write', payment: 'checkoutPlan' },
      schema: {
        operationId: 'checkoutPlan',
        summary: 'Create an agent checkout session for the starter or growth plan',
        description:
          "Only the store's owner changes its plan. For an agent bound to the store (or the owner in the dashboard), returns the URL of a page where the purchase is completed; the plan becomes active once it is. " +
          "For any other caller the session is a proposal (`awaiting_owner`): the store's owner is mailed a link to accept or decline it, and nothing is bought or charged until they accept. " +
          "A store that installed the Shopify app pays through Shopify Billing only: for any caller, `checkoutUrl` is Shopify's confirmation page (`approval: shopify`), where the merchant approves the charge in their own Shopify admin; that approval is the owner's consent. " +
          "Without an access token, the request can pay for the starter plan with MPP (USD 9.99): the session is then a proposal paid for, activated when the owner accepts it and refunded otherwise; x402 cannot be refunded, so it is refused; neither is taken for a store that pays through Shopify (409 shopify-billing-required, before any charge; see docs/plans.md).",
        tags: ['plans'],
        body: checkoutPlanBody,
        response: { 200: checkoutPlanResponse, ...problemResponses(400, 403, 409, 413, 415, 422, 502, 503) },
      },
      handler: async (request) => {
        const session = await service.checkoutPlan(request.body, request.caller!, request.payment?.protocol);
        return checkoutPlanAnswer(session);
      },
    });

    api.get('/api/v1/plans/checkout/:sessionId', {
      config: { scope: 'api:read' },
      schema: {
        operationId: 'getCheckoutSession',
        summary: 'Read a checkout session',
        tags: ['plans'],
        params: checkoutSessionParams,
        response: { 200: checkoutSessionSchema, ...problemResponses(400, 404, 503) },
      },
      handler: (request) => service.getCheckoutSession(request.params.sessionId, request.caller!),
    });
  };
}
