import { z } from 'zod';

/**
 * The notification channels, listed once. It lives in the kernel because the kernel's table
 * types name the channel of a row, and every module may read the kernel without reaching into
 * another's internals. What a channel does when it sends (composing, its transport, its sending
 * rules) is still the dispatch worker's and the channel's own feature's (src/sms, src/push).
 */
export interface ChannelProvider {
  /** How a ledger row's reason says it went. */
  readonly words: string;
  /** What the shopper must still do before alerts go: click a mailed link, reply YES, or nothing. */
  readonly confirmation: 'link' | 'reply' | 'none';
  /** How the shopper stops alerts of this channel from the alert itself: a link, or a word texted back. */
  readonly optOut: 'link' | 'words';
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

const email = { words: 'by e-mail', confirmation: 'link', optOut: 'link', contactPoint: undefined } as const satisfies ChannelProvider;
const sms = { words: 'by SMS', confirmation: 'reply', optOut: 'words', contactPoint: { device: 'phone', startsAs: 'pending', details: smsDetails } } as const satisfies ChannelProvider;
const push = { words: 'by browser push', confirmation: 'none', optOut: 'link', contactPoint: { device: 'browser', startsAs: 'active', details: pushDetails } } as const satisfies ChannelProvider;

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
