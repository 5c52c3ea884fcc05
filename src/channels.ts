import type { z } from 'zod';
import type { ChannelNeeds } from './channel.ts';
import { EMAIL_CHANNEL, type ChannelDefinition, type ChannelSignUp, type StorefrontOffer, type ContactPointKind, type SignUpBody, type SignUpContact } from './core/channels.ts';
import type { Feature } from './core/feature.ts';
import type { OutboundPolicy } from './core/net/outbound-guard.ts';
import { readSlices, sliceFields, type NamedSlices, type ServiceSettings } from './core/settings-slice.ts';

export type { StorefrontOffer };
import { pushChannel } from './push/channel.ts';
import { smsChannel } from './sms/channel.ts';

/**
 * Every notification channel, in the order pages and exports list them: the only list. E-mail is
 * the kernel's (every subscription's own address); each other channel is its folder's
 * `channel.ts` (a `ChannelDefinition`, src/core/channels.ts), which imports the kernel and its own
 * folder's plain parts but never a service, so that any module may read this list without a
 * cycle. A new channel is its folder and one line here.
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

/** Whether the shopper must still confirm the channel's sign-up (a mailed link, a phone's reply). */
export function isConfirmed(channel: Channel): channel is ConfirmedChannel {
  return CHANNELS[channel].confirmation !== 'none';
}

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

/** The channels a shopper can sign up beside their e-mail, each with its part of the sign-up bodies. */
const SIGN_UPS: ReadonlyArray<[ContactChannel, ChannelSignUp]> = CONTACT_CHANNELS.flatMap((channel) => {
  const { signUp }: ChannelDefinition = CHANNELS[channel];
  return signUp ? [[channel, signUp] as [ContactChannel, ChannelSignUp]] : [];
});

/** Every channel's fields of the sign-up body `from` takes, in the registry's order. */
export function signUpFields(from: 'storefront' | 'agent', policy: OutboundPolicy): z.ZodRawShape {
  return Object.assign({}, ...SIGN_UPS.map(([, signUp]) => (from === 'storefront' ? signUp.storefront(policy) : (signUp.agent ?? {}))));
}

/** What does not hold between a body's channel fields, as issues on their fields. */
export function signUpIssues(body: SignUpBody, from: 'storefront' | 'agent'): Array<{ message: string; path: string[] }> {
  return SIGN_UPS.flatMap(([, signUp]) => {
    const rule = from === 'storefront' ? signUp.storefrontRule : signUp.agentRule;
    return rule && !rule.holds(body) ? [{ message: rule.message, path: rule.path }] : [];
  });
}

/** The contact points a checked sign-up body asks for, each with its channel. */
export function signUpContacts(body: SignUpBody, from: 'storefront' | 'agent'): Array<SignUpContact & { channel: ContactChannel }> {
  return SIGN_UPS.flatMap(([channel, signUp]) => {
    const contact = signUp.contact(body, from);
    return contact ? [{ ...contact, channel }] : [];
  });
}

/** Each channel's feature, built in the registry's order; e-mail has none (the dispatch worker sends it). */
export async function buildChannelFeatures(needs: ChannelNeeds): Promise<Feature<unknown>[]> {
  const features: Feature<unknown>[] = [];
  for (const name of CHANNEL_NAMES) {
    const definition: ChannelDefinition = CHANNELS[name];
    if (definition.build) features.push(await definition.build(needs));
  }
  return features;
}

type Configured = { [C in Channel]: Definitions[C] extends { settings: object } ? C : never }[Channel];
type SettingsOf<C extends Configured> = Definitions[C] extends { settings: { read(...args: never[]): infer Read } } ? Read : never;

/** What each channel with settings makes of them, by channel: `Config.channels`. */
export type ChannelConfigs = { [C in Configured]: SettingsOf<C> };

const CHANNEL_SLICES: NamedSlices = CHANNEL_NAMES.map((name) => [name, (CHANNELS[name] as ChannelDefinition).settings]);

/** Every channel's slice of the environment, in the registry's order: src/config.ts reads them with the rest. */
export const CHANNEL_SETTINGS = sliceFields(CHANNEL_SLICES);

/** Each channel's reading of its slice (`values`: the parsed environment). */
export function readChannelSettings(values: Record<string, unknown>, service: ServiceSettings): ChannelConfigs {
  return readSlices(CHANNEL_SLICES, values, service) as ChannelConfigs;
}

/** The channels the storefront's form offers under a store's switch, each with its offer. */
export const STOREFRONT_OFFERS: ReadonlyArray<[ContactChannel, StorefrontOffer]> = CONTACT_CHANNELS.flatMap((channel) => {
  const { storefront }: ChannelDefinition = CHANNELS[channel];
  return storefront ? [[channel, storefront] as [ContactChannel, StorefrontOffer]] : [];
});
