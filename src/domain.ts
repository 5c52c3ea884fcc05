import type { FastifyBaseLogger } from 'fastify';
import { unbindFormerOwnersAgents } from './agents/feature.ts';
import { alertJobs, buildAlerts } from './alerts/feature.ts';
import type { SubscriptionService } from './alerts/service.ts';
import { buildBilling } from './billing/feature.ts';
import type { BillingService } from './billing/service.ts';
import type { Config } from './config.ts';
import type { ChangeBus } from './core/changes/bus.ts';
import { openChangeBus } from './core/changes/open.ts';
import type { Database } from './core/db/database.ts';
import { eventSinks, subscriptionNewsOnBus } from './core/events.ts';
import { channelPart, type Feature } from './core/feature.ts';
import type { MailTransport } from './core/mail/transport.ts';
import { noMetrics, type Metrics } from './core/metrics.ts';
import { loadServiceSecret } from './core/secrets.ts';
import { TokenSigner } from './core/signed-token.ts';
import { stripeClient } from './core/stripe-client.ts';
import { buildConversions } from './conversions/feature.ts';
import type { ConversionService } from './conversions/service.ts';
import { endFormerOwnerSessions } from './dashboard/feature.ts';
import { buildDispatch, buildDispatchWorker } from './dispatch/feature.ts';
import type { DispatchService } from './dispatch/service.ts';
import type { DispatchWorker } from './dispatch/worker.ts';
import { buildInventory } from './inventory/feature.ts';
import { buildKlaviyo, type KlaviyoService } from './klaviyo/feature.ts';
import type { InventoryService } from './inventory/service.ts';
import { buildNotices } from './notices/feature.ts';
import { declaredPrices } from './operations.ts';
import type { PlatformFeature } from './platform.ts';
import { PLATFORMS, STORE_DOMAINS, STOREFRONT_PROXIES } from './platforms.ts';
import { buildPayments } from './payments/feature.ts';
import type { PaymentService } from './payments/service.ts';
import { buildPurchasing } from './purchasing/feature.ts';
import { storefrontService } from './storefront/feature.ts';
import type { StorefrontService } from './storefront/service.ts';
import { buildChannelFeatures } from './channels.ts';
import { buildStores, withStoreOperations } from './stores/feature.ts';
import type { OwnerChangeListener, StoreService } from './stores/service.ts';
import { buildWebhooks, type WebhookService } from './webhooks/feature.ts';

/** The services of the product's features, shared by the HTTP app, the MCP tools and `restock worker`. */
export interface Domain {
  stores: StoreService;
  alerts: SubscriptionService;
  inventory: InventoryService;
  dispatch: DispatchService;
  /** Each platform's feature by the platform's name, in the order the platform registry lists them. */
  platforms: Record<string, PlatformFeature>;
  billing: BillingService;
  payments: PaymentService;
  worker: DispatchWorker;
  conversions: ConversionService;
  /** The sink features announce a store's events to (outgoing webhooks). */
  events: WebhookService;
  /** Stores' Klaviyo connections, shown and changed on the dashboard's Klaviyo page. */
  klaviyo: KlaviyoService;
  /** What the storefront widget's calls answer, directly or through a platform's proxy. */
  storefront: StorefrontService;
}

export interface DomainFeatures {
  domain: Domain;
  /** Each feature by name, for the web to place its own among them. */
  built: Record<'stores' | 'inventory' | 'dispatch' | 'alerts' | 'payments' | 'billing' | 'worker' | 'webhooks' | 'klaviyo' | 'conversions' | 'purchasing' | 'notices', Feature<unknown>>;
  /** Each channel's feature beside e-mail, in the order the channel registry lists them. */
  channels: Feature<unknown>[];
  /** All of them, in the order their routes register. */
  features: Feature<unknown>[];
  /** Signs what the service hands out and must recognise later (unsubscribe links, known devices). */
  signer: TokenSigner;
  /** Where changes that processes keep in memory are announced; closed after the features. */
  changes: ChangeBus;
}

/**
 * What ends when a store changes hands, whichever path changed it (the CLI, a Shopify
 * reinstall): the former owner's bound agents, dashboard sessions and unused sign-in links.
 */
export function formerOwnerAccess(database: Database, changes: ChangeBus): OwnerChangeListener[] {
  return [unbindFormerOwnersAgents(database, changes), endFormerOwnerSessions(database)];
}

/**
 * The features `restock worker` needs (everything but the web's own): each built by its folder's
 * `build` function once what it needs is built (no feature is handed a collaborator later), then
 * the dispatch worker with every feature's background jobs. `metrics` is
 * what the features report to (openMetrics in src/observability); without it, nothing.
 */
