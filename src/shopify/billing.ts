import { z } from 'zod';
import { appSubscriptionName, formatPrice, type AppBilling, type AppSubscriptionNews, type Plan } from '../billing/service.ts';
import { Problem } from '../core/problems.ts';
import { installedAsShopifyApp, type StoreService } from '../stores/service.ts';
import type { AdminApi } from './admin-api.ts';
import { UpstreamError } from './shopify-api.ts';

/** What Shopify Billing asks of the stores: a store as it is (installed as the app or not). */
export type BillingStores = Pick<StoreService, 'findStore'>;

// Shopify's own word on whether the shop is a development store, whose charges can only be tests.
const SHOP_PLAN = `query RestockShopPlan { shop { plan { partnerDevelopment } } }`;

const shopPlanAnswer = z.object({ shop: z.object({ plan: z.object({ partnerDevelopment: z.boolean() }) }) });

const APP_SUBSCRIPTION_CREATE = `mutation RestockAppSubscription($name: String!, $lineItems: [AppSubscriptionLineItemInput!]!, $returnUrl: URL!, $test: Boolean) {
  appSubscriptionCreate(name: $name, lineItems: $lineItems, returnUrl: $returnUrl, test: $test) {
    appSubscription { id status }
    confirmationUrl
    userErrors { field message }
  }
}`;

const appSubscriptionAnswer = z.object({
  appSubscriptionCreate: z
    .object({
      appSubscription: z.object({ id: z.string(), status: z.string() }).nullish(),
      confirmationUrl: z.string().nullish(),
      userErrors: z.array(z.object({ message: z.string() })),
    })
    .nullable(),
});

const USAGE_LINE_ITEMS = `query RestockUsageLineItem($id: ID!) {
  node(id: $id) { ... on AppSubscription { status lineItems { id plan { pricingDetails { __typename } } } } }
}`;

const usageLineItemsAnswer = z.object({
  node: z
    .object({
      status: z.string(),
      lineItems: z.array(z.object({ id: z.string(), plan: z.object({ pricingDetails: z.object({ __typename: z.string() }) }) })),
    })
    .nullable(),
});

const APP_USAGE_RECORD_CREATE = `mutation RestockUsageRecord($subscriptionLineItemId: ID!, $price: MoneyInput!, $description: String!, $idempotencyKey: String) {
  appUsageRecordCreate(subscriptionLineItemId: $subscriptionLineItemId, price: $price, description: $description, idempotencyKey: $idempotencyKey) {
    appUsageRecord { id }
    userErrors { field message }
  }
}`;

const usageRecordAnswer = z.object({
  appUsageRecordCreate: z
    .object({ appUsageRecord: z.object({ id: z.string() }).nullish(), userErrors: z.array(z.object({ message: z.string() })) })
    .nullable(),
});

/** What the merchant approves for usage charges: alerts beyond the plan's allowance, at its price per alert. */
function usageTerms(plan: Plan): string {
  return `Back-in-stock alerts beyond the ${plan.monthlyAlertQuota} a month of ${plan.name}, at ${formatPrice(plan.overageCentsPerAlert, plan.currency)} each`;
}

/**
 * Shopify Billing through the Admin API, for stores installed as the app. A charge is a real one
 * unless Shopify says, when the checkout starts, that the shop is a development store (which
 * cannot pay real charges), or the operator made every charge a test (`alwaysTestCharges`).
 */
