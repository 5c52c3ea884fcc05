import type { FastifyBaseLogger } from 'fastify';
import { nowIso } from '../core/clock.ts';
import type { SmsAccount } from './schemas.ts';
import type { StoreService } from '../stores/service.ts';
import type { DeliveryReports, SmsConsent } from './feature.ts';
import { CONFIRMATION_KEYWORD, classifyInbound } from './keywords.ts';
import type { SmsOptOutRepository } from './repository.ts';
import { E164, type SmsService } from './service.ts';
import { composeConfirmedText, helpText } from './text.ts';

/** An inbound text as Twilio's webhook reports it, once its signature held. */
export interface InboundText {
  accountSid: string;
  from: string;
  /** Our number it was sent to. */
  to: string;
  body: string;
  /** Present when that number belongs to a Messaging Service. */
  messagingServiceSid?: string | undefined;
}

/** A status callback, once its signature held. */
export interface StatusReport {
  messageSid: string;
  status: string;
  errorCode?: string | undefined;
  from?: string | undefined;
  to?: string | undefined;
  messagingServiceSid?: string | undefined;
  /** The ledger row our callback URL named (`?alert=`). */
  notificationId?: string | undefined;
}

/** The statuses a text ends in; the others (queued, sent, accepted…) are steps on the way. */
const FINAL_STATUSES = new Set(['delivered', 'undelivered', 'failed'] as const);
type FinalStatus = 'delivered' | 'undelivered' | 'failed';
const isFinal = (status: string): status is FinalStatus => FINAL_STATUSES.has(status as FinalStatus);

/** Twilio refused the text because the phone had stopped the sender (reported late for Messaging Services). */
const UNSUBSCRIBED_RECIPIENT = '21610';

/**
 * Where a webhook came in: the service's path (`storeDomain` undefined) or a store's own, and the
 * account whose token signed it. What a store's own account reports acts on that store alone.
 */
export interface WebhookPath {
  storeDomain: string | undefined;
  account: SmsAccount;
}

export interface SmsWebhooksDeps {
  sms: SmsService;
  optOuts: SmsOptOutRepository;
  stores: Pick<StoreService, 'sendingProfile'>;
  consent: SmsConsent;
  deliveries: DeliveryReports;
  /** Who the service's own texts come from, in HELP answers. */
  serviceName: string;
  log: FastifyBaseLogger;
}

/** What Twilio tells us: replies from phones (keywords, the double opt-in's YES) and delivery reports. */
export class SmsWebhooks {
  constructor(private readonly deps: SmsWebhooksDeps) {}

  /**
   * The account whose auth token signs webhooks for this path: the service's, or the store's
   * own once Twilio vouched for it at saving. Undefined when there is none, so nothing there can
   * be verified: an account saved before the service asked Twilio could name any sender, another
   * store's or the service's, so its webhooks act on nothing until it is saved again.
   */
  async signingAccount(storeDomain: string | undefined): Promise<SmsAccount | undefined> {
    const service = this.deps.sms.accountFor(undefined);
    if (storeDomain === undefined) return service;
    const { smsAccount: own, smsAccountVerified } = await this.deps.stores.sendingProfile(storeDomain);
    return own && smsAccountVerified && own.from !== service?.from ? own : undefined;
  }

  /**
   * Acts on a keyword and says what to text back, if anything. Opt-outs are kept per sender as
   * Twilio keeps them: on the service's path, the number written to and its Messaging Service,
   * whose opt-outs cover all its numbers; on a store's path, the store's own sender alone, and
   * only a text written to it (see `ownSenders`). Any other text is not ours to act on: it is
   * answered with empty TwiML, which Twilio takes as done.
   */
  async inbound(text: InboundText, path: WebhookPath): Promise<string | undefined> {
    const keyword = classifyInbound(text.body);
    if (!keyword || !E164.test(text.from)) return undefined;
    const senders =
      path.storeDomain === undefined
        ? [text.to, ...(text.messagingServiceSid ? [text.messagingServiceSid] : [])]
        : ownSenders(path.account, { number: text.to, messagingServiceSid: text.messagingServiceSid });
    if (senders.length === 0) {
      this.deps.log.info({ store: path.storeDomain, keyword: keyword.word }, "inbound text to a number that is not the store's sender: ignored");
      return undefined;
    }
    switch (keyword.kind) {
      case 'opt-out':
        await this.deps.optOuts.record(senders, text.from, nowIso());
        // Twilio has already answered with its own opt-out confirmation; a second text would be refused anyway.
        return undefined;
      case 'opt-in': {
        await this.deps.optOuts.remove(senders, text.from);
        if (keyword.word !== CONFIRMATION_KEYWORD) return undefined;
        const confirmed = await this.confirm(text, path);
        if (confirmed.length === 0) return undefined;
        return composeConfirmedText({ shop: confirmed.length === 1 ? confirmed[0]! : this.deps.serviceName, locale: 'en' });
      }
      case 'help':
        return helpText({ sender: path.storeDomain ?? this.deps.serviceName, locale: 'en' });
    }
  }

