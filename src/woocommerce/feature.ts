import { bindOperations } from '../core/operations.ts';
import type { FastifyBaseLogger } from 'fastify';
import type { Config } from '../config.ts';
import type { Database } from '../core/db/database.ts';
import { reconcileJobs } from '../core/connectors/connector.ts';
import { ConnectionRepository } from '../core/connectors/connections.ts';
import type { Feature } from '../core/feature.ts';
import type { OpenedPlatform } from '../platform.ts';
import { SecretBox } from '../core/sealed-secrets.ts';
import type { TokenSigner } from '../core/signed-token.ts';
import type { InventoryService } from '../inventory/service.ts';
import type { StoreService } from '../stores/service.ts';
import { wooCommerceOperations } from './operations.ts';
import { deliveryRoutes, wooCommerceRoutes } from './routes.ts';
import { WooCommerceService } from './service.ts';
import { wooCommercePanel } from './dashboard-panel.ts';

export interface WooCommerceFeatureDeps {
  config: Config;
  database: Database;
  log: FastifyBaseLogger;
  signer: TokenSigner;
  stores: StoreService;
  inventory: InventoryService;
  alerts: { waitingProducts(storeDomain: string, limit?: number): Promise<string[]> };
}

/**
 * WooCommerce stores: connection by REST API keys, the site's product webhooks, and periodic
 * reconciliation through the REST API (docs/woocommerce.md).
 */
export function buildWooCommerce(deps: WooCommerceFeatureDeps): Feature<WooCommerceService> {
  const log = deps.log.child({ feature: 'woocommerce' });
  const service = new WooCommerceService({
    connections: new ConnectionRepository(deps.database, 'woocommerce'),
    stores: deps.stores,
    inventory: deps.inventory,
    alerts: deps.alerts,
    secrets: SecretBox.fromKey(deps.config.encryptionKey),
    signer: deps.signer,
    policy: deps.config.tenantOutbound,
    baseUrl: deps.config.baseUrl,
    log,
  });
  return {
    service,
    // Webhooks are not delivered again when they fail: reconciliation reads what they missed.
    jobs: reconcileJobs(service, deps.config.dispatch.reconcileIntervalMinutes, log),
    // Each in a plugin of its own: the delivery route reads raw bodies, the others do not.
    operations: bindOperations(wooCommerceOperations, service),
    routes: [wooCommerceRoutes(service, deps.config.baseUrl), deliveryRoutes(service, deps.config.baseUrl)],
  };
}

/** Opens WooCommerce for the assembly (its `Platform.open`, src/woocommerce/platform.ts): its dashboard page is the connection's. */
export function openWooCommerce(): OpenedPlatform {
  return {
    build(needs) {
      const feature = buildWooCommerce(needs);
      return { ...feature, dashboardPanel: wooCommercePanel(feature.service) };
    },
  };
}
