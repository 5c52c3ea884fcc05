import { z } from 'zod';
import { shopSchema } from '../stores/schemas.ts';
import { planIds } from './plans.ts';

export const planIdSchema = z.enum(planIds).describe('Plan to buy');

export const checkoutPlanBody = z.object({ plan: planIdSchema, shop: shopSchema }).describe('Checkout request');

export const checkoutPlanResponse = z
  .object({
    checkoutUrl: z.url().describe('Page where the merchant completes the purchase'),
    sessionId: z.string().describe('Identifier of the checkout session'),
    approval: z
      .string()
      .optional()
      .describe(
        "Present when the store pays through its platform's app billing (`shopify`: it installed the Shopify app and pays through Shopify Billing): checkoutUrl is the platform's confirmation page in the merchant's own admin, where the store's owner approves or declines the charge, whoever started the checkout",
      ),
  })
  .describe('A created checkout session');

export const checkoutSessionParams = z.object({
  sessionId: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'must be a checkout session id such as cs_...'),
});

export const checkoutSessionSchema = z
  .object({
    sessionId: z.string(),
    plan: planIdSchema,
    shop: z.string(),
    status: z
      .enum(['awaiting_owner', 'open', 'completed', 'expired', 'declined'])
      .describe("awaiting_owner: proposed by an agent not bound to the store, until the store's owner accepts it (then open) or declines it"),
    provider: z.string().describe('Where the purchase is completed: local (test mode), stripe, shopify; x402 or mpp when the request paid'),
    amount: z.number().describe('Price per month in the currency, e.g. 9.99'),
    currency: z.string(),
    checkoutUrl: z.url(),
    createdAt: z.string(),
    expiresAt: z.string(),
    completedAt: z.string().nullable(),
  })
  .describe('A checkout session');

export const planSchema = z.object({
  plan: planIdSchema,
  name: z.string(),
  description: z.string(),
  amount: z.number(),
  currency: z.string(),
  interval: z.literal('month'),
  monthlyAlertQuota: z.number().int(),
  requiresOwnMailProvider: z.boolean().describe('Alerts go out only through the store’s own SMTP provider'),
  overagePerAlert: z.number().describe('USD per alert beyond the allowance, billed up to the ceiling the store’s owner sets'),
  defaultOverageCeiling: z.number().describe('The overage ceiling, in USD a period, of a store whose owner set none'),
  includes: z.array(z.string()),
});

export const overageCeilingBody = z
  .object({
    overageCeiling: z
      .number()
      .min(0)
      .max(10_000)
      .refine((usd) => Math.abs(usd * 100 - Math.round(usd * 100)) < 1e-6, 'must have at most two decimals')
      .describe('The most alerts beyond the allowance may cost a period, in USD; 0 sends nothing beyond it'),
  })
  .describe("The store's overage ceiling");

export const planListSchema = z.object({ plans: z.array(planSchema) }).describe('The plans on sale');

export type CheckoutSession = z.infer<typeof checkoutSessionSchema>;

/** checkoutPlan's answer for the session it made, over HTTP and MCP alike; `approval`: the platform whose admin approves the charge. */
export function checkoutPlanAnswer(session: CheckoutSession, approval: string | undefined): z.infer<typeof checkoutPlanResponse> {
  return { checkoutUrl: session.checkoutUrl, sessionId: session.sessionId, ...(approval ? { approval } : {}) };
}
