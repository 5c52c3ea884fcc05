import { bindOperations } from '../core/operations.ts';
import type { FastifyBaseLogger } from 'fastify';
import type { Config } from '../config.ts';
import { reconcileJobs } from '../core/connectors/connector.ts';
import { ConnectionRepository } from '../core/connectors/connections.ts';
import type { Database } from '../core/db/database.ts';
import type { Feature } from '../core/feature.ts';
import type { OpenedPlatform } from '../platform.ts';
import { SecretBox } from '../core/sealed-secrets.ts';
import type { InventoryService } from '../inventory/service.ts';
import type { StoreService } from '../stores/service.ts';
import { bigCommerceOperations, type BigCommerceConnections } from './operations.ts';
import { NotConfigured } from '../core/problems.ts';
import { bigCommerceRoutes, NOT_CONFIGURED, notConfiguredRoutes, webhookRoutes } from './routes.ts';
import { BigCommerceService } from './service.ts';

export interface BigCommerceFeatureDeps {
  config: Config;
  database: Database;
  log: FastifyBaseLogger;
  stores: StoreService;
  inventory: InventoryService;
  alerts: { waitingProducts(storeDomain: string, limit?: number): Promise<string[]> };
}

/**
 * BigCommerce stores, installed as the app: the callbacks, the webhooks and periodic
 * reconciliation (docs/bigcommerce.md). Without BIGCOMMERCE_CLIENT_ID and
 * BIGCOMMERCE_CLIENT_SECRET the callbacks answer 501 and there is nothing to reconcile.
 */
export function buildBigCommerce(deps: BigCommerceFeatureDeps): Feature<BigCommerceService | undefined> {
  const app = deps.config.platforms.bigcommerce;
  if (!app) return { service: undefined, operations: bindOperations(bigCommerceOperations, notConfigured), routes: [notConfiguredRoutes] };
  const log = deps.log.child({ feature: 'bigcommerce' });
  const service = new BigCommerceService({
    app,
    connections: new ConnectionRepository(deps.database, 'bigcommerce'),
    stores: deps.stores,
    inventory: deps.inventory,
    alerts: deps.alerts,
    secrets: SecretBox.fromKey(deps.config.encryptionKey),
    baseUrl: deps.config.baseUrl,
    log,
  });
  return {
    service,
    jobs: reconcileJobs(service, deps.config.dispatch.reconcileIntervalMinutes, log),
    operations: bindOperations(bigCommerceOperations, service),
    // Each in a plugin of its own: the webhook route reads raw bodies, the others do not.
    routes: [bigCommerceRoutes(service, deps.config.baseUrl), webhookRoutes(service, deps.config.baseUrl)],
  };
}

/** Without the app's settings, its operation answers 501 as its callbacks do, naming them. */
const notConfigured: BigCommerceConnections = {
  connectionFor: async () => {
    throw new NotConfigured(NOT_CONFIGURED);
  },
};

/** Opens BigCommerce for the assembly (its `Platform.open`, src/bigcommerce/platform.ts). */
export function openBigCommerce(): OpenedPlatform {
  return { build: buildBigCommerce };
}
