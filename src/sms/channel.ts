import { z } from 'zod';
import { ChannelDeliveryError, type ChannelDefinition, type ChannelSending } from '../core/channels.ts';
import { consentTextSchema } from '../core/consent.ts';
import type { ChannelNeeds } from '../channel.ts';
import type { StoreService } from '../stores/service.ts';
import type { SmsAccount } from './schemas.ts';
import { smsConfig, smsSettings } from './settings.ts';
import { composeNotificationText } from './text.ts';

/** A phone number as SMS takes it: E.164, a plus, the country code and the number, no spaces (what Twilio accepts). */
export const phoneSchema = z.string().regex(/^\+[1-9][0-9]{6,14}$/, 'must be an E.164 phone number such as +15551234567');

/** SMS in the channel registry (src/channels.ts): a phone, confirmed by its own YES, stopped by STOP. */
export const smsChannel = {
  label: 'SMS',
  words: 'by SMS',
  confirmation: 'reply',
  optOut: 'words',
  quietHours: true,
  notSetUp: 'SMS is not set up on this service',
  // A phone is its number: nothing more is kept.
  contactPoint: { device: 'phone', startsAs: 'pending', details: z.object({}).strict() },
  pages: {
    en: { name: 'text messages', point: (phone) => `Text message ${maskedPhone(phone)}`, consent: { 'sms-reply': 'by text message' } },
    fr: { name: 'SMS', point: (phone) => `SMS ${maskedPhone(phone)}`, consent: { 'sms-reply': 'par SMS' } },
    de: { name: 'SMS', point: (phone) => `SMS ${maskedPhone(phone)}`, consent: { 'sms-reply': 'per SMS' } },
    es: { name: 'SMS', point: (phone) => `SMS ${maskedPhone(phone)}`, consent: { 'sms-reply': 'por SMS' } },
  },
  signUp: {
    storefront: () => ({
      phone: phoneSchema.nullish().describe('Also text this number (E.164); needs smsConsent'),
      smsConsent: z.boolean().nullish().describe('The shopper ticked the SMS consent box (unticked by default); required with phone'),
      smsConsentText: consentTextSchema.nullish().describe('The SMS consent wording shown beside the box'),
    }),
    // No number is texted without the ticked box and the words shown beside it.
    storefrontRule: {
      holds: (body) => !body.phone || (body.smsConsent === true && !!body.smsConsentText),
      message: 'a phone number needs the ticked SMS consent (smsConsent: true) and the wording shown (smsConsentText)',
      path: ['smsConsent'],
    },
    agent: {
      phone: phoneSchema.optional().describe('Also text this number (E.164) when the product is back. The shopper must agree: give smsConsentText; the number gets a text asking for a YES, and no alert is texted before it'),
      smsConsentText: consentTextSchema.optional().describe('The words the shopper agreed to for SMS, as shown to them (required with phone)'),
    },
    agentRule: { holds: (body) => body.phone === undefined || body.smsConsentText !== undefined, message: 'smsConsentText is required with phone: texts need the shopper’s recorded consent', path: ['smsConsentText'] },
    contact(body, from) {
      const { phone, smsConsentText: text } = body as { phone?: string | null; smsConsentText?: string | null };
      if (!phone || !text || (from === 'storefront' && body.smsConsent !== true)) return undefined;
      return { address: phone, addressKey: phone, details: {}, consent: { method: from === 'agent' ? 'agent-api' : 'storefront-checkbox', text } };
    },
  },
  storefront: {
    setting: 'Offer SMS alerts on the storefront (default: when an SMS sender is configured)',
    inForce: 'Offer SMS on the storefront; null: when an SMS sender is configured',
    byDefault: null,
    dashboard: { label: 'Offer SMS alerts', hint: 'A phone field and an unticked consent box on the sign-up form.', unset: 'When an SMS sender is set up' },
    choice: new URL('./widget-choice.ts', import.meta.url),
  },
  settings: { slice: smsSettings, read: smsConfig },
  async build(needs: ChannelNeeds) {
    const { buildSmsChannel } = await import('./feature.ts');
    return buildSmsChannel(needs);
  },
} as const satisfies ChannelDefinition;

