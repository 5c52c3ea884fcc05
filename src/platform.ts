import type { FastifyBaseLogger } from 'fastify';
import type { EventSink } from './core/events.ts';
import type { SubscriptionService } from './alerts/service.ts';
import type { AppBilling } from './billing/service.ts';
import type { BillingService } from './billing/service.ts';
import type { Config } from './config.ts';
import type { ConversionService } from './conversions/service.ts';
import type { Database } from './core/db/database.ts';
import type { Feature } from './core/feature.ts';
import type { MailTransport } from './core/mail/transport.ts';
import type { Metrics } from './core/metrics.ts';
import type { OperationDeclaration } from './core/operations.ts';
import type { TokenSigner } from './core/signed-token.ts';
import type { PlatformLoans } from './dashboard/feature.ts';
import type { DashboardPanel } from './core/dashboard-panel.ts';
import type { AnySlice } from './core/settings-slice.ts';
import type { DispatchService, UnitHolds } from './dispatch/service.ts';
import type { InventoryService } from './inventory/service.ts';
import type { StorefrontService } from './storefront/service.ts';
import type { StoreService } from './stores/service.ts';

/**
 * A platform Restock connects stores of (Shopify, WooCommerce, BigCommerce), as its folder hands
 * it to the registry in src/platforms.ts, the only list of platforms. Everything the rest of the
 * service knows of a platform comes through here: its name, the domains that are its stores', its
 * operations, the script that follows its product pages, and its feature (connection, webhooks,
 * reconciliation, disconnection, credentials in `store_connections`), built by the assembly in
 * dependency order like any other.
 *
 * This contract lives beside the assembly rather than in the kernel because what a platform's
 * feature is built from are the modules' services; a platform's folder imports it as types only.
 */
export interface Platform {
  /** The platform's name, as its products' ids carry it (`gid://<name>/Product/…`) and its stores record it. */
  readonly name: string;
  /** Store domains that are this platform's by themselves (a Shopify store's `*.myshopify.com`); absent where every store brings its own. */
  readonly storeDomains?: RegExp;
  /** Its declared operations (src/core/operations.ts), bound by its feature. */
  readonly operations?: ReadonlyArray<OperationDeclaration<never>>;
  /**
   * The browser script that follows the platform's product form on its stores' pages (a
   * `PlatformForm`, see src/storefront/widget.ts), served in `/platforms.js`; absent when the
   * widget needs none (Shopify's theme block tells the variant itself).
   */
  readonly widgetForm?: URL;
  /** Where the platform forwards its stores' storefront requests to the service (Shopify's app proxy), so that scripts on the store's own origin reach it. */
  readonly storefrontProxy?: string;
  /** Its slice of the service's settings (its app's credentials), handed back to its feature as `config.platforms.<name>`. */
  readonly settings?: AnySlice;
  /**
   * Opens the platform's clients before the features that take a part of them, then builds its
   * feature; it loads the feature's code (a dynamic import of its `feature.ts`), so that the
   * registry itself stays light.
   */
  open(needs: PlatformOpenNeeds): Promise<OpenedPlatform>;
}

/** What a platform's clients are opened with, before billing. */
export interface PlatformOpenNeeds {
  config: Config;
  database: Database;
  log: FastifyBaseLogger;
  stores: StoreService;
}

export interface OpenedPlatform {
  /** The platform's own billing of its apps' merchants, when its app store requires it (Shopify Billing). */
  readonly appBilling?: AppBilling;
  /** Where the platform hears of its stores' events (Shopify Flow triggers), told with the other sinks before any feature announces. */
  readonly events?: EventSink;
  build(needs: PlatformNeeds): PlatformFeature;
}

/** What every platform's feature may be built from: the features assembled before the platforms. */
export interface PlatformNeeds extends PlatformOpenNeeds {
  metrics: Metrics;
  mail: MailTransport;
  signer: TokenSigner;
  inventory: InventoryService;
  alerts: SubscriptionService;
  dispatch: DispatchService;
  billing: BillingService;
  /** Where orders, refunds and cancellations go (attribution). */
  orders: ConversionService;
  /** Answers the widget's calls that reach the service through the platform (Shopify's app proxy). */
  storefront: StorefrontService;
}

/** A platform's feature, and what it gives the dashboard: its own page, its admin's sign-in. */
export interface PlatformFeature extends Feature<unknown> {
  /** The platform's page in the dashboard, shown to its stores only (a WooCommerce store's connection). */
  dashboardPanel?: DashboardPanel;
  dashboard?: PlatformLoans;
  /** Holding a unit for one shopper until a time, where the platform can (Shopify's draft orders); see docs/dispatch.md, "Reserved units". */
  holds?: UnitHolds;
}
