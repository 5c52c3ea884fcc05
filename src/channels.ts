import type { z } from 'zod';
import { EMAIL_CHANNEL, type ContactPointKind } from './core/channels.ts';
import { pushChannel } from './push/channel.ts';
import { smsChannel } from './sms/channel.ts';

/**
 * Every notification channel, in the order pages and exports list them: the only list. E-mail is
 * the kernel's (every subscription's own address); each other channel is its folder's
 * `channel.ts` (a `ChannelDefinition`, src/core/channels.ts), which imports nothing but the kernel,
 * so that any module may read this list. A new channel is its folder and one line here.
 */
export const CHANNELS = { email: EMAIL_CHANNEL, sms: smsChannel, push: pushChannel } as const;

export type Channel = keyof typeof CHANNELS;
type Definitions = typeof CHANNELS;

/** The channels reached through a contact point (a phone, a browser) rather than the subscription's own e-mail. */
export type ContactChannel = { [C in Channel]: Definitions[C]['contactPoint'] extends ContactPointKind ? C : never }[Channel];
/** The channels whose sign-up the shopper must still confirm. */
export type ConfirmedChannel = { [C in Channel]: Definitions[C]['confirmation'] extends 'none' ? never : C }[Channel];

export type ContactDetails<C extends ContactChannel = ContactChannel> = z.infer<Definitions[C]['contactPoint']['details']>;

/** A non-empty list, as `z.enum` takes it. */
type Listed<C extends string> = [C, ...C[]];

export const CHANNEL_NAMES = Object.keys(CHANNELS) as Listed<Channel>;
export const CONTACT_CHANNELS = CHANNEL_NAMES.filter((name) => CHANNELS[name].contactPoint !== undefined) as Listed<ContactChannel>;
export const CONFIRMED_CHANNELS = CHANNEL_NAMES.filter((name) => CHANNELS[name].confirmation !== 'none') as Listed<ConfirmedChannel>;
/** The contact channels whose new contact points wait for their own confirmation (a phone's YES). */
export const PENDING_CHANNELS = CONTACT_CHANNELS.filter((name) => CHANNELS[name].contactPoint.startsAs === 'pending');

/** The channel a stored name names; a name the registry does not list is an error, not data. */
export function channelNamed(name: string): Definitions[Channel] {
  if (!Object.prototype.hasOwnProperty.call(CHANNELS, name)) throw new Error(`No channel ${name} in the registry (src/channels.ts).`);
  return CHANNELS[name as Channel];
}

export function contactPointKind(channel: ContactChannel): ContactPointKind {
  return CHANNELS[channel].contactPoint;
}

/** The contact channel a stored name names; e-mail, or a name the registry does not list, is an error. */
export function contactChannelNamed(name: string): ContactChannel {
  if (!(CONTACT_CHANNELS as string[]).includes(name)) throw new Error(`No contact channel ${name} in the registry (src/channels.ts).`);
  return name as ContactChannel;
}
