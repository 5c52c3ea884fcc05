/**
 * The plans merchants buy. Prices are in cents to keep arithmetic exact; the seed's offer for
 * checkoutPlan is the starter plan's USD 9.99.
 */
export const plans = {
  starter: {
    name: 'Starter',
    description: 'Bring your own e-mail provider key; monthly plan',
    amountCents: 999,
    currency: 'USD',
    interval: 'month',
    monthlyAlertQuota: 2_000,
  },
  growth: {
    name: 'Growth',
    description: 'Managed sending with a higher quota; monthly plan',
    amountCents: 2_999,
    currency: 'USD',
    interval: 'month',
    monthlyAlertQuota: 20_000,
  },
} as const;

export type PlanId = keyof typeof plans;
export const planIds = Object.keys(plans) as [PlanId, ...PlanId[]];

export function formatPrice(amountCents: number, currency: string): string {
  return new Intl.NumberFormat('en-US', { style: 'currency', currency }).format(amountCents / 100);
}
