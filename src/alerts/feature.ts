import type { Config } from '../config.ts';
import type { Database } from '../core/db/database.ts';
import type { EventSink } from '../core/events.ts';
import type { Feature } from '../core/feature.ts';
import type { TokenSigner } from '../core/signed-token.ts';
import { alertRoutes } from './routes.ts';
import { SubscriptionService } from './service.ts';
import { SubscriptionRepository, WaitingRepository } from './repository.ts';
import { unsubscribeRoutes } from './unsubscribe-routes.ts';

export interface AlertsDeps {
  config: Config;
  database: Database;
  /** Signs the one-click unsubscribe links. */
  signer: TokenSigner;
  /** Where `subscription.created` is announced (the store's outgoing webhooks). */
  events: EventSink;
}

/** Alert subscriptions: subscribeAlert and its reads, and the one-click unsubscribe page. */
export function buildAlerts({ config, database, signer, events }: AlertsDeps): Feature<SubscriptionService> {
  const service = new SubscriptionService(new SubscriptionRepository(database), new WaitingRepository(database), signer, config.baseUrl, events);
  return { service, routes: [alertRoutes(service), unsubscribeRoutes(service)] };
}
