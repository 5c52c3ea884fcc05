import type Stripe from 'stripe';
import type { Config } from '../config.ts';
import type { Database } from '../core/db/database.ts';
import type { Feature } from '../core/feature.ts';
import { bindOperations } from '../core/operations.ts';
import type { MailTransport } from '../core/mail/transport.ts';
import type { StoreService } from '../stores/service.ts';
import { checkoutPages } from './checkout-page.ts';
import { planCatalogue } from './plans.ts';
import { billingOperations } from './operations.ts';
import { BillingService, type AppBilling, type RefundPayment } from './service.ts';
import { BillingRepository } from './repository.ts';
import { StripeBilling } from './stripe-billing.ts';
import { billingWebhookRoutes } from './webhook-routes.ts';

/** How often proposals paid per request that were declined or expired are looked for, to refund them. */
const REFUND_SWEEP_EVERY_MS = 60_000;
/** How often alerts beyond the allowance are reported to the stores' billing providers (Stripe, Shopify). */
const OVERAGE_REPORT_EVERY_MS = 60_000;

export interface BillingDeps {
  config: Config;
  database: Database;
  mail: MailTransport;
  stores: StoreService;
  /** Present when STRIPE_SECRET_KEY is set. */
  stripe?: Stripe;
  /** The billing of a platform whose app store requires its own (Shopify Billing, when the Shopify app is configured). */
  appBilling?: AppBilling;
  /** Refunds what was paid per request for a proposal that was not accepted (the payments feature). */
  refundPayment?: RefundPayment;
}

/** Plans: checkoutPlan at its provider, plan states from provider webhooks, the allowance alerts are counted against. */
export function buildBilling({ config, database, mail, stores, stripe, appBilling, refundPayment }: BillingDeps): Feature<BillingService> {
  const service = new BillingService({
    store: new BillingRepository(database),
    baseUrl: config.baseUrl,
    sessionTtlMinutes: config.checkoutSessionTtlMinutes,
    catalogue: planCatalogue(config.billing.plans),
    checkoutProvider: config.billing.checkoutProvider,
    freeAlertsPerMonth: config.billing.freeAlertsPerMonth,
    tellMerchant: async (shop, subject, text) => {
      const owner = (await stores.findStore(shop))?.owner_email;
      if (owner) await mail.send({ to: owner, subject, text, purpose: 'plan-notice', storeDomain: shop });
    },
    ownerOf: async (shop) => {
      const store = await stores.findStore(shop);
      return store?.status === 'active' ? store.owner_email : undefined;
    },
    // A credential purpose: the link accepts the proposal, so the store's outbox never lists it.
    askOwner: (shop, owner, subject, text) => mail.send({ to: owner, subject, text, purpose: 'plan-confirmation', storeDomain: shop }),
    ...(stripe ? { stripe: new StripeBilling(stripe, config.billing.stripeWebhookSecret, config.baseUrl) } : {}),
    ...(appBilling ? { appBilling } : {}),
    ...(refundPayment ? { refundPayment } : {}),
  });
  return {
    service,
    operations: bindOperations(billingOperations, service),
    routes: [checkoutPages(service), billingWebhookRoutes(service, config.baseUrl)],
    jobs: [
      { name: 'plan-proposal-refunds', everyMs: REFUND_SWEEP_EVERY_MS, run: () => service.refundUndelivered() },
      { name: 'overage-reports', everyMs: OVERAGE_REPORT_EVERY_MS, run: () => service.reportOverage() },
    ],
  };
}
