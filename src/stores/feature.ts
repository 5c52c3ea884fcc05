import type { Config } from '../config.ts';
import type { ChangeBus } from '../core/changes/bus.ts';
import type { Database } from '../core/db/database.ts';
import type { Feature } from '../core/feature.ts';
import { SecretBox } from '../core/sealed-secrets.ts';
import { twilioAccountCheck } from '../sms/account-check.ts';
import { storeRoutes } from './routes.ts';
import type { StorePlanUsage } from './schemas.ts';
import { StoreService, type OwnerChangeListener } from './service.ts';
import { StoreRepository } from './repository.ts';

export interface StoresDeps {
  config: Config;
  database: Database;
  /** Where changes to stores are announced to every process. */
  changes: ChangeBus;
  /** The store's plan and allowance, which the billing feature (built later) reports. */
  planUsage(shop: string): Promise<StorePlanUsage>;
  /** What other features end when the store changes hands (src/features.ts lists them). */
  onOwnerChange: OwnerChangeListener[];
}

/** Stores, their owners and settings. */
export function buildStores({ config, database, changes, planUsage, onOwnerChange }: StoresDeps): Feature<StoreService> {
  const service = storeService(config, database, changes, onOwnerChange);
  return { service, routes: [storeRoutes(service, planUsage)] };
}

/** The stores' service alone, for the commands that need no app (`restock store create`, `dashboard link`). */
export function storeService(config: Config, database: Database, changes: ChangeBus, onOwnerChange: OwnerChangeListener[] = []): StoreService {
  return new StoreService(new StoreRepository(database, changes), {
    onOwnerChange,
    secrets: SecretBox.fromKey(config.encryptionKey),
    defaults: config.dispatch.defaults,
    tenantOutbound: config.tenantOutbound,
    smsAccountCheck: twilioAccountCheck(config.sms),
  });
}
