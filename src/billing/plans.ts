/**
 * The plans merchants buy. Prices are in cents to keep arithmetic exact; the seed's offer for
 * checkoutPlan is the starter plan's USD 9.99, so its price is fixed. Quotas and the growth
 * price are settings (PLAN_*); stores without a plan in force get the free allowance.
 */
export interface Plan {
  name: string;
  description: string;
  amountCents: number;
  currency: string;
  interval: 'month';
  monthlyAlertQuota: number;
  /** Alerts go out only through the store's own e-mail provider (bring your own key). */
  requiresOwnMailProvider: boolean;
  /** The published price of each alert beyond the allowance, in cents. */
  overageCentsPerAlert: number;
  /** The most a period's alerts beyond the allowance cost a store whose owner set no ceiling: one month's price. */
  defaultOverageCeilingCents: number;
  includes: string[];
}

export const planIds = ['starter', 'growth'] as const;
export type PlanId = (typeof planIds)[number];
export type PlanCatalogue = Record<PlanId, Plan>;

/**
 * How plans compare, lowest first (the order of `planIds`); -1 for a plan no longer on sale. A
 * change to a lower plan is a downgrade, which only the store's owner may choose.
 */
export function planRank(plan: string): number {
  return (planIds as readonly string[]).indexOf(plan);
}

export interface PlanSettings {
  starterAlertsPerMonth: number;
  growthAlertsPerMonth: number;
  growthPriceCents: number;
  overageCentsPerAlert: number;
}

export const DEFAULT_PLAN_SETTINGS: PlanSettings = { starterAlertsPerMonth: 2_000, growthAlertsPerMonth: 20_000, growthPriceCents: 2_999, overageCentsPerAlert: 1 };

/** What the catalogue says of alerts beyond the allowance. */
function overageTerms(settings: PlanSettings, ceilingCents: number): string {
  return `beyond it, ${formatPrice(settings.overageCentsPerAlert, 'USD')} an alert, up to a ceiling you set (${formatPrice(ceilingCents, 'USD')} a month unless you change it)`;
}

export function planCatalogue(settings: PlanSettings = DEFAULT_PLAN_SETTINGS): PlanCatalogue {
  return {
    starter: {
      name: 'Starter',
      description: 'Bring your own e-mail provider key; monthly plan',
      amountCents: 999,
      currency: 'USD',
      interval: 'month',
      monthlyAlertQuota: settings.starterAlertsPerMonth,
      requiresOwnMailProvider: true,
      overageCentsPerAlert: settings.overageCentsPerAlert,
      defaultOverageCeilingCents: 999,
      includes: ['back-in-stock alerts through your own SMTP provider', `${settings.starterAlertsPerMonth} alerts a month`, overageTerms(settings, 999), 'batch policy, templates, demand per product'],
    },
    growth: {
      name: 'Growth',
      description: 'Managed sending with a higher quota; monthly plan',
      amountCents: settings.growthPriceCents,
      currency: 'USD',
      interval: 'month',
      monthlyAlertQuota: settings.growthAlertsPerMonth,
      requiresOwnMailProvider: false,
      overageCentsPerAlert: settings.overageCentsPerAlert,
      defaultOverageCeilingCents: settings.growthPriceCents,
      includes: ['managed sending (or your own SMTP provider)', `${settings.growthAlertsPerMonth} alerts a month`, overageTerms(settings, settings.growthPriceCents), 'batch policy, templates, demand per product'],
    },
  };
}

export function formatPrice(amountCents: number, currency: string): string {
  return new Intl.NumberFormat('en-US', { style: 'currency', currency }).format(amountCents / 100);
}
