import type { FastifyBaseLogger } from 'fastify';
import { nowIso } from '../core/clock.ts';
import type { SmsAccount } from '../dispatch/channels.ts';
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
  /** The ledger row our callback URL named, and the store whose path received the report. */
  alert?: { id: string; storeDomain: string | undefined } | undefined;
}

/** A status callback, once its signature held. */
export interface StatusReport {
  messageSid: string;
  status: string;
  errorCode?: string | undefined;
  from?: string | undefined;
  to?: string | undefined;
  messagingServiceSid?: string | undefined;
  /** The ledger row our callback URL named, and the store whose path received the report. */
  alert?: { id: string; storeDomain: string | undefined } | undefined;
}

/** The statuses a text ends in; the others (queued, sent, accepted…) are steps on the way. */
const FINAL_STATUSES = new Set(['delivered', 'undelivered', 'failed'] as const);
type FinalStatus = 'delivered' | 'undelivered' | 'failed';
const isFinal = (status: string): status is FinalStatus => FINAL_STATUSES.has(status as FinalStatus);

/** Twilio refused the text because the phone had stopped the sender (reported late for Messaging Services). */
const UNSUBSCRIBED_RECIPIENT = '21610';

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
   * own. Undefined when there is none, so nothing there can be verified.
   */
  async signingAccount(storeDomain: string | undefined): Promise<SmsAccount | undefined> {
    if (storeDomain === undefined) return this.deps.sms.accountFor(undefined);
    return (await this.deps.stores.sendingProfile(storeDomain)).smsAccount;
  }

  /**
   * Acts on a keyword and says what to text back, if anything. Opt-outs are kept per sender as
   * Twilio keeps them: the number written to, and its Messaging Service, whose opt-outs cover
   * all its numbers. Any other text is not ours to act on.
   */
  async inbound(text: InboundText, storeDomain: string | undefined): Promise<string | undefined> {
    const keyword = classifyInbound(text.body);
    if (!keyword || !E164.test(text.from)) return undefined;
    const senders = [text.to, ...(text.messagingServiceSid ? [text.messagingServiceSid] : [])];
    switch (keyword.kind) {
      case 'opt-out':
        await this.deps.optOuts.record(senders, text.from, nowIso());
        // Twilio has already answered with its own opt-out confirmation; a second text would be refused anyway.
        return undefined;
      case 'opt-in': {
        await this.deps.optOuts.remove(senders, text.from);
        if (keyword.word !== CONFIRMATION_KEYWORD) return undefined;
        const confirmed = await this.confirm(text);
        if (confirmed.length === 0) return undefined;
        return composeConfirmedText({ shop: confirmed.length === 1 ? confirmed[0]! : this.deps.serviceName, locale: 'en' });
      }
      case 'help':
        return helpText({ sender: storeDomain ?? this.deps.serviceName, locale: 'en' });
    }
  }

  /**
   * The stores whose pending SMS subscriptions this YES confirms: those that text this phone
   * from the account and sender the YES was written to. A store that texts from another number
   * never asked this question of the phone through this one.
   */
  private async confirm(text: InboundText): Promise<string[]> {
    const candidates = await this.deps.consent.pendingSmsStores(text.from);
    const confirmed: string[] = [];
    for (const domain of candidates) {
      const account = this.deps.sms.accountFor((await this.deps.stores.sendingProfile(domain)).smsAccount);
      if (account && sendsAs(account, text)) confirmed.push(domain);
    }
    if (confirmed.length === 0) return [];
    return (await this.deps.consent.confirmSms(text.from, confirmed)) > 0 ? confirmed : [];
  }

  /** Records a text's final status; an opt-out Twilio found only at sending time is kept as if the phone had texted STOP. */
  async statusReport(report: StatusReport): Promise<void> {
    if (!isFinal(report.status)) return;
    const known = await this.deps.deliveries.recordDelivery(report.messageSid, report.status, report.errorCode ?? null, report.alert);
    if (!known) this.deps.log.debug({ messageSid: report.messageSid, status: report.status }, 'delivery report for a text not in the ledger');
    if (report.status === 'failed' && report.errorCode === UNSUBSCRIBED_RECIPIENT && report.to && E164.test(report.to)) {
      const sender = report.messagingServiceSid ?? report.from;
      if (sender) await this.deps.optOuts.record([sender], report.to, nowIso());
    }
  }
}

/** Whether texts from this account and sender are the ones this inbound text answers. */
function sendsAs(account: SmsAccount, text: InboundText): boolean {
  return account.accountSid === text.accountSid && (account.from === text.to || account.from === text.messagingServiceSid);
}
