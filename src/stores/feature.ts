import type { Config } from '../config.ts';
import type { Database } from '../core/db/database.ts';
import type { Feature } from '../core/feature.ts';
import { SecretBox } from '../core/sealed-secrets.ts';
import { storeRoutes } from './routes.ts';
import type { StorePlanUsage } from './schemas.ts';
import { StoreService, type OwnerChangeListener } from './service.ts';
import { StoreRepository } from './repository.ts';

export interface StoresDeps {
  config: Config;
  database: Database;
  /** The store's plan and allowance, which the billing feature (built later) reports. */
  planUsage(shop: string): Promise<StorePlanUsage>;
  /** What other features end when the store changes hands (src/features.ts lists them). */
  onOwnerChange: OwnerChangeListener[];
}

/** Stores, their owners and settings. */
export function buildStores({ config, database, planUsage, onOwnerChange }: StoresDeps): Feature<StoreService> {
  const service = storeService(config, database, onOwnerChange);
  return { service, routes: [storeRoutes(service, planUsage)] };
}

/** The stores' service alone, for the commands that need no app (`restock store create`, `dashboard link`). */
export function storeService(config: Config, database: Database, onOwnerChange: OwnerChangeListener[] = []): StoreService {
  return new StoreService(new StoreRepository(database), {
    onOwnerChange,
    secrets: SecretBox.fromKey(config.encryptionKey),
    defaults: config.dispatch.defaults,
    tenantOutbound: config.tenantOutbound,
  });
}
