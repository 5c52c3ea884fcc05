import { z } from 'zod';
import type { Language } from './languages.ts';

/**
 * The notification channels, listed once. It lives in the kernel because the kernel's table
 * types name the channel of a row, and every module may read the kernel without reaching into
 * another's internals. What a contact channel does when it sends (its rules for a store, composing,
 * its transport) is its own feature's (src/sms, src/push), through `ChannelSending` below, which
 * the dispatch worker asks by the channel's name.
 */
export interface ChannelProvider {
  /** How a ledger row's reason says it went. */
  readonly words: string;
  /** What the shopper must still do before alerts go: click a mailed link, reply YES, or nothing. */
  readonly confirmation: 'link' | 'reply' | 'none';
  /** How the shopper stops alerts of this channel from the alert itself: a link, or a word texted back. */
  readonly optOut: 'link' | 'words';
  /** Alerts wait out the store's quiet hours in the shopper's time zone (texts); the others go at any hour. */
  readonly quietHours: boolean;
  /** What the ledger says when the service has no sending for the channel at all. */
  readonly notSetUp: string;
  /** The channel's contact point beside the subscription's e-mail; e-mail itself is the subscription. */
  readonly contactPoint: ContactPointKind | undefined;
}

export interface ContactPointKind {
  /** What the shopper's page and the stop page call the thing reached: a phone, a browser. */
  readonly device: string;
  /** How a new contact point starts: a phone waits for its YES, a browser's permission prompt was the yes. */
  readonly startsAs: 'pending' | 'active';
  /** What the contact point keeps beyond its address, stored as JSON and read back through this schema. */
  readonly details: z.ZodType;
}

/** A browser's keys to encrypt its pushes with (RFC 8291), as it handed them over. */
const pushDetails = z.object({ p256dh: z.string().min(1), auth: z.string().min(1) }).strict();
/** A phone is its number: nothing more is kept. */
const smsDetails = z.object({}).strict();

const email = { words: 'by e-mail', confirmation: 'link', optOut: 'link', quietHours: false, notSetUp: 'e-mail is not set up on this service', contactPoint: undefined } as const satisfies ChannelProvider;
const sms = {
  words: 'by SMS',
  confirmation: 'reply',
  optOut: 'words',
  quietHours: true,
  notSetUp: 'SMS is not set up on this service',
  contactPoint: { device: 'phone', startsAs: 'pending', details: smsDetails },
} as const satisfies ChannelProvider;
const push = {
  words: 'by browser push',
  confirmation: 'none',
  optOut: 'link',
  quietHours: false,
  notSetUp: 'browser push is not set up on this service',
  contactPoint: { device: 'browser', startsAs: 'active', details: pushDetails },
} as const satisfies ChannelProvider;

/** Every channel, in the order pages and exports list them. */
export const CHANNELS = { email, sms, push } as const;

export type Channel = keyof typeof CHANNELS;
type Providers = typeof CHANNELS;

/** The channels reached through a contact point (a phone, a browser) rather than the subscription's own e-mail. */
export type ContactChannel = { [C in Channel]: Providers[C]['contactPoint'] extends ContactPointKind ? C : never }[Channel];
/** The channels whose sign-up the shopper must still confirm. */
export type ConfirmedChannel = { [C in Channel]: Providers[C]['confirmation'] extends 'none' ? never : C }[Channel];

export type ContactDetails<C extends ContactChannel = ContactChannel> = z.infer<Providers[C]['contactPoint']['details']>;

/** A non-empty list, as `z.enum` takes it. */
type Listed<C extends string> = [C, ...C[]];

export const CHANNEL_NAMES = Object.keys(CHANNELS) as Listed<Channel>;
export const CONTACT_CHANNELS = CHANNEL_NAMES.filter((name) => CHANNELS[name].contactPoint !== undefined) as Listed<ContactChannel>;
export const CONFIRMED_CHANNELS = CHANNEL_NAMES.filter((name) => CHANNELS[name].confirmation !== 'none') as Listed<ConfirmedChannel>;

export function contactPointKind(channel: ContactChannel): ContactPointKind {
  return CHANNELS[channel].contactPoint;
}

/** One notification as a contact channel carries it: its words chosen, its links made, its contact point read. */
export interface ChannelNotification {
  /** The ledger row's id, which the channel's delivery reports name. */
  id: string;
  restockId: string;
  storeDomain: string;
  kind: 'alert' | 'reminder';
  locale: Language;
  /** Who it comes from: the store's sender name, else its domain. */
  sender: string;
  product: { title: string; variantTitle: string | null; imageUrl: string | null };
  /** "<product> is back in stock" (or the reminder's), in the alert's language. */
  headline: string;
  /** Our redirect to the product, which records the click. */
  clickUrl: string;
  /** Stops alerts to this contact point only (it covers nothing else), with its label in the alert's language. */
  stop: { url: string; label: string };
  contact: { address: string; details: unknown };
}

/**
 * A contact channel's sending, as the dispatch worker asks it by the channel's name: first for
 * one store's share of a claim, with the addresses it is about to reach, then per alert.
 */
export interface ChannelSending {
  forStore(storeDomain: string, addresses: string[]): Promise<StoreSending>;
}

export interface StoreSending {
  /** Why the address cannot be sent to now (no sender for the store, the phone texted STOP), else undefined. */
  refusal(address: string): string | undefined;
  /** Hands the alert to the channel's provider; resolves once accepted, with the provider's id of it when it gives one. */
  deliver(notification: ChannelNotification): Promise<{ providerRef?: string }>;
}

/**
 * A channel's provider refused a message. `final` is what the ledger says when trying again
 * cannot help (undefined: a transient failure, retried); `removeContact` when the contact point
 * itself is gone (a browser's push subscription).
 */
export class ChannelDeliveryError extends Error {
  constructor(
    message: string,
    readonly final: string | undefined,
    readonly removeContact = false,
  ) {
    super(message);
    this.name = 'ChannelDeliveryError';
  }
}

/** A contact channel's delivery report, as its provider told it and the channel worded it for the ledger. */
export interface DeliveryReport {
  channel: ContactChannel;
  /** The provider's id of the message (Twilio's Message SID). */
  providerRef: string;
  status: 'delivered' | 'undelivered' | 'failed';
  /** What the ledger says: "delivered to the phone", "failed (provider error 30006)". */
  outcome: string;
  /** The ledger row the report names, and the store whose own account signed it (undefined: the service's). */
  alert: { id: string; storeDomain: string | undefined };
}
