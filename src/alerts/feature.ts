import type { Config } from '../config.ts';
import type { Database } from '../core/db/database.ts';
import type { EventSink } from '../core/events.ts';
import type { Feature } from '../core/feature.ts';
import type { PointedIds } from '../core/platforms.ts';
import type { FastifyBaseLogger } from 'fastify';
import type { MailTransport } from '../core/mail/transport.ts';
import type { TokenSigner } from '../core/signed-token.ts';
import type { EffectiveSettings } from '../stores/settings.ts';
import { confirmationJobs } from './confirmations.ts';
import { confirmRoutes } from './confirm-routes.ts';
import { ContactPointRepository, type ContactPointRow } from './contact-points.ts';
import { alertRoutes } from './routes.ts';
import { SubscriptionService } from './service.ts';
import { SubscriptionRepository, WaitingRepository } from './repository.ts';
import { stopRoutes } from './stop-routes.ts';
import { unsubscribeRoutes } from './unsubscribe-routes.ts';

export interface AlertsDeps {
  config: Config;
  database: Database;
  /** Signs the one-click unsubscribe links. */
  signer: TokenSigner;
  /** Where `subscription.created` is announced (the store's outgoing webhooks). */
  events: EventSink;
  mail: MailTransport;
  log: FastifyBaseLogger;
  /** The store's settings (double opt-in, language). */
  settingsOf(storeDomain: string): Promise<EffectiveSettings>;
  /** Refuses ids of another platform than the store's (the stores service). */
  requireStorePlatform(storeDomain: string, ids: PointedIds): Promise<void>;
  /** A product's title, for confirmation mail. */
  titleOf(storeDomain: string, productId: string, variantId: string | null): Promise<string | undefined>;
  /** Texts a pending number its "reply YES" request (the SMS feature, built later: read when the job runs). */
  textConfirmation?: () => ((point: ContactPointRow) => Promise<void>) | undefined;
}

/** Alert subscriptions: subscribeAlert and its reads, and the one-click unsubscribe page. */
export function buildAlerts({ config, database, signer, events, mail, log, settingsOf, requireStorePlatform, titleOf, textConfirmation }: AlertsDeps): Feature<SubscriptionService> {
  const contactPoints = new ContactPointRepository(database);
  const service = new SubscriptionService(new SubscriptionRepository(database), new WaitingRepository(database), signer, config.baseUrl, events, { contactPoints, settingsOf, requireStorePlatform });
  const localeOf = async (storeDomain: string) => (await settingsOf(storeDomain)).locale;
  return {
    service,
    routes: [alertRoutes(service), unsubscribeRoutes(service), confirmRoutes(service), stopRoutes(service)],
    jobs: confirmationJobs({
      alerts: service,
      mail,
      log,
      expiryHours: config.doubleOptInExpiryHours,
      titleOf,
      localeOf,
      get textConfirmation() {
        return textConfirmation?.();
      },
    }),
  };
}
