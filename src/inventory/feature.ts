import type { ChangeBus } from '../core/changes/bus.ts';
import type { Database } from '../core/db/database.ts';
import type { EventSink } from '../core/events.ts';
import type { Feature } from '../core/feature.ts';
import { bindOperations } from '../core/operations.ts';
import type { StoreService } from '../stores/service.ts';
import { inventoryOperations } from './operations.ts';
import { InventoryService, type RestockSink } from './service.ts';
import { InventoryRepository } from './repository.ts';

export interface InventoryDeps {
  database: Database;
  /** Where changes to stock are announced to every process. */
  changes: ChangeBus;
  stores: StoreService;
  /** Where detected restocks go (the dispatch feature). */
  restocks: RestockSink;
  /** Where restocks are announced as store events. */
  events?: EventSink;
}

/** Known stock, what counts as a restock, and the inventory API. */
export function buildInventory({ database, changes, stores, restocks, events }: InventoryDeps): Feature<InventoryService> {
  const service = new InventoryService(new InventoryRepository(database, changes), stores, restocks, events);
  return { service, operations: bindOperations(inventoryOperations, service) };
}