export function shopifyBilling(stores: BillingStores, admin: AdminApi, alwaysTestCharges: boolean): AppBilling {
  return {
    provider: 'shopify',
    label: 'Shopify',
    async requiredFor(shop) {
      // Installed, not merely connected: a store whose token lapsed still pays through Shopify.
      const store = await stores.findStore(shop);
      return store?.status === 'active' && installedAsShopifyApp(store);
    },
    async createSubscription(shop, plan, returnUrl, cappedAmountCents) {
      const token = await admin.tokens.current(shop);
      if (!token) throw new UpstreamError(`${shop} has no Admin API access: the merchant must open Restock in their Shopify admin again`);
      const test = alwaysTestCharges || (await isDevelopmentStore(admin, shop, token));
      const recurring = { plan: { appRecurringPricingDetails: { price: { amount: plan.amountCents / 100, currencyCode: plan.currency }, interval: 'EVERY_30_DAYS' } } };
      // Shopify refuses a capped amount of 0: a store that allows no overage gets no usage line.
      const usage = cappedAmountCents > 0 ? [{ plan: { appUsagePricingDetails: { terms: usageTerms(plan), cappedAmount: { amount: cappedAmountCents / 100, currencyCode: plan.currency } } } }] : [];
      const lineItems = [recurring, ...usage];
      const variables = { name: appSubscriptionName(plan), lineItems, returnUrl, test };
      const data = await admin.query(shop, token, 'Creating the app subscription', APP_SUBSCRIPTION_CREATE, variables, appSubscriptionAnswer);
      const created = data.appSubscriptionCreate;
      const errors = created?.userErrors ?? [];
      if (!created?.appSubscription || !created.confirmationUrl || errors.length > 0) {
        throw new UpstreamError(`Creating the app subscription: ${errors.map((error) => error.message).join('; ') || 'no subscription in the answer'}`);
      }
      return { externalId: created.appSubscription.id, url: created.confirmationUrl };
    },
    async reportUsage(shop, externalId, usage) {
      const token = await admin.tokens.current(shop);
      if (!token) throw new UpstreamError(`${shop} has no Admin API access: its usage charges wait until the merchant opens Restock in their Shopify admin again`);
      const found = await admin.query(shop, token, "Reading the subscription's usage line", USAGE_LINE_ITEMS, { id: externalId }, usageLineItemsAnswer);
      const line = found.node?.lineItems.find((item) => item.plan.pricingDetails.__typename === 'AppUsagePricing');
      if (!line) throw new UpstreamError(`The app subscription ${externalId} of ${shop} has no usage pricing line`);
      const variables = {
        subscriptionLineItemId: line.id,
        price: { amount: usage.amountCents / 100, currencyCode: usage.currency },
        description: usage.description,
        idempotencyKey: usage.idempotencyKey,
      };
      const data = await admin.query(shop, token, 'Creating a usage charge', APP_USAGE_RECORD_CREATE, variables, usageRecordAnswer);
      const errors = data.appUsageRecordCreate?.userErrors ?? [];
      if (!data.appUsageRecordCreate?.appUsageRecord || errors.length > 0) {
        throw new UpstreamError(`Creating a usage charge: ${errors.map((error) => error.message).join('; ') || 'no usage record in the answer'}`);
      }
    },
    // The Shopify App Store requires its apps to charge merchants through Shopify Billing only.
    refusal: (shop, how) =>
      new Problem(
        'shopify-billing-required',
        `${shop} installed Restock as a Shopify app, so its plan is paid only through Shopify Billing, not as ${how}: nothing was charged. ` +
          "Call checkoutPlan with an access token (any agent's, POST /api/agent/register): it answers Shopify's confirmation page, where the merchant approves the charge in their Shopify admin. " +
          'The merchant can also choose a plan in Restock inside their Shopify admin.',
        { extensions: { shop, provider: 'shopify' } },
      ),
  };
}

/** An `app_subscriptions/update` delivery, as Shopify sends it (anything else is no news). */
const appSubscriptionUpdate = z.object({
  app_subscription: z
    .object({
      admin_graphql_api_id: z.string().optional(),
      name: z.string().optional(),
      status: z.string().optional(),
      updated_at: z.string().optional(),
      // A Decimal as a string ("20.0"); null without a usage line.
      capped_amount: z.string().regex(/^\d{1,9}(\.\d{1,2})?$/).nullish().catch(undefined),
    })
    .optional(),
});

/** An `app_subscriptions/update` delivery in billing's words. */
export function appSubscriptionNews(body: unknown): AppSubscriptionNews {
  const parsed = appSubscriptionUpdate.safeParse(body);
  const subscription = parsed.success ? parsed.data.app_subscription : undefined;
  const updated = subscription?.updated_at ? new Date(subscription.updated_at) : undefined;
  return {
    type: 'app_subscriptions/update',
    externalId: subscription?.admin_graphql_api_id,
    name: subscription?.name,
    status: subscription?.status ? subscriptionStatus(subscription.status) : undefined,
    at: updated && !Number.isNaN(updated.getTime()) ? updated.toISOString() : undefined,
    cappedAmountCents: subscription?.capped_amount ? Math.round(Number(subscription.capped_amount) * 100) : undefined,
  };
}

/** Shopify's AppSubscriptionStatus in billing's four. */
function subscriptionStatus(status: string): AppSubscriptionNews['status'] {
  switch (status.toUpperCase()) {
    case 'ACTIVE':
      return 'active';
    case 'PENDING':
    case 'ACCEPTED':
      return 'pending';
    case 'FROZEN':
      return 'past_due';
    default:
      // CANCELLED, DECLINED, EXPIRED
      return 'cancelled';
  }
}

async function isDevelopmentStore(admin: AdminApi, shop: string, token: string): Promise<boolean> {
  const data = await admin.query(shop, token, "Reading the shop's plan", SHOP_PLAN, {}, shopPlanAnswer);
  return data.shop.plan.partnerDevelopment;
}
