import type { FastifyBaseLogger } from 'fastify';
import type { Config } from '../config.ts';
import { reconcileJobs } from '../core/connectors/connector.ts';
import { ConnectionRepository } from '../core/connectors/connections.ts';
import type { Database } from '../core/db/database.ts';
import type { Feature } from '../core/feature.ts';
import { bindOperations } from '../core/operations.ts';
import { SecretBox } from '../core/sealed-secrets.ts';
import type { OpenedPlatform } from '../platform.ts';
import { vendurePanel } from './dashboard-panel.ts';
import { vendureOperations } from './operations.ts';
import { deliveryRoutes } from './routes.ts';
import { VendureService, type VendureInventory, type VendureOrders, type VendureStores } from './service.ts';

export interface VendureFeatureDeps {
  config: Config;
  database: Database;
  log: FastifyBaseLogger;
  stores: VendureStores;
  inventory: VendureInventory;
  orders: VendureOrders;
  alerts: { waitingProducts(storeDomain: string, limit?: number): Promise<string[]> };
}

/**
 * Vendure stores: connection by an Admin API key, the Restock plugin's signed deliveries, and
 * periodic reconciliation through the Admin API (docs/vendure.md).
 */
export function buildVendure(deps: VendureFeatureDeps): Feature<VendureService> {
  const log = deps.log.child({ feature: 'vendure' });
  const service = new VendureService({
    connections: new ConnectionRepository(deps.database, 'vendure'),
    stores: deps.stores,
    inventory: deps.inventory,
    orders: deps.orders,
    alerts: deps.alerts,
    secrets: SecretBox.fromKey(deps.config.encryptionKey),
    policy: deps.config.tenantOutbound,
    log,
  });
  return {
    service,
    jobs: reconcileJobs(service, deps.config.dispatch.reconcileIntervalMinutes, log),
    operations: bindOperations(vendureOperations, service),
    routes: [deliveryRoutes(service, deps.config.baseUrl)],
  };
}

/** Opens Vendure for the assembly (its `Platform.open`, src/vendure/platform.ts): its dashboard page is the connection's. */
export function openVendure(): OpenedPlatform {
  return {
    build(needs) {
      const feature = buildVendure(needs);
      return { ...feature, dashboardPanel: vendurePanel(feature.service, needs.config.baseUrl) };
    },
  };
}
