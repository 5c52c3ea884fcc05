import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import { flowTriggerJob, flowTriggerSink } from './flow.ts';
import type { SubscriptionService } from '../alerts/service.ts';
import type { AppBilling } from '../billing/service.ts';
import type { Config } from '../config.ts';
import type { OrderSink } from '../conversions/service.ts';
import type { Database } from '../core/db/database.ts';
import { ConnectionRepository } from '../core/connectors/connections.ts';
import { reconcileJobs } from '../core/connectors/connector.ts';
import type { Feature } from '../core/feature.ts';
import type { OpenedPlatform, PlatformOpenNeeds } from '../platform.ts';
import type { MailTransport } from '../core/mail/transport.ts';
import type { Metrics } from '../core/metrics.ts';
import { NotConfigured } from '../core/problems.ts';
import { SecretBox } from '../core/sealed-secrets.ts';
import type { WorkerJob } from '../core/jobs.ts';
import type { InventoryService } from '../inventory/service.ts';
import type { StorefrontService } from '../storefront/service.ts';
import type { StoreService } from '../stores/service.ts';
import { AccessTokens } from './access-tokens.ts';
import { AdminApi } from './admin-api.ts';
import { appProxyRoutes } from './app-proxy-routes.ts';
import { APP_PROXY_PATH } from './platform.ts';
import { shopifyBilling } from './billing.ts';
import { ShopifyConnections } from './connections.ts';
import { CALLBACK_PATH, ShopifyInstaller } from './install.ts';
import { installRoutes } from './install-routes.ts';
import { shopifyConnector } from './reconcile.ts';
import { createShopifyApi } from './shopify-api.ts';
import { shopifyHolds } from './holds.ts';
import type { UnitHolds } from '../dispatch/service.ts';
import { WebhookEventRepository } from './webhook-events.ts';
import { webhookRoutes } from './webhook-routes.ts';
import { webhookJob, type ShopifyBillingSink } from './webhook-worker.ts';

export interface ShopifyDeps {
  config: Config;
  database: Database;
  log: FastifyBaseLogger;
  /** Where the webhook queue's lag is measured. */
  metrics?: Metrics;
  mail: MailTransport;
  stores: StoreService;
  inventory: InventoryService;
  alerts: SubscriptionService;
  dispatch: {
    eraseCustomer(storeDomain: string, email: string): Promise<number>;
    eraseStore(storeDomain: string): Promise<void>;
  };
  billing: ShopifyBillingSink;
  /** Where the order webhooks' orders, refunds and cancellations go (the conversions service). */
  orders: OrderSink;
  /** Answers the widget's calls that come through the app proxy. */
  storefront: StorefrontService;
}

export interface ShopifyFeature extends Feature<undefined> {
  jobs: WorkerJob[];
  /** The Shopify stores' connections: their Admin API tokens, read and refreshed here only. */
  connections: ShopifyConnections;
  /** The store an App Bridge session token is for (absent when the app is not configured); throws a problem when refused. */
  shopOfSessionToken?: (token: string) => Promise<string>;
  /** A unit held for a shopper as a draft order (absent when the app is not configured). */
  holds?: UnitHolds;
}

export const WEBHOOK_PATH = '/webhooks/shopify';

/**
 * The Shopify app's clients, opened before the features that need them: the Admin API (with the
 * stores' tokens) and Shopify Billing, which the billing feature takes when it is built. Absent
 * without SHOPIFY_API_KEY and SHOPIFY_API_SECRET.
 */
export interface ShopifyApp {
  api: ReturnType<typeof createShopifyApi>;
  connections: ShopifyConnections;
  admin: AdminApi;
  billing: AppBilling;
}

export function openShopifyApp({ config, database, stores, log }: Pick<ShopifyDeps, 'config' | 'database' | 'stores' | 'log'>): ShopifyApp | undefined {
  const app = config.platforms.shopify;
  if (!app) return undefined;
  const api = createShopifyApi(app, config.baseUrl, log.child({ feature: 'shopify' }));
  const connections = shopifyConnections({ config, database, stores });
  const admin = new AdminApi(api, new AccessTokens(api, connections, log.child({ feature: 'shopify' })));
  return { api, connections, admin, billing: shopifyBilling(stores, admin, app.alwaysTestCharges) };
}

