import type { SubscriptionService } from '../alerts/service.ts';
import type { Feature } from '../core/feature.ts';
import type { InventoryService } from '../inventory/service.ts';
import type { StoreService } from '../stores/service.ts';
import { storefrontRoutes } from './routes.ts';
import { StorefrontService } from './service.ts';
import { loadWidgetAsset } from './widget-asset.ts';

export interface StorefrontDeps {
  stores: StoreService;
  inventory: InventoryService;
  alerts: SubscriptionService;
}

/** The widget script and the public calls it makes (minified once, at start). */
export async function buildStorefront({ stores, inventory, alerts }: StorefrontDeps): Promise<Feature<StorefrontService>> {
  const service = new StorefrontService(stores, inventory, alerts);
  return { service, routes: [storefrontRoutes(service, await loadWidgetAsset())] };
}
