import type { FastifyBaseLogger } from 'fastify';
import type { SubscriptionService } from '../alerts/service.ts';
import type { Config } from '../config.ts';
import type { Database } from '../core/db/database.ts';
import type { EventSink } from '../core/events.ts';
import type { Feature } from '../core/feature.ts';
import { bindOperations } from '../core/operations.ts';
import type { TokenSigner } from '../core/signed-token.ts';
import type { DispatchService } from '../dispatch/service.ts';
import type { InventoryService } from '../inventory/service.ts';
import type { StoreService } from '../stores/service.ts';
import { ConversionRepository } from './repository.ts';
import { conversionOperations } from './operations.ts';
import { conversionRoutes } from './routes.ts';
import { ConversionService } from './service.ts';

export interface ConversionsDeps {
  config: Config;
  database: Database;
  signer: TokenSigner;
  alerts: SubscriptionService;
  dispatch: DispatchService;
  inventory: InventoryService;
  stores: StoreService;
  events: EventSink;
  log: FastifyBaseLogger;
}

/** What alerts did after they were sent: clicks, orders credited to them, the figures and exports. */
export function buildConversions(deps: ConversionsDeps): Feature<ConversionService> {
  const service = new ConversionService(new ConversionRepository(deps.database), {
    alerts: deps.dispatch,
    waiting: deps.alerts,
    stores: deps.stores,
    products: deps.inventory,
    events: deps.events,
    exports: { subscriberRows: (caller, domain) => deps.alerts.subscriberRows(caller, domain), ledgerRows: (caller, domain) => deps.dispatch.ledgerRows(caller, domain) },
    signer: deps.signer,
    baseUrl: deps.config.baseUrl,
    log: deps.log,
  });
  return { service, operations: bindOperations(conversionOperations, service), routes: [conversionRoutes(service)] };
}
