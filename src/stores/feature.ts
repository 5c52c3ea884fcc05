import type { Config } from '../config.ts';
import type { ChangeBus } from '../core/changes/bus.ts';
import { ConnectionRepository } from '../core/connectors/connections.ts';
import type { Database } from '../core/db/database.ts';
import type { Feature } from '../core/feature.ts';
import { bindOperations } from '../core/operations.ts';
import { SecretBox } from '../core/sealed-secrets.ts';
import { twilioAccountCheck } from '../sms/account-check.ts';
import { storeOperations } from './operations.ts';
import type { StorePlanUsage } from './schemas.ts';
import { StoreService, type OwnerChangeListener } from './service.ts';
import { StoreRepository } from './repository.ts';

export interface StoresDeps {
  config: Config;
  database: Database;
  /** Where changes to stores are announced to every process. */
  changes: ChangeBus;
  /** What other features end when the store changes hands (src/domain.ts lists them). */
  onOwnerChange: OwnerChangeListener[];
}

/**
 * Stores, their owners and settings. The store operations show the plan in force, which billing
 * (built on the stores) reports: `withStoreOperations` adds them once it is built.
 */
export function buildStores({ config, database, changes, onOwnerChange }: StoresDeps): Feature<StoreService> {
  return { service: storeService(config, database, changes, onOwnerChange) };
}

/** The stores feature with its operations, over the plan reports of the billing feature. */
export function withStoreOperations(stores: Feature<StoreService>, planOf: (shop: string) => Promise<StorePlanUsage>): Feature<StoreService> {
  return { ...stores, operations: bindOperations(storeOperations, { stores: stores.service, planOf }) };
}

/** The stores' service alone, for the commands that need no app (`restock store create`, `dashboard link`). */
export function storeService(config: Config, database: Database, changes: ChangeBus, onOwnerChange: OwnerChangeListener[] = []): StoreService {
  // The Admin API a store's view speaks of is Shopify's, whose credentials are the store's Shopify connection.
  const shopifyConnections = new ConnectionRepository(database, 'shopify');
  return new StoreService(new StoreRepository(database, changes), {
    onOwnerChange,
    adminApiConnected: (domain) => shopifyConnections.usable(domain),
    secrets: SecretBox.fromKey(config.encryptionKey),
    defaults: config.dispatch.defaults,
    tenantOutbound: config.tenantOutbound,
    smsAccountCheck: twilioAccountCheck(config.sms),
  });
}
