import type { SubscriptionService } from '../alerts/service.ts';
import type { BillingService } from '../billing/service.ts';
import type { ConversionService } from '../conversions/service.ts';
import type { WebhookService } from '../webhooks/feature.ts';
import type { Config } from '../config.ts';
import { nowIso } from '../core/clock.ts';
import type { Database } from '../core/db/database.ts';
import type { Feature } from '../core/feature.ts';
import type { MailTransport } from '../core/mail/transport.ts';
import type { TokenSigner } from '../core/signed-token.ts';
import type { DispatchService } from '../dispatch/service.ts';
import type { InventoryService } from '../inventory/service.ts';
import { installedAsShopifyApp, type StoreService } from '../stores/service.ts';
import { dashboardRoutes } from './routes.ts';
import { DashboardService } from './service.ts';
import { DashboardSignIn } from './sign-in.ts';
import { DashboardRepository } from './repository.ts';
import type { DashboardPanel } from '../core/dashboard-panel.ts';
import { klaviyoPanel, type DashboardKlaviyo } from './klaviyo-panel.ts';

const SWEEP_EVERY_MS = 60_000;

export interface DashboardDeps {
  config: Config;
  database: Database;
  mail: MailTransport;
  stores: StoreService;
  alerts: SubscriptionService;
  inventory: InventoryService;
  dispatch: DispatchService;
  billing: BillingService;
  conversions: ConversionService;
  webhooks: WebhookService;
  /** The store's Klaviyo connection, whose page every store has. */
  klaviyo: DashboardKlaviyo;
  /** Each platform's own page, by platform (the platform registry's `dashboardPanel`s). */
  panels?: Readonly<Record<string, DashboardPanel>>;
  /** Signs the cookie that recognises a device its owner signed in from before. */
  signer?: TokenSigner;
  /** The store an App Bridge session token is for (absent when the Shopify app is not configured). */
  shopOfSessionToken?: (token: string) => Promise<string>;
  /** The Shopify app's client id, which App Bridge reads from the pages (absent without the app). */
  shopifyApiKey?: string;
}

/** What a platform's feature lends the dashboard (src/platform.ts): its admin's sign-in, when the dashboard can be shown inside that admin. */
export type PlatformLoans = Pick<DashboardDeps, 'shopOfSessionToken' | 'shopifyApiKey'>;

/** How a store's owner signs in: also what `restock dashboard link` uses, without the app. */
export function dashboardSignIn(deps: Pick<DashboardDeps, 'config' | 'database' | 'mail' | 'stores' | 'shopOfSessionToken' | 'signer'>): DashboardSignIn {
  const { config } = deps;
  return new DashboardSignIn({
    store: new DashboardRepository(deps.database),
    stores: deps.stores,
    mail: deps.mail,
    baseUrl: config.baseUrl,
    linkTtlMinutes: config.dashboard.signInLinkTtlMinutes,
    sessionHours: config.dashboard.sessionHours,
    ...(deps.signer ? { signer: deps.signer } : {}),
    ...(deps.shopOfSessionToken ? { shopOfSessionToken: deps.shopOfSessionToken } : {}),
  });
}

/**
 * When a store changes hands (stores' `OwnerChangeListener`): the former owner's sessions end
 * and the sign-in links not yet used stop working.
 */
export function endFormerOwnerSessions(database: Database) {
  const repository = new DashboardRepository(database);
  return async (shop: string): Promise<string | undefined> => {
    const ended = await repository.endAccessTo(shop, nowIso());
    return ended > 0 ? `${ended} dashboard session(s) and sign-in link(s) of the former owner ended` : undefined;
  };
}

/** The merchant dashboard: sign-in by e-mailed link, its pages, and the same pages inside the Shopify admin. */
export function buildDashboard(deps: DashboardDeps): Feature<DashboardService> {
  const { config, stores } = deps;
  const signIn = dashboardSignIn(deps);
  const service = new DashboardService({
    stores,
    alerts: deps.alerts,
    inventory: deps.inventory,
    dispatch: deps.dispatch,
    billing: deps.billing,
    conversions: deps.conversions,
    webhooks: deps.webhooks,
    embeddedMail: !config.smtpUrl,
  });
  const routes = dashboardRoutes(service, signIn, {
    baseUrl: config.baseUrl,
    storeOf: async (shop) => {
      const row = await stores.findStore(shop);
      return row && { platform: row.platform ?? 'shopify', shopifyApp: installedAsShopifyApp(row) };
    },
    shopifyApiKey: deps.shopifyApiKey,
    panels: deps.panels ?? {},
    integrations: [klaviyoPanel(deps.klaviyo)],
  });
  return {
    service,
    routes: [routes],
    maintenance: [{ name: 'dashboard-sign-in-sweep', everyMs: SWEEP_EVERY_MS, run: () => signIn.sweep() }],
  };
}
