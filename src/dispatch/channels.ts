import type { Language } from '../core/languages.ts';
import type { Channel } from '../core/channels.ts';

export type { Channel };

/**
 * The channels beside e-mail, as dispatch sees them. The SMS feature (src/sms) and the push
 * feature (src/push) implement them; dispatch decides what goes, when and to whom, and records
 * what the channel answered.
 */

/** A Twilio account and the sender its texts come from: the store's own, or the service's. */
export interface SmsAccount {
  accountSid: string;
  authToken: string;
  /** An E.164 number, or a Messaging Service SID (MG…). */
  from: string;
}

export interface SmsMessage {
  to: string;
  body: string;
  /** Where the provider reports delivery (our status callback). */
  statusCallback: string;
}

/** A text the provider refused: `permanent` ones are not retried; `optedOut`: the phone texted STOP to this sender. */
export class SmsDeliveryError extends Error {
  constructor(
    message: string,
    readonly code: number | undefined,
    readonly permanent: boolean,
    readonly optedOut: boolean,
  ) {
    super(message);
    this.name = 'SmsDeliveryError';
  }
}

export interface SmsChannel {
  /** The account a store's texts go from: its own when it set one, else the service's; undefined when neither is configured. */
  accountFor(own: SmsAccount | undefined): SmsAccount | undefined;
  send(account: SmsAccount, message: SmsMessage): Promise<{ providerRef: string }>;
  /** Of these phones, those that texted STOP to this sender and not START since. */
  optedOut(sender: string, phones: string[]): Promise<Set<string>>;
}

/** What an alert's text says. */
export interface AlertTextInput {
  shop: string;
  productTitle: string;
  variantTitle: string | null;
  link: string;
  locale: Language;
  kind: 'alert' | 'reminder';
}

/** Texting as dispatch uses it: the channel, the words, and where delivery reports go for a store. */
export interface SmsSending extends SmsChannel {
  alertText(input: AlertTextInput): string;
  /** `alertId` rides in the URL: Twilio may report before the send's answer (and its SID) is recorded. */
  statusCallbackUrl(storeDomain: string, ownAccount: boolean, alertId?: string): string;
}

export interface PushMessage {
  endpoint: string;
  keys: { p256dh: string; auth: string };
  payload: PushPayload;
  /** How long the push service keeps it for an offline browser. */
  ttlSeconds: number;
}

/** What the service worker shows: a notification that opens `url` when clicked. */
export interface PushPayload {
  title: string;
  body: string;
  url: string;
  icon: string | null;
  /** One notification per tag: a reminder replaces its alert. */
  tag: string;
  /** Stops alerts to this browser, offered as the notification's second button; it covers nothing else. */
  stop: { url: string; label: string };
}

/** `gone`: the push service answered 404 or 410, the browser's subscription is no more. */
export class PushDeliveryError extends Error {
  constructor(
    message: string,
    readonly status: number | undefined,
    readonly gone: boolean,
    readonly permanent: boolean,
  ) {
    super(message);
    this.name = 'PushDeliveryError';
  }
}

export interface PushChannel {
  send(message: PushMessage): Promise<void>;
  /** The VAPID public key (base64url), which the widget hands to `pushManager.subscribe`. */
  publicKey(): string;
}
