import type { Config } from '../config.ts';
import type { ContactChannel } from '../channels.ts';
import type { Database } from '../core/db/database.ts';
import type { EventSink, SubscriptionCallbacks } from '../core/events.ts';
import type { Feature } from '../core/feature.ts';
import type { WorkerJob } from '../core/jobs.ts';
import { bindOperations } from '../core/operations.ts';
import type { PointedIds } from '../core/platforms.ts';
import type { FastifyBaseLogger } from 'fastify';
import type { MailTransport } from '../core/mail/transport.ts';
import type { TokenSigner } from '../core/signed-token.ts';
import type { EffectiveSettings } from '../stores/schemas.ts';
import { confirmationJobs } from './confirmations.ts';
import { confirmRoutes } from './confirm-routes.ts';
import { ContactPointRepository, type ContactPointRow } from './contact-points.ts';
import { alertOperations } from './operations.ts';
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
  /** The store's settings (double opt-in, language). */
  settingsOf(storeDomain: string): Promise<EffectiveSettings>;
  /** Refuses ids of another platform than the store's (the stores service). */
  requireStorePlatform(storeDomain: string, ids: PointedIds): Promise<void>;
  /** Agents' callbacks, attached by subscribeAlert (the outgoing-webhooks feature). */
  callbacks?: SubscriptionCallbacks;
}

/**
 * Alert subscriptions: subscribeAlert and its reads, and the one-click unsubscribe page. Its
 * background work needs features built on this one (inventory, SMS): `alertJobs` makes it once
 * they are.
 */
export function buildAlerts({ config, database, signer, events, settingsOf, requireStorePlatform, callbacks }: AlertsDeps): Feature<SubscriptionService> {
  const contactPoints = new ContactPointRepository(database);
  const service = new SubscriptionService(new SubscriptionRepository(database), new WaitingRepository(database), signer, config.baseUrl, events, { contactPoints, settingsOf, requireStorePlatform }, callbacks);
  return {
    service,
    operations: bindOperations(alertOperations, service),
    routes: [unsubscribeRoutes(service), confirmRoutes(service), stopRoutes(service)],
  };
}

export interface AlertJobsDeps {
  config: Config;
  alerts: SubscriptionService;
  mail: MailTransport;
  log: FastifyBaseLogger;
  /** The store's settings (its language, when the shopper's is unknown). */
  settingsOf(storeDomain: string): Promise<EffectiveSettings>;
  /** A product's title, for confirmation mail (the inventory feature). */
  titleOf(storeDomain: string, productId: string, variantId: string | null): Promise<string | undefined>;
  /** Each channel's confirmation request to a pending contact point, by channel (the SMS feature's "reply YES" text). */
  confirmations: Partial<Record<ContactChannel, (point: ContactPointRow) => Promise<void>>>;
}

/** Double opt-in's background work: the confirmation mails and texts, and the expiry of what stays unconfirmed. */
export function alertJobs({ config, alerts, mail, log, settingsOf, titleOf, confirmations }: AlertJobsDeps): WorkerJob[] {
  return confirmationJobs({
    alerts,
    mail,
    log,
    expiryHours: config.doubleOptInExpiryHours,
    titleOf,
    localeOf: async (storeDomain) => (await settingsOf(storeDomain)).locale,
    confirmations,
  });
}