  /**
   * The stores whose pending SMS subscriptions this YES confirms: on a store's path that store
   * alone (its sender was checked); on the service's, the stores that text from the service's
   * account and the sender the YES was written to. A store that texts from another number never
   * asked this question of the phone through this one.
   */
  private async confirm(text: InboundText, path: WebhookPath): Promise<string[]> {
    const candidates = await this.deps.consent.storesAwaitingConfirmation('sms', text.from);
    let confirmed: string[];
    if (path.storeDomain !== undefined) confirmed = candidates.filter((domain) => domain === path.storeDomain);
    else if (ownSenders(path.account, { number: text.to, messagingServiceSid: text.messagingServiceSid }).length === 0) confirmed = [];
    else confirmed = await this.textingFromService(candidates);
    if (confirmed.length === 0) return [];
    return (await this.deps.consent.confirmContactPoints('sms', text.from, confirmed)) > 0 ? confirmed : [];
  }

  /** Of these stores, those that text from the service's account (the route checked the text was signed by it). */
  private async textingFromService(domains: string[]): Promise<string[]> {
    const out: string[] = [];
    for (const domain of domains) if ((await this.deps.stores.sendingProfile(domain)).smsAccount === undefined) out.push(domain);
    return out;
  }

  /**
   * Records a text's final status on the ledger row our callback URL named (`notificationId`): every text
   * we send names one, so a report without it is not about a text of ours and touches no row. On
   * a store's path the row must be that store's. An opt-out Twilio found only at sending time is
   * kept as if the phone had texted STOP; on a store's path, against the store's own sender only.
   */
  async statusReport(report: StatusReport, path: WebhookPath): Promise<void> {
    if (!isFinal(report.status)) return;
    if (report.notificationId !== undefined) {
      const outcome = report.status === 'delivered' ? 'delivered to the phone' : `${report.status} (provider error ${report.errorCode ?? 'not given'})`;
      const known = await this.deps.deliveries.recordDelivery({ channel: 'sms', providerRef: report.messageSid, status: report.status, outcome, notification: { id: report.notificationId, storeDomain: path.storeDomain } });
      if (!known) this.deps.log.debug({ messageSid: report.messageSid, status: report.status }, 'delivery report for a text not in the ledger');
    } else {
      this.deps.log.debug({ messageSid: report.messageSid, status: report.status }, 'delivery report naming no ledger row: ignored');
    }
    if (report.status === 'failed' && report.errorCode === UNSUBSCRIBED_RECIPIENT && report.to && E164.test(report.to)) {
      const senders =
        path.storeDomain === undefined
          ? [report.messagingServiceSid ?? report.from].filter((sender) => sender !== undefined)
          : ownSenders(path.account, { number: report.from, messagingServiceSid: report.messagingServiceSid });
      await this.deps.optOuts.record(senders, report.to, nowIso());
    }
  }
}

/**
 * The account's configured sender, when the report is about it: our number (the one a phone
 * wrote to, or a text went from) is it, or is one of its Messaging Service, which Twilio names
 * beside it; else none. What a store's account reports is recorded against its own sender and
 * nothing else, whichever number it names.
 */
function ownSenders(account: SmsAccount, report: { number?: string | undefined; messagingServiceSid?: string | undefined }): string[] {
  return account.from === report.number || account.from === report.messagingServiceSid ? [account.from] : [];
}