/** The Shopify stores' connections, their tokens sealed with RESTOCK_ENCRYPTION_KEY. */
export function shopifyConnections({ config, database, stores }: Pick<ShopifyDeps, 'config' | 'database' | 'stores'>): ShopifyConnections {
  return new ShopifyConnections(new ConnectionRepository(database, 'shopify'), stores, SecretBox.fromKey(config.encryptionKey));
}

/**
 * The Shopify app: install (OAuth and token exchange), the webhook endpoint and its queue, and
 * periodic reconciliation, over the app opened by `openShopifyApp` (opened here when not given).
 * Without SHOPIFY_API_KEY and SHOPIFY_API_SECRET the routes still exist and say what to
 * configure; there is then nothing for the worker to do.
 */
export function buildShopify(deps: ShopifyDeps & { app?: ShopifyApp | undefined }): ShopifyFeature {
  const { config } = deps;
  const opened = deps.app ?? openShopifyApp(deps);
  if (!config.platforms.shopify || !opened) return { service: undefined, connections: shopifyConnections(deps), routes: [notConfiguredRoutes], jobs: [] };

  const log = deps.log.child({ feature: 'shopify' });
  const { api: shopify, admin, connections } = opened;
  const events = new WebhookEventRepository(deps.database);
  const installer = new ShopifyInstaller(shopify, admin, connections, log);

  const jobs: WorkerJob[] = [
    webhookJob({
      events,
      inventory: deps.inventory,
      stores: deps.stores,
      connections,
      alerts: deps.alerts,
      dispatch: deps.dispatch,
      mail: deps.mail,
      admin,
      billing: deps.billing,
      orders: deps.orders,
      log,
      ...(deps.metrics ? { metrics: deps.metrics } : {}),
      maxAttempts: config.dispatch.maxAttempts,
      retryBaseMs: config.dispatch.retryBaseMs,
    }),
  ];
  jobs.push(...reconcileJobs(shopifyConnector({ connections, alerts: deps.alerts, inventory: deps.inventory, admin }), config.dispatch.reconcileIntervalMinutes, log));
  // The Flow triggers the sink queued (flow.ts), fired with each store's token.
  jobs.push(flowTriggerJob(deps.database, admin, log));

  return {
    service: undefined,
    connections,
    jobs,
    holds: shopifyHolds(admin),
    shopOfSessionToken: (token) => installer.shopOfSessionToken(token),
    // Each in a plugin of its own: the webhook route reads raw bodies, the others do not.
    routes: [
      webhookRoutes({ shopify, events, baseUrl: config.baseUrl }),
      installRoutes({ installer, apiKey: config.platforms.shopify.apiKey }),
      appProxyRoutes({ shopify, storefront: deps.storefront, policy: deps.config.tenantOutbound }),
    ],
  };
}

const NOT_CONFIGURED =
  'The Shopify app is not configured: set SHOPIFY_API_KEY and SHOPIFY_API_SECRET (and RESTOCK_ENCRYPTION_KEY, which seals the stores\' tokens).';

/** The same addresses, answering 501 before reading a body, so a misconfiguration is plain to see. */
async function notConfiguredRoutes(app: FastifyInstance): Promise<void> {
  const refuse = async () => {
    throw new NotConfigured(NOT_CONFIGURED);
  };
  const hidden = { schema: { hide: true }, onRequest: refuse, handler: refuse };
  app.post(WEBHOOK_PATH, hidden);
  app.get('/shopify/install', { ...hidden, config: { page: true } });
  app.get(CALLBACK_PATH, { ...hidden, config: { page: true } });
  app.post('/shopify/token-exchange', hidden);
  app.get(`${APP_PROXY_PATH}/availability`, hidden);
  app.post(`${APP_PROXY_PATH}/subscriptions`, hidden);
}

/**
 * Opens Shopify for the assembly (its `Platform.open`, src/shopify/platform.ts). Its app is opened
 * first, since billing takes Shopify Billing from it; inside the Shopify admin, the dashboard signs
 * owners in with the admin's session tokens.
 */
export function openShopify(needs: PlatformOpenNeeds): OpenedPlatform {
  const app = openShopifyApp(needs);
  return {
    ...(app ? { appBilling: app.billing, events: flowTriggerSink(needs.database) } : {}),
    build(all) {
      const feature = buildShopify({ ...all, app });
      const apiKey = all.config.platforms.shopify?.apiKey;
      return { ...feature, dashboard: feature.shopOfSessionToken && apiKey ? { shopOfSessionToken: feature.shopOfSessionToken, shopifyApiKey: apiKey } : {} };
    },
  };
}
