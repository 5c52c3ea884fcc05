import type { FastifyBaseLogger } from 'fastify';
import type { Config } from '../config.ts';
import type { Database } from '../core/db/database.ts';
import type { Feature } from '../core/feature.ts';
import { SecretBox } from '../core/sealed-secrets.ts';
import type { TokenSigner } from '../core/signed-token.ts';
import type { WorkerJob } from '../dispatch/jobs.ts';
import type { InventoryService } from '../inventory/service.ts';
import type { StoreService } from '../stores/service.ts';
import { ConnectionRepository } from './connections.ts';
import { deliveryRoutes, wooCommerceRoutes } from './routes.ts';
import { WooCommerceService } from './service.ts';

export interface WooCommerceFeatureDeps {
  config: Config;
  database: Database;
  log: FastifyBaseLogger;
  signer: TokenSigner;
  stores: StoreService;
  inventory: InventoryService;
  alerts: { waitingProducts(storeDomain: string, limit?: number): Promise<string[]> };
}

/** Stores looked at per reconciliation run. */
const STORES_PER_RUN = 50;
/** How often the job looks for stores that are due, so that many stores are spread out over the interval. */
const LOOK_EVERY_MS = 60_000;

/**
 * WooCommerce stores: connection by REST API keys, the site's product webhooks, and periodic
 * reconciliation through the REST API (docs/woocommerce.md).
 */
export function buildWooCommerce(deps: WooCommerceFeatureDeps): Feature<WooCommerceService> {
  const log = deps.log.child({ feature: 'woocommerce' });
  const service = new WooCommerceService({
    connections: new ConnectionRepository(deps.database),
    stores: deps.stores,
    inventory: deps.inventory,
    alerts: deps.alerts,
    secrets: SecretBox.fromKey(deps.config.encryptionKey),
    signer: deps.signer,
    policy: deps.config.tenantOutbound,
    baseUrl: deps.config.baseUrl,
    log,
  });
  const intervalMinutes = deps.config.dispatch.reconcileIntervalMinutes;
  const jobs: WorkerJob[] = intervalMinutes > 0 ? [reconcileJob(service, intervalMinutes * 60_000, log)] : [];
  return {
    service,
    jobs,
    // Each in a plugin of its own: the delivery route reads raw bodies, the others do not.
    routes: [wooCommerceRoutes(service, deps.config.baseUrl), deliveryRoutes(service, deps.config.baseUrl)],
  };
}

/** Webhooks are not delivered again when they fail: every interval each connected store's waiting products are read from the site. */
function reconcileJob(service: WooCommerceService, intervalMs: number, log: FastifyBaseLogger): WorkerJob {
  return {
    name: 'woocommerce-reconcile',
    everyMs: Math.min(intervalMs, LOOK_EVERY_MS),
    async run() {
      const due = await service.storesToReconcile(intervalMs, STORES_PER_RUN);
      for (const store of due) {
        try {
          await service.reconcileStore(store);
        } catch (err) {
          // One site's failure must not hold up the others; it is tried again next interval.
          log.warn({ store, reason: (err as Error).message }, 'WooCommerce reconciliation failed; will retry next interval');
        }
      }
      return due.length;
    },
  };
}
