import type { FastifyBaseLogger } from 'fastify';
import type { SubscriptionService } from '../alerts/service.ts';
import { chunks } from '../core/chunks.ts';
import { nowIso } from '../core/clock.ts';
import type { WorkerJob } from '../dispatch/jobs.ts';
import type { InventoryService } from '../inventory/service.ts';
import type { StoreService } from '../stores/service.ts';
import type { StockReport } from '../inventory/service.ts';
import type { AdminApi } from './admin-api.ts';
import { PRODUCTS_PER_QUERY, readProductStates } from './catalog.ts';
import { productStateReports, unlistedCountries } from './payloads.ts';

/** Stores looked at per run. */
const STORES_PER_RUN = 50;
/** Products with waiting shoppers compared per store and run. */
const PRODUCTS_PER_STORE = 250;
/** How often the job looks for stores that are due, so that many stores are spread out over the interval. */
const LOOK_EVERY_MS = 60_000;

export interface ReconcileDeps {
  stores: StoreService;
  alerts: SubscriptionService;
  inventory: InventoryService;
  admin: AdminApi;
  log: FastifyBaseLogger;
}

/**
 * Webhooks can arrive hours late or not at all; every `intervalMs` each connected store's
 * products that shoppers wait for are read from the Admin API and reported as they are.
 */
export function reconcileJob(deps: ReconcileDeps, intervalMs: number): WorkerJob {
  return {
    name: 'shopify-reconcile',
    everyMs: Math.min(intervalMs, LOOK_EVERY_MS),
    run: () => reconcileDueStores(deps, intervalMs),
  };
}

/** The stores not reconciled within the interval, least recently reconciled first. */
export async function reconcileDueStores(deps: ReconcileDeps, intervalMs: number): Promise<number> {
  const dueBefore = Date.now() - intervalMs;
  let reconciled = 0;
  for (const shop of await deps.stores.storesToReconcile(STORES_PER_RUN)) {
    const store = await deps.stores.findStore(shop);
    if (store?.reconciled_at && Date.parse(store.reconciled_at) > dueBefore) continue;
    try {
      await reconcileStore(deps, shop);
    } catch (err) {
      // One store's failure (a revoked token, Shopify throttling) must not hold up the others;
      // it is tried again next interval.
      deps.log.warn({ err, shop }, 'Shopify reconciliation failed; will retry next interval');
    }
    await deps.stores.markReconciled(shop);
    reconciled++;
  }
  return reconciled;
}

/** Reports the store's waiting products as the Admin API has them now; returns how many were read. */
export async function reconcileStore(deps: ReconcileDeps, shop: string): Promise<number> {
  const token = await deps.admin.tokens.current(shop);
  if (!token) return 0;
  const reports = await readProductReports(deps, shop, token, await deps.alerts.waitingProducts(shop, PRODUCTS_PER_STORE));
  if (reports.length === 0) return 0;
  await deps.inventory.reportStock(shop, reports, { kind: 'reconciliation', ref: `reconciliation ${reports[0]!.updatedAt}`, verified: true });
  return new Set(reports.map((report) => report.productId)).size;
}

/**
 * The products as Shopify has them now, as stock reports stamped with the time of asking. Where
 * shoppers waiting for them gave their country, and the store let the app read publications,
 * the countries where a product is not on sale are recorded too.
 */
export async function readProductReports(deps: Pick<ReconcileDeps, 'stores' | 'alerts' | 'inventory' | 'admin'>, shop: string, token: string, productIds: string[]): Promise<StockReport[]> {
  const countries = (await mayReadPublications(deps, shop)) ? await deps.alerts.waitingCountries(shop, productIds) : [];
  const reports: StockReport[] = [];
  for (const ids of chunks(productIds, PRODUCTS_PER_QUERY)) {
    const asOf = nowIso();
    for (const product of await readProductStates(deps.admin, shop, token, ids, countries)) {
      if (countries.length > 0) await deps.inventory.setUnlistedCountries(shop, product.id, unlistedCountries(product));
      reports.push(...productStateReports(shop, product, asOf));
    }
  }
  return reports;
}

/** `publishedInContext` needs `read_publications`; a store installed before the app asked for it has not granted it. */
async function mayReadPublications(deps: Pick<ReconcileDeps, 'stores'>, shop: string): Promise<boolean> {
  const scopes = ((await deps.stores.findStore(shop))?.admin_scopes ?? '').split(',').map((scope) => scope.trim());
  return scopes.includes('read_publications') || scopes.includes('write_publications');
}