export async function buildDomainFeatures(config: Config, database: Database, mail: MailTransport, log: FastifyBaseLogger, metrics: Metrics = noMetrics): Promise<DomainFeatures> {
  const serviceSecret = await loadServiceSecret(database, config.secret);
  const changes = openChangeBus(config.redisUrl, database, log);
  const { secretKey: stripeKey, apiUrl: stripeUrl } = config.payments.stripe;
  const stripe = stripeKey ? await stripeClient(stripeKey, stripeUrl, config.payments.settleTimeoutMs) : undefined;
  const signer = new TokenSigner(serviceSecret);
  const payments = buildPayments({ config, database, serviceSecret, log, prices: declaredPrices(), ...(stripe ? { stripe } : {}), metrics });
  const storesAlone = buildStores({ config, database, changes, onOwnerChange: formerOwnerAccess(database, changes), storeDomains: STORE_DOMAINS });
  const webhooks = buildWebhooks({ config, database, changes, mail, log, stores: storesAlone.service });
  const klaviyo = buildKlaviyo({ config, database, changes, log });
  // Each platform's clients, before billing, which takes a platform's own billing of its apps.
  const opened = await Promise.all(PLATFORMS.map((platform) => platform.open({ config, database, log, stores: storesAlone.service })));
  const appBilling = opened.find((platform) => platform.appBilling)?.appBilling;
  // What features announce a store's events to: its webhooks, then its integrations (Klaviyo, a platform's own: Shopify Flow),
  // then every process's MCP sessions following a subscription's news.
  const events = eventSinks(webhooks.service, klaviyo.service, ...opened.flatMap((platform) => platform.events ?? []), subscriptionNewsOnBus(changes));
  const billing = buildBilling({
    config,
    database,
    mail,
    stores: storesAlone.service,
    ...(stripe ? { stripe } : {}),
    ...(appBilling ? { appBilling } : {}),
    // A plan proposal paid per request is refunded unless the store's owner accepts it.
    refundPayment: (sessionId) => payments.service.refundResult('checkoutPlan', sessionId),
  });
  // The store operations show the plan in force, which billing reports.
  const stores = withStoreOperations(storesAlone, (shop) => billing.service.planUsage(shop));
  const alertsAlone = buildAlerts({
    config,
    database,
    signer,
    events,
    settingsOf: (shop) => stores.service.settingsOf(shop),
    requireStorePlatform: (shop, ids) => stores.service.requireStorePlatform(shop, ids),
    callbacks: webhooks.service.callbacks,
  });
  const dispatch = buildDispatch({ database, alerts: alertsAlone.service, changes });
  const inventory = buildInventory({ database, changes, stores: stores.service, restocks: dispatch.service, events });
  const conversions = buildConversions({
    config,
    database,
    signer,
    alerts: alertsAlone.service,
    dispatch: dispatch.service,
    inventory: inventory.service,
    stores: stores.service,
    events,
    log,
  });
  const purchasing = buildPurchasing({ alerts: alertsAlone.service, inventory: inventory.service });
  const notices = buildNotices({
    config,
    database,
    mail,
    stores: stores.service,
    alerts: alertsAlone.service,
    events,
    figures: (shop, from, to) => conversions.service.digestFigures(shop, from, to),
    titles: (shop, productId, variantId) => inventory.service.describeProduct(shop, productId, variantId),
  });
  // Each channel beside e-mail, as the channel registry lists them, over the subscriptions, the ledger and the products.
  const channels = await buildChannelFeatures({
    config,
    database,
    log,
    stores: stores.service,
    alerts: alertsAlone.service,
    dispatch: dispatch.service,
    inventory: inventory.service,
    storefrontProxies: STOREFRONT_PROXIES,
  });
  // Double opt-in's mails and the channels' confirmation requests (a phone's "reply YES" text), both built on the alerts.
  const alerts: Feature<SubscriptionService> = {
    ...alertsAlone,
    jobs: alertJobs({
      config,
      alerts: alertsAlone.service,
      mail,
      log,
      settingsOf: (shop) => stores.service.settingsOf(shop),
      titleOf: async (shop, productId, variantId) => (await inventory.service.describeProduct(shop, productId, variantId))?.productTitle ?? undefined,
      confirmations: channelPart(channels, 'confirm'),
    }),
  };
  // One storefront service, whose answers are kept between changes: the widget's calls and Shopify's app proxy share it.
  const storefront = storefrontService({ stores: stores.service, inventory: inventory.service, alerts: alerts.service, offers: channelPart(channels, 'offered'), changes });
  const platforms = opened.map((platform) =>
    platform.build({
      config,
      database,
      log,
      metrics,
      mail,
      signer,
      stores: stores.service,
      inventory: inventory.service,
      alerts: alerts.service,
      dispatch: dispatch.service,
      billing: billing.service,
      orders: conversions.service,
      // The storefront's answers, where they reach the service through the platform (Shopify's app proxy).
      storefront,
    }),
  );
  // In the order their routes register (the API index lists operations so).
  const served = { stores, webhooks, klaviyo, inventory, dispatch, conversions, purchasing, notices, alerts, payments, billing };

  const worker = buildDispatchWorker({
    config,
    log,
    metrics,
    mail,
    dispatch,
    alerts: alerts.service,
    inventory: inventory.service,
    stores: stores.service,
    quota: billing.service,
    followUp: conversions.service,
    events,
    channels: channelPart(channels, 'sending'),
    // Each platform's way to hold a unit for a shopper, where it has one, by the platform's name.
    unitHolds: Object.fromEntries(PLATFORMS.flatMap((platform, i) => (platforms[i]!.holds ? [[platform.name, platforms[i]!.holds!] as const] : []))),
    jobs: [...Object.values(served), ...channels, ...platforms].flatMap((feature: Feature<unknown>) => feature.jobs ?? []),
  });
  const built = { ...served, worker };
  return {
    built,
    signer,
    changes,
    channels,
    features: [...Object.values(built), ...channels, ...platforms],
    domain: {
      stores: stores.service,
      alerts: alerts.service,
      inventory: inventory.service,
      dispatch: dispatch.service,
      platforms: Object.fromEntries(PLATFORMS.map((platform, i) => [platform.name, platforms[i]!])),
      billing: billing.service,
      payments: payments.service,
      worker: worker.service,
      conversions: conversions.service,
      events: webhooks.service,
      klaviyo: klaviyo.service,
      storefront,
    },
  };
}
