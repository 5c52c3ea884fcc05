import { z } from 'zod';
import type { ShopifyBillingProvider } from '../billing/service.ts';
import { installedAsShopifyApp, type StoreService } from '../stores/service.ts';
import type { AdminApi } from './admin-api.ts';
import { UpstreamError } from './shopify-api.ts';

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

/**
 * Shopify Billing through the Admin API, for stores installed as the app. A charge is a real one
 * unless Shopify says, when the checkout starts, that the shop is a development store (which
 * cannot pay real charges), or the operator made every charge a test (`alwaysTestCharges`).
 */
export function shopifyBilling(stores: StoreService, admin: AdminApi, alwaysTestCharges: boolean): ShopifyBillingProvider {
  return {
    async installed(shop) {
      // Installed, not merely connected: a store whose token lapsed still pays through Shopify.
      const store = await stores.findStore(shop);
      return store?.status === 'active' && installedAsShopifyApp(store);
    },
    async createSubscription(shop, plan, returnUrl) {
      const token = await admin.tokens.current(shop);
      if (!token) throw new UpstreamError(`${shop} has no Admin API access: the merchant must open Restock in their Shopify admin again`);
      const test = alwaysTestCharges || (await isDevelopmentStore(admin, shop, token));
      const lineItems = [{ plan: { appRecurringPricingDetails: { price: { amount: plan.amountCents / 100, currencyCode: plan.currency }, interval: 'EVERY_30_DAYS' } } }];
      const variables = { name: `Restock ${plan.name}`, lineItems, returnUrl, test };
      const data = await admin.query(shop, token, 'Creating the app subscription', APP_SUBSCRIPTION_CREATE, variables, appSubscriptionAnswer);
      const created = data.appSubscriptionCreate;
      const errors = created?.userErrors ?? [];
      if (!created?.appSubscription || !created.confirmationUrl || errors.length > 0) {
        throw new UpstreamError(`Creating the app subscription: ${errors.map((error) => error.message).join('; ') || 'no subscription in the answer'}`);
      }
      return { externalId: created.appSubscription.id, url: created.confirmationUrl };
    },
  };
}

async function isDevelopmentStore(admin: AdminApi, shop: string, token: string): Promise<boolean> {
  const data = await admin.query(shop, token, "Reading the shop's plan", SHOP_PLAN, {}, shopPlanAnswer);
  return data.shop.plan.partnerDevelopment;
}
