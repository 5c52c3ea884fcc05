import { z } from 'zod';
import type { Language } from './languages.ts';
import type { Feature } from './feature.ts';
import type { OutboundPolicy } from './net/outbound-guard.ts';
import type { AnySlice } from './settings-slice.ts';

/**
 * What a notification channel is, as the channel registry (src/channels.ts) lists it, and what
 * the dispatch worker asks of a contact channel when it sends. The kernel defines the contract and
 * e-mail, the channel every subscription has (it is the subscription's own address, sent through
 * the kernel's mail transport); every other channel is its own folder's (src/sms, src/push),
 * listed once in the registry.
 */
export interface ChannelDefinition {
  /** The channel as a heading or a table's row names it: "SMS". */
  readonly label: string;
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
  /** What the shopper's page says of the channel, in each language. */
  readonly pages: Readonly<Record<Language, ChannelWords>>;
  /** How a shopper signs the channel up beside their e-mail; absent for e-mail, the sign-up's own. */
  readonly signUp?: ChannelSignUp;
  /** How the storefront's sign-up form offers it, under the store's switch; absent: not on the form (agents sign it up). */
  readonly storefront?: StorefrontOffer;
  /** Its slice of the service's settings (its provider's account, say); absent when it has none. */
  readonly settings?: AnySlice;
  /**
   * Builds the channel's feature (its sending as the feature's `channel`, its routes and jobs)
   * from what the assembly hands every channel (`ChannelNeeds` in src/channel.ts); absent for
   * e-mail, which the dispatch worker sends itself. Loaded only when called, so that reading the
   * registry loads no feature.
   */
  build?(needs: unknown): Promise<Feature<unknown>>;
}

/** A channel on the storefront's form: the store's switch for it, and what unset means. */
export interface StorefrontOffer {
  /** The switch in the store's settings, as the settings API describes it. */
  readonly setting: string;
  /** The switch in force, as the store's view describes it. */
  readonly inForce: string;
  /** Unset: offered (true), or offered where the service can send it for the store (null). */
  readonly byDefault: true | null;
  /** The dashboard's switch: its label, the line under it, and the words for unset when that depends. */
  readonly dashboard: { readonly label: string; readonly hint: string; readonly unset?: string };
  /**
   * The choice on the form, in the shopper's browser: a script of the channel's folder that puts
   * its maker in `Restock.channelChoices` under the channel's name (src/core/channel-choice.ts),
   * served in `/widget-channels.js`.
   */
  readonly choice: URL;
}

/**
 * A channel's part of the sign-up bodies (the storefront's form, an agent's subscribeAlert): its
 * fields, what must hold between them, and the contact point they ask for.
 */
export interface ChannelSignUp {
  /** The storefront form's fields (`policy`: where the service may connect on the shopper's behalf). */
  storefront(policy: OutboundPolicy): z.ZodRawShape;
  /** What must hold between the storefront's fields (a phone needs its ticked consent). */
  readonly storefrontRule?: SignUpRule;
  /** subscribeAlert's fields; absent: an agent cannot sign the channel up. */
  readonly agent?: z.ZodRawShape;
  readonly agentRule?: SignUpRule;
  /** The contact point a checked body asks for, if it names one, and how its consent was given. */
  contact(body: SignUpBody, from: 'storefront' | 'agent'): SignUpContact | undefined;
}

/** A sign-up body as its schema checked it, read by each channel for its own fields. */
export type SignUpBody = Readonly<Record<string, unknown>>;

export interface SignUpRule {
  holds(body: SignUpBody): boolean;
  /** The issue when it does not, on the field `path` names. */
  readonly message: string;
  readonly path: string[];
}

export interface SignUpContact {
  address: string;
  /** What is compared for "one contact point per address": the number, a hash of the endpoint. */
  addressKey: string;
  details: unknown;
  consent: { method: string; text: string };
}

export interface ChannelWords {
  /** The channel as named inside a sentence: "Turn text messages off". */
  readonly name: string;
  /** One contact point as the page lists it, masked where a stranger holding the link could use it. */
  readonly point?: (address: string) => string;
  /** How consent given through the channel is said ("by text message"), by the consent's method. */
  readonly consent?: Readonly<Record<string, string>>;
}

export interface ContactPointKind {
  /** What the shopper's page and the stop page call the thing reached: a phone, a browser. */
  readonly device: string;
  /** How a new contact point starts: a phone waits for its YES, a browser's permission prompt was the yes. */
  readonly startsAs: 'pending' | 'active';
  /** What the contact point keeps beyond its address, stored as JSON and read back through this schema. */
  readonly details: z.ZodType;
}

/** E-mail: the subscription's own address, confirmed by a mailed link where the store asks for it. */
export const EMAIL_CHANNEL = {
  label: 'E-mail',
  words: 'by e-mail',
  confirmation: 'link',
  optOut: 'link',
  quietHours: false,
  notSetUp: 'e-mail is not set up on this service',
  contactPoint: undefined,
  pages: { en: { name: 'e-mail' }, fr: { name: 'e-mail' }, de: { name: 'E-Mail' }, es: { name: 'correo' } },
} as const satisfies ChannelDefinition;

/** A contact point waiting for its confirmation, as its channel's confirmation request reads it. */
export interface PendingContactPoint {
  id: string;
  subscription_id: string;
  store_domain: string | null;
  address: string;
}

/** A channel's name as the tables keep it; the registry (src/channels.ts) says which names there are. */
export type ChannelName = string;

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
  channel: ChannelName;
  /** The provider's id of the message (Twilio's Message SID). */
  providerRef: string;
  status: 'delivered' | 'undelivered' | 'failed';
  /** What the ledger says: "delivered to the phone", "failed (provider error 30006)". */
  outcome: string;
  /** The ledger row the report names, and the store whose own account signed it (undefined: the service's). */
  notification: { id: string; storeDomain: string | undefined };
}
