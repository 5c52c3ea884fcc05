import type { SubscriptionService } from '../alerts/service.ts';
import type { Feature } from '../core/feature.ts';
import { bindOperations } from '../core/operations.ts';
import type { InventoryService } from '../inventory/service.ts';
import { purchasingOperations } from './operations.ts';
import { purchasingRoutes } from './routes.ts';
import { PurchasingService } from './service.ts';

export interface PurchasingFeatureDeps {
  alerts: Pick<SubscriptionService, 'rankedWaitlists'>;
  inventory: Pick<InventoryService, 'catalogEntries'>;
}

/** The purchasing view (docs/purchasing.md): waitlists ranked, named and priced, as JSON pages and CSV. */
export function buildPurchasing(deps: PurchasingFeatureDeps): Feature<PurchasingService> {
  const service = new PurchasingService({ waitlists: deps.alerts, catalog: deps.inventory });
  return { service, operations: bindOperations(purchasingOperations, service), routes: [purchasingRoutes(service)] };
}
