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

/** What the widget's calls answer, also through Shopify's app proxy (the Shopify feature's routes). */
export function storefrontService({ stores, inventory, alerts }: StorefrontDeps): StorefrontService {
  return new StorefrontService(stores, inventory, alerts);
}

/** The widget script and the public calls it makes (minified once, at start). */
export async function buildStorefront(deps: StorefrontDeps): Promise<Feature<StorefrontService>> {
  const service = storefrontService(deps);
  return { service, routes: [storefrontRoutes(service, await loadWidgetAsset())] };
}
