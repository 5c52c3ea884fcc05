import type { FastifyBaseLogger } from 'fastify';
import type { WorkerJob } from '../jobs.ts';

/** Stores looked at per reconciliation run. */
const STORES_PER_RUN = 50;
/** How often the job looks for stores that are due, so that many stores are spread out over the interval. */
const LOOK_EVERY_MS = 60_000;

/**
 * What each platform's folder (src/shopify, src/woocommerce, src/bigcommerce) does for its
 * stores, in the same words. Connecting (an app install, keys, an OAuth grant) and the platform's
 * webhooks arrive on the folder's own routes, since each platform calls and signs differently;
 * what they come to is common:
 * - a connection: the store is marked connected (`StoreService.markConnected`, or the Shopify
 *   install), with credentials sealed and webhooks made on the platform;
 * - a verified event: stock reports (`InventoryService.reportStock`, `verified: true`);
 * - reconciliation: the products shoppers wait for, read from the platform and reported as they are,
 *   because webhooks arrive late or not at all;
 * - an end (uninstall, disconnection, credentials refused): `StoreService.uninstall`, after which
 *   nothing more is sent for the store.
 */
export interface StoreConnector {
  /** The platform of the stores it serves, as in their ids (`gid://<platform>/…`). */
  readonly platform: string;
  /** Connected stores not reconciled within `intervalMs`, least recently reconciled first. */
  storesToReconcile(intervalMs: number, limit: number): Promise<string[]>;
  /**
   * Reads the products shoppers wait for from the platform and reports them as they are; returns
   * how many reports were made. Marks the store reconciled, whatever came of it.
   */
  reconcileStore(domain: string): Promise<number>;
}

/** Every interval each connected store is reconciled once; one store's failure does not hold up the others. */
function reconcileJob(connector: StoreConnector, intervalMs: number, log: FastifyBaseLogger): WorkerJob {
  return {
    name: `${connector.platform}-reconcile`,
    everyMs: Math.min(intervalMs, LOOK_EVERY_MS),
    async run() {
      const due = await connector.storesToReconcile(intervalMs, STORES_PER_RUN);
      for (const store of due) {
        try {
          await connector.reconcileStore(store);
        } catch (err) {
          // A revoked credential, throttling, a site down: tried again next interval.
          log.warn({ store, reason: (err as Error).message }, `${connector.platform} reconciliation failed; will retry next interval`);
        }
      }
      return due.length;
    },
  };
}

/** The reconciliation job of a connector, when reconciliation is on (an interval of 0 turns it off). */
export function reconcileJobs(connector: StoreConnector, intervalMinutes: number, log: FastifyBaseLogger): WorkerJob[] {
  return intervalMinutes > 0 ? [reconcileJob(connector, intervalMinutes * 60_000, log)] : [];
}