/**
 * A phone as `+1•••••4567`: enough for the shopper to recognise it, too little for anyone the
 * link reaches to text it. The calling code is shown (one digit for the 1 and 7 zones, two for
 * the rest, which never ends inside the last four digits).
 */
export function maskedPhone(e164: string): string {
  const digits = e164.replace(/\D/g, '');
  if (digits.length < 7) return '•••••';
  const code = digits.startsWith('1') || digits.startsWith('7') ? digits.slice(0, 1) : digits.slice(0, 2);
  return `+${code}•••••${digits.slice(-4)}`;
}

/** What the ledger says of a phone that texted STOP to the sender the store's texts go from. */
export const OPTED_OUT = 'the phone texted STOP to this sender';
/** What the ledger says of a text for a store that has no sender, its own or the service's. */
export const NO_SENDER = 'no SMS sender is configured (the store has no Twilio account and neither has the service)';

export interface SmsMessage {
  to: string;
  body: string;
  /** Where the provider reports delivery (our status callback). */
  statusCallback: string;
}

/** A text the provider refused: `permanent` ones are not retried; `optedOut`: the phone texted STOP to this sender. */
export class SmsDeliveryError extends ChannelDeliveryError {
  constructor(
    message: string,
    readonly code: number | undefined,
    readonly permanent: boolean,
    readonly optedOut: boolean,
  ) {
    super(message, optedOut ? `${OPTED_OUT} (${code})` : permanent ? `refused by the SMS provider (${code}): ${message}` : undefined);
    this.name = 'SmsDeliveryError';
  }
}

/** Texting, as the SMS service offers it to the channel's sending. */
export interface SmsChannel {
  /** The account a store's texts go from: its own when it set one, else the service's; undefined when neither is configured. */
  accountFor(own: SmsAccount | undefined): SmsAccount | undefined;
  send(account: SmsAccount, message: SmsMessage): Promise<{ providerRef: string }>;
  /** Of these phones, those that texted STOP to this sender and not START since. */
  optedOut(sender: string, phones: string[]): Promise<Set<string>>;
  /** `notificationId` rides in the URL: Twilio may report before the send's answer (and its SID) is recorded. */
  statusCallbackUrl(storeDomain: string, ownAccount: boolean, notificationId?: string): string;
}

/**
 * SMS as the dispatch worker sends it: per store, the account its texts go from (its own, else
 * the service's) and the phones that stopped that sender; per alert, one segment where the
 * language allows: the product, our short redirect, and how to stop.
 */
export function smsChannelSending(sms: SmsChannel, stores: Pick<StoreService, 'sendingProfile'>): ChannelSending {
  return {
    async forStore(storeDomain, phones) {
      const { smsAccount: own } = await stores.sendingProfile(storeDomain);
      const account = sms.accountFor(own);
      const optedOut = account && phones.length > 0 ? await sms.optedOut(account.from, phones) : new Set<string>();
      return {
        refusal: (phone) => (!account ? NO_SENDER : optedOut.has(phone) ? OPTED_OUT : undefined),
        async deliver(notification) {
          // The refusal was asked before the plan was charged; a change in between fails the send, which is retried.
          if (!account) throw new Error('SMS is no longer set up for this store');
          const { product } = notification;
          const body = composeNotificationText({ shop: notification.sender, productTitle: product.title, variantTitle: product.variantTitle, link: notification.clickUrl, locale: notification.locale, kind: notification.kind });
          return sms.send(account, { to: notification.contact.address, body, statusCallback: sms.statusCallbackUrl(storeDomain, own !== undefined, notification.id) });
        },
      };
    },
  };
}
