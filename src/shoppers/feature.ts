import type { SubscriptionService } from '../alerts/service.ts';
import type { ConversionService } from '../conversions/service.ts';
import type { Feature } from '../core/feature.ts';
import type { DispatchService } from '../dispatch/service.ts';
import type { InventoryService } from '../inventory/service.ts';
import type { StoreService } from '../stores/service.ts';
import { shopperRoutes } from './routes.ts';
import { ShopperPageService } from './service.ts';

export { ShopperPageService } from './service.ts';

/** The shopper's page: their alerts at one store, reached by the signed link in every message. */
export function buildShoppers(deps: {
  alerts: SubscriptionService;
  dispatch: DispatchService;
  conversions: ConversionService;
  inventory: InventoryService;
  stores: StoreService;
}): Feature<ShopperPageService> {
  const service = new ShopperPageService(deps);
  // The page lives where the alerts service sends shoppers: its forms may be posted from that origin only.
  const pageOrigin = new URL(deps.alerts.shopperPageUrl('origin')).origin;
  return { service, routes: [shopperRoutes(service, pageOrigin)] };
}
