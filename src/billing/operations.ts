import { z } from 'zod';
import { defineOperation, usdDecimal } from '../core/operations.ts';
import { storeInput, storeSchema } from '../stores/schemas.ts';
import { checkoutPlanAnswer, checkoutPlanBody, checkoutPlanResponse, checkoutSessionParams, checkoutSessionSchema, overageCeilingBody, planListSchema } from './schemas.ts';
import type { BillingService } from './service.ts';

const STARTER_PLAN_CENTS = 999;

/** The plan API under /api/v1/plans. */
export const billingOperations = [
  defineOperation({
    id: 'listPlans',
    method: 'GET',
    path: '/api/v1/plans',
    summary: 'List the plans on sale',
    tag: 'plans',
    // Public: prices are no secret, and merchants follow the landing page's link to them.
    input: z.object({}),
    output: planListSchema,
    errors: [],
    tenancy: { none: 'the public catalogue of plans' },
    example: {},
    run: async (billing: BillingService) => ({ plans: billing.listPlans() }),
  }),
  defineOperation({
    id: 'checkoutPlan',
    method: 'POST',
    path: '/api/v1/plans/checkout',
    summary: 'Create an agent checkout session for the starter or growth plan',
    description:
      "Only the store's owner changes its plan. For an agent bound to the store (or the owner in the dashboard), returns the URL of a page where the purchase is completed; the plan becomes active once it is. " +
      "For any other caller the session is a proposal (`awaiting_owner`): the store's owner is mailed a link to accept or decline it, and nothing is bought or charged until they accept. " +
      "A store that installed the Shopify app pays through Shopify Billing only: for any caller, `checkoutUrl` is Shopify's confirmation page (`approval: shopify`), where the merchant approves the charge in their own Shopify admin; that approval is the owner's consent. " +
      'Without an access token, the request can pay for the starter plan with MPP (USD 9.99): the session is then a proposal paid for, activated when the owner accepts it and refunded otherwise; x402 cannot be refunded, so it is refused; neither is taken for a store that pays through Shopify (409 shopify-billing-required, before any charge; see docs/plans.md).',
    tag: 'plans',
    scope: 'api:write',
    idempotent: true,
    input: checkoutPlanBody,
    output: checkoutPlanResponse,
    errors: [400, 403, 409, 413, 415, 422, 502, 503],
    tenancy: { refusal: 403 },
    example: { plan: 'starter', shop: 'my-store.myshopify.com' },
    tool: { title: 'Check out the starter or growth plan', description: 'A checkout session for a store; the plan becomes active once the purchase is completed at checkoutUrl.' },
    skill: true,
    paid: {
      price: {
        usdCents: STARTER_PLAN_CENTS,
        description: 'Starter plan (bring your own e-mail provider key), monthly',
        mpp: [
          { method: 'stripe', intent: 'session', description: 'Starter plan (bring your own e-mail provider key), monthly, paid through Stripe' },
          { method: 'card', intent: 'session', description: 'Credit/debit card checkout session for the starter plan, monthly' },
        ],
        // Paid without a token, a checkout is a proposal the store's owner may decline, and is then
        // refunded (docs/plans.md); an x402 transfer cannot be, so it is not offered.
        x402: false,
      },
      storeOf: (input) => input.shop,
      // The offer prices the starter plan; the others are bought with a token and the checkout page.
      admits: (input) =>
        input.plan === 'starter' || {
          pointer: '/body/plan',
          message: `paying per request buys the starter plan (USD ${usdDecimal(STARTER_PLAN_CENTS)} a month); other plans are bought with an access token`,
        },
      resultReference: (result) => result.sessionId,
      // A store installed as the Shopify app pays only through Shopify Billing: refused before any charge.
      beforeCharge: (billing: BillingService, input) => billing.requireAppBilling(input.shop, 'a plan paid per request'),
    },
    run: async (billing: BillingService, input, { caller, paidWith }) => {
      const session = await billing.checkoutPlan(input, caller, paidWith);
      return checkoutPlanAnswer(session, billing.approvalOf(session));
    },
  }),
  defineOperation({
    id: 'getCheckoutSession',
    method: 'GET',
    path: '/api/v1/plans/checkout/:sessionId',
    summary: 'Read a checkout session',
    tag: 'plans',
    scope: 'api:read',
    input: checkoutSessionParams,
    output: checkoutSessionSchema,
    errors: [400, 404, 503],
    tenancy: { refusal: 404 },
    example: { sessionId: 'cs_0123456789' },
    run: (billing: BillingService, { sessionId }, { caller }) => billing.getCheckoutSession(sessionId, caller),
  }),
  defineOperation({
    id: 'setOverageCeiling',
    method: 'PATCH',
    path: '/api/v1/stores/:shop/plan',
    summary: "Set the most a period's alerts beyond the plan's allowance may cost (the store's owner's side only)",
    description:
      "Beyond the allowance, alerts go out at the plan's published price each (`overagePerAlert`), up to this ceiling a period; past it they wait for the next period, and the owner is warned before. Applies from the next alert. Answers the plan in force with this period's usage.",
    tag: 'plans',
    scope: 'inventory:alerts',
    idempotent: true,
    input: storeInput.extend(overageCeilingBody.shape).strict(),
    output: storeSchema.shape.plan,
    errors: [400, 404, 415, 503],
    tenancy: { refusal: 404 },
    example: { shop: 'my-store.myshopify.com', overageCeiling: 25 },
    run: (billing: BillingService, { shop, overageCeiling }, { caller }) => billing.setOverageCeiling(caller, shop, Math.round(overageCeiling * 100)),
  }),
];
