import type { FastifyBaseLogger } from 'fastify';
import type { SubscriptionService } from './alerts/service.ts';
import type { Config } from './config.ts';
import type { Database } from './core/db/database.ts';
import type { DispatchService } from './dispatch/service.ts';
import type { InventoryService } from './inventory/service.ts';
import type { StoreService } from './stores/service.ts';

/**
 * What a channel's feature is built from (`build` of its `ChannelDefinition`, which the assembly
 * calls for each channel of the registry in src/channels.ts): the features assembled before the
 * channels. It lives beside the assembly rather than in the kernel because these are the
 * modules' services; a channel's folder imports it as a type only.
 */
export interface ChannelNeeds {
  config: Config;
  database: Database;
  log: FastifyBaseLogger;
  stores: StoreService;
  /** The subscriptions, which own the contact points (a phone's YES confirms its own). */
  alerts: SubscriptionService;
  /** The ledger, where delivery reports land. */
  dispatch: DispatchService;
  /** The product's title, for a confirmation request. */
  inventory: InventoryService;
  /** Where platforms forward their stores' storefront requests (Shopify's app proxy). */
  storefrontProxies: readonly string[];
}
