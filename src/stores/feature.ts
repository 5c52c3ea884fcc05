import type { Config } from '../config.ts';
import type { ChangeBus } from '../core/changes/bus.ts';
import { ConnectionRepository } from '../core/connectors/connections.ts';
import type { Database } from '../core/db/database.ts';
import type { Feature } from '../core/feature.ts';
import { bindOperations } from '../core/operations.ts';
import { SecretBox } from '../core/sealed-secrets.ts';
import { twilioAccountCheck } from '../sms/feature.ts';
import { storeOperations } from './operations.ts';
import type { StoreDomains, StorePlanUsage } from './schemas.ts';
import { StoreService, type OwnerChangeListener } from './service.ts';
import { StoreRepository } from './repository.ts';

export interface StoresDeps {
  config: Config;
  database: Database;
  /** Where changes to stores are announced to every process. */
  changes: ChangeBus;
  /** What other features end when the store changes hands (src/domain.ts lists them). */
  onOwnerChange: OwnerChangeListener[];
  /** Store domains that tell their platform (the platform registry's). */
  storeDomains: StoreDomains;
}

/**
 * Stores, their owners and settings. The store operations show the plan in force, which billing
 * (built on the stores) reports: `withStoreOperations` adds them once it is built.
 */
export function buildStores({ config, database, changes, onOwnerChange, storeDomains }: StoresDeps): Feature<StoreService> {
  return { service: storeService(config, database, changes, storeDomains, onOwnerChange) };
}

/** The stores feature with its operations, over the plan reports of the billing feature. */
export function withStoreOperations(stores: Feature<StoreService>, planOf: (shop: string) => Promise<StorePlanUsage>): Feature<StoreService> {
  return { ...stores, operations: bindOperations(storeOperations, { stores: stores.service, planOf }) };
}

/** The stores' service alone, for the commands that need no app (`restock store create`, `dashboard link`). */
export function storeService(config: Config, database: Database, changes: ChangeBus, storeDomains: StoreDomains, onOwnerChange: OwnerChangeListener[] = []): StoreService {
  return new StoreService(new StoreRepository(database, changes), {
    onOwnerChange,
    storeDomains,
    adminApiConnected: (domain, platform) => new ConnectionRepository(database, platform).usable(domain),
    secrets: SecretBox.fromKey(config.encryptionKey),
    defaults: config.dispatch.defaults,
    tenantOutbound: config.tenantOutbound,
    smsAccountCheck: twilioAccountCheck(config.channels.sms),
  });
}
