import type { FastifyBaseLogger } from 'fastify';
import type { Config } from '../config.ts';
import type { Database } from '../core/db/database.ts';
import type { ChannelNeeds } from '../channel.ts';
import type { DeliveryReport, PendingContactPoint } from '../core/channels.ts';
import type { Feature } from '../core/feature.ts';
import type { StoreService } from '../stores/service.ts';
import { smsChannelSending } from './channel.ts';
import { confirmationTexter } from './confirmation-request.ts';
import { SmsWebhooks } from './inbound.ts';
import { SmsOptOutRepository } from './repository.ts';
import { smsRoutes } from './routes.ts';
import { SmsService } from './service.ts';
import { TwilioApi } from './twilio-client.ts';

export { twilioAccountCheck } from './account-check.ts';

export type { SmsService } from './service.ts';
export { classifyInbound } from './keywords.ts';
export { composeNotificationText, composeConfirmationText, countSegments, helpText, type SmsLocale } from './text.ts';

/** Where a shopper's YES lands: the subscriptions feature, which owns the contact points. */
export interface SmsConsent {
  /** Stores where this phone has an SMS contact point waiting for its YES. */
  storesAwaitingConfirmation(channel: 'sms', phone: string): Promise<string[]>;
  /** Confirms the phone's pending SMS contact points at these stores; how many it confirmed. */
  confirmContactPoints(channel: 'sms', phone: string, storeDomains: string[]): Promise<number>;
}


/** Where delivery reports land: the ledger, which knows each text by the id its callback URL carries and by Twilio's Message SID. */
export interface DeliveryReports {
  /**
   * False when no notification matches: the SMS one `alert` names, of `alert.storeDomain` when
   * that is set (a store's own account reports only on its own store's texts), whose provider
   * reference is this one or not yet recorded.
   */
  recordDelivery(report: DeliveryReport): Promise<boolean>;
}

export interface SmsDeps {
  config: Config;
  database: Database;
  log: FastifyBaseLogger;
  stores: Pick<StoreService, 'sendingProfile'>;
  consent: SmsConsent;
  deliveries: DeliveryReports;
  /** The "reply YES" text a new number gets, once the service exists; absent: none is sent. */
  confirmationOf?: (sms: SmsService) => (point: PendingContactPoint) => Promise<void>;
}

/** SMS as the channel registry builds it: over the subscriptions (a YES, the confirmation request's words) and the ledger (delivery reports). */
export function buildSmsChannel(needs: ChannelNeeds): Feature<SmsService> {
  const { stores, alerts, inventory } = needs;
  return buildSms({ ...needs, consent: alerts, deliveries: needs.dispatch, confirmationOf: (sms) => confirmationTexter({ sms, stores, inventory, alerts }) });
}

/** SMS through Twilio: the channel dispatch sends with, and the webhooks Twilio calls. */
export function buildSms({ config, database, log, stores, consent, deliveries, confirmationOf }: SmsDeps): Feature<SmsService> {
  const optOuts = new SmsOptOutRepository(database);
  const twilio = new TwilioApi({ apiUrl: config.channels.sms.apiUrl, timeoutMs: config.channels.sms.timeoutMs });
  const service = new SmsService({ sms: config.channels.sms, baseUrl: config.baseUrl, optOuts, twilio });
  const webhooks = new SmsWebhooks({ sms: service, optOuts, stores, consent, deliveries, serviceName: config.serviceName, log });
  return {
    service,
    channel: { name: 'sms', sending: smsChannelSending(service, stores), offered: config.channels.sms.account !== undefined, ...(confirmationOf ? { confirm: confirmationOf(service) } : {}) },
    routes: [smsRoutes({ webhooks, baseUrl: config.baseUrl })],
    close: () => twilio.close(),
  };
}
