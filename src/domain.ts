import type { FastifyBaseLogger } from 'fastify';
import { AlertService } from './alerts/service.ts';
import { planCatalogue } from './billing/plans.ts';
import { BillingService } from './billing/service.ts';
import { BillingStore } from './billing/store.ts';
import { StripeBilling } from './billing/stripe-billing.ts';
import { AlertStore, WaitingStore } from './alerts/store.ts';
import type { Config } from './config.ts';
import type { Database } from './core/db/database.ts';
import type { MailTransport } from './core/mail/transport.ts';
import { SecretBox } from './core/sealed-secrets.ts';
import { stripeClient } from './core/stripe-client.ts';
import { loadServiceSecret } from './core/secrets.ts';
import { TokenSigner } from './core/signed-token.ts';
import { AlertSenders } from './dispatch/senders.ts';
import { DispatchService } from './dispatch/service.ts';
import { DispatchStore } from './dispatch/store.ts';
import { DispatchWorker } from './dispatch/worker.ts';
import { InventoryService } from './inventory/service.ts';
import { InventoryStore } from './inventory/store.ts';
import { buildPayments } from './payments/index.ts';
import type { PaymentService } from './payments/service.ts';
import { buildShopify, type ShopifyFeature } from './shopify/index.ts';
import { StoreService } from './stores/service.ts';
import { StoreStore } from './stores/store.ts';

/** The product's features over one database, shared by the HTTP app and `restock worker`. */
export interface Domain {
  stores: StoreService;
  alerts: AlertService;
  inventory: InventoryService;
  dispatch: DispatchService;
  shopify: ShopifyFeature;
  billing: BillingService;
  payments: PaymentService;
  worker: DispatchWorker;
  /** Stops the worker and closes the stores' own mail transports (not `mail`, which the caller owns). */
  close(): Promise<void>;
}

export async function buildDomain(config: Config, database: Database, mail: MailTransport, log: FastifyBaseLogger): Promise<Domain> {
  const stores = new StoreService(new StoreStore(database), {
    secrets: SecretBox.fromKey(config.encryptionKey),
    defaults: config.dispatch.defaults,
  });
  const serviceSecret = await loadServiceSecret(database, config.secret);
  const signer = new TokenSigner(serviceSecret);
  const alerts = new AlertService(new AlertStore(database), new WaitingStore(database), signer, config.baseUrl);
  const dispatchStore = new DispatchStore(database);
  const dispatch = new DispatchService(dispatchStore);
  const inventory = new InventoryService(new InventoryStore(database), stores, dispatch);
  const { secretKey: stripeKey, apiUrl: stripeUrl } = config.payments.stripe;
  const stripe = stripeKey ? stripeClient(stripeKey, stripeUrl, config.payments.settleTimeoutMs) : undefined;
  const billing = new BillingService({
    store: new BillingStore(database),
    baseUrl: config.baseUrl,
    sessionTtlMinutes: config.checkoutSessionTtlMinutes,
    catalogue: planCatalogue(config.billing.plans),
    checkoutProvider: config.billing.checkoutProvider,
    freeAlertsPerMonth: config.billing.freeAlertsPerMonth,
    tellMerchant: async (shop, subject, text) => {
      const owner = (await stores.findStore(shop))?.owner_email;
      if (owner) await mail.send({ to: owner, subject, text, purpose: 'plan-notice', storeDomain: shop });
    },
    ...(stripe
      ? { stripe: new StripeBilling(stripe, config.billing.stripeWebhookSecret, config.baseUrl) }
      : {}),
  });
  const shopify = buildShopify({ config, database, log, mail, stores, inventory, alerts, dispatch, billing });
  if (shopify.billing) billing.useShopify(shopify.billing);
  const payments = buildPayments(config, database, serviceSecret, log, stripe);
  const senders = new AlertSenders(mail, config.mailFrom, config.dispatch.smtpPoolSize);
  const worker = new DispatchWorker({
    quota: billing,
    store: dispatchStore,
    dispatch,
    alerts,
    inventory,
    stores,
    senders,
    config: config.dispatch,
    log,
    jobs: [...shopify.jobs, ...payments.jobs],
  });
  return {
    stores,
    alerts,
    inventory,
    dispatch,
    shopify,
    billing,
    payments: payments.service,
    worker,
    async close() {
      await worker.stop();
      await senders.close();
    },
  };
}
