import type { SubscriptionService } from '../alerts/service.ts';
import { chunks } from '../core/chunks.ts';
import { nowIso } from '../core/clock.ts';
import type { StoreConnector } from '../core/connectors/connector.ts';
import type { InventoryService } from '../inventory/service.ts';
import type { StockReport } from '../core/connectors/stock-report.ts';
import type { AdminApi } from './admin-api.ts';
import type { ShopifyConnections } from './connections.ts';
import { PRODUCTS_PER_QUERY, readProductStates } from './catalog.ts';
import { productStateReports, unlistedCountries } from './payloads.ts';

/** What reconciliation tells the inventory: stock reports, and the countries a product is not sold in. */
export type ReconcileInventory = Pick<InventoryService, 'reportStock' | 'setUnlistedCountries'>;

/** What reconciliation asks of the subscriptions: the products and countries shoppers wait for. */
export type ReconcileSubscriptions = Pick<SubscriptionService, 'waitingProducts' | 'waitingCountries'>;

/** Products with waiting shoppers compared per store and run. */
const PRODUCTS_PER_STORE = 250;

export interface ReconcileDeps {
  connections: ShopifyConnections;
  alerts: ReconcileSubscriptions;
  inventory: ReconcileInventory;
  admin: AdminApi;
}

/**
 * Shopify's side of reconciliation (core/connectors): webhooks can arrive hours late or not at
 * all, so each installed store's products that shoppers wait for are read from the Admin API and
 * reported as they are.
 */
export function shopifyConnector(deps: ReconcileDeps): StoreConnector {
  return {
    platform: 'shopify',
    storesToReconcile: (intervalMs, limit) => deps.connections.storesToReconcile(intervalMs, limit),
    async reconcileStore(shop) {
      try {
        return await reconcileStore(deps, shop);
      } finally {
        await deps.connections.markReconciled(shop);
      }
    },
  };
}

/** Reports the store's waiting products as the Admin API has them now; returns how many were read. */
async function reconcileStore(deps: ReconcileDeps, shop: string): Promise<number> {
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
export async function readProductReports(deps: Pick<ReconcileDeps, 'connections' | 'alerts' | 'inventory' | 'admin'>, shop: string, token: string, productIds: string[]): Promise<StockReport[]> {
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
async function mayReadPublications(deps: Pick<ReconcileDeps, 'connections'>, shop: string): Promise<boolean> {
  const scopes = (await deps.connections.scopesOf(shop)).split(',').map((scope) => scope.trim());
  return scopes.includes('read_publications') || scopes.includes('write_publications');
}
