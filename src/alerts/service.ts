// Longer than most files on purpose: every operation on subscriptions and their channels, where who may do what is decided once.
import { idsAt, type PointedIds } from '../core/platforms.ts';
import { nowIso } from '../core/clock.ts';
import { newOpaqueId } from '../core/ids.ts';
import { eventId, type EventSink, type SubscriptionCallbacks } from '../core/events.ts';
import { inPages } from '../core/db/pages.ts';
import type { Trx } from '../core/db/database.ts';
import { addressKey, normaliseEmail } from '../core/email.ts';
import { canSee, ownStore, storeForWrite, type Caller } from '../core/http/caller.ts';
import { Conflict, Forbidden, NotFound, Problem } from '../core/problems.ts';
import type { TokenSigner } from '../core/signed-token.ts';
import type { EffectiveSettings } from '../stores/schemas.ts';
import { contactPointKind, PENDING_CHANNELS, signUpContacts, type Channel, type ContactChannel } from '../channels.ts';
import type { SignUpBody } from '../core/channels.ts';
import { requiresConfirmation } from './consent.ts';
import { CONTACT_POINTS_PER_CHANNEL, type ContactPointRepository, type ContactPointRow } from './contact-points.ts';
import type { SubscribeAlertInput, Subscription } from './schemas.ts';
import {
  OVER_LIMIT,
  type Consent,
  type WatchTarget,
  type SubscriptionOwner,
  type FulfilledAddress,
  type SubscriptionRepository,
  type SubscriptionRow,
  type RankedWaitlistKey,
  type WaitingOrder,
  type WaitingQuery,
  type WaitingRepository,
  type WaitingSubscriber,
} from './repository.ts';

/** What other modules read of subscriptions and their contact points. */
export type { RankedWaitlistKey, SubscriptionRow, WaitingSubscriber } from './repository.ts';
export type { ContactPointRow } from './contact-points.ts';

const UNSUBSCRIBE = 'unsubscribe';
const CONFIRM = 'confirm-subscription';
const SHOPPER_PAGE = 'shopper-page';
const CONTACT_POINT_STOP = 'contact-point-stop';

/** What the channels beside e-mail need of the rest of the service. */
export interface ChannelDeps {
  contactPoints: ContactPointRepository;
  /** The store's settings (double opt-in, its country). */
  settingsOf(storeDomain: string): Promise<Pick<EffectiveSettings, 'doubleOptIn' | 'country'>>;
  /** Refuses ids of another platform than the store's (the stores service). */
  requireStorePlatform(storeDomain: string, ids: PointedIds): Promise<void>;
}

/** A phone or browser a shopper adds to a subscription (as its channel read it off the sign-up), with the consent given for it. */
export interface ExtraContact {
  channel: ContactChannel;
  address: string;
  addressKey: string;
  /** What the channel keeps beyond the address, checked against its details schema when stored. */
  details: unknown;
  consent: Consent;
  timeZone: string | null;
}

/** The phones and browsers a checked sign-up body asks for, each read off the body by its channel. */
export function signUpExtraContacts(body: SignUpBody, from: 'storefront' | 'agent', page: string | null, timeZone: string | null): ExtraContact[] {
  return signUpContacts(body, from).map(({ consent, ...contact }) => ({ ...contact, consent: { ...consent, page }, timeZone }));
}

/** Whose page the shopper's link opens: one address at one store. */
export interface Shopper {
  storeDomain: string;
  emailKey: string;
  email: string;
}

/** A subscription as the shopper's page lists it, with its channels. */
export interface ShopperSubscription {
  row: SubscriptionRow;
  contactPoints: ContactPointRow[];
}

/**
 * How many live subscriptions one agent not bound to a store may hold for it (or for no named
 * store). Such subscriptions are third-party: the store's shoppers never asked for them, and
 * every alert they get is paid from the store's allowance. An agent its owner bound to the
 * store is not limited (the store vouches for it), nor is the storefront (limited per client).
 */
export const THIRD_PARTY_LIMIT_PER_STORE = 50;

/** A waitlist as the purchasing view ranks it. */
export interface RankedWaitlist extends WaitingCount {
  /** The waiting shoppers' sign-up times summed, in epoch seconds. */
  waitingSinceSum: number;
}

/** Subscribers waiting for one product (or variant) of a store. */
export interface WaitingCount {
  productId: string;
  variantId: string | null;
  waiting: number;
}

/**
 * The alert subscription operations, shared by the HTTP routes, the MCP tools and the dashboard.
 * Methods that take a `Caller` decide tenancy; those that take a bare store domain serve the
 * service's own work (dispatch, webhooks, the storefront).
 */
export class SubscriptionService {
  constructor(
    private readonly store: SubscriptionRepository,
    private readonly waitingStore: WaitingRepository,
    private readonly signer: TokenSigner,
    private readonly baseUrl: string,
    private readonly events: EventSink,
    private readonly channels: ChannelDeps,
    /** Where the subscriptions' news goes for the agents that ask (the outgoing-webhooks feature); subscribeAlert attaches it. */
    readonly callbacks?: SubscriptionCallbacks,
  ) {}

  /**
   * subscribeAlert: the caller's own live subscription for this product/variant/address,
   * created if needed. Never another maker's: the storefront's row or another agent's for the
   * same address is neither returned nor hinted at, so an agent learns nothing of other
   * shoppers. An agent not bound to the store makes third-party subscriptions, at most
   * THIRD_PARTY_LIMIT_PER_STORE live ones per store.
   */
  async subscribeAlert(input: SubscribeAlertInput, caller: Caller): Promise<{ subscriptionId: string; status: 'active' | 'pending' }> {
    const { store, foreign } = storeForWrite(caller, input.shop);
    if (foreign) throw new Forbidden(`This agent is bound to ${caller.storeDomain} and cannot subscribe for ${input.shop}.`);
    if (store) await this.channels.requireStorePlatform(store, idsAt('/body', input));
    const target: WatchTarget = {
      productId: input.productId,
      variantId: input.variantId ?? null,
      email: normaliseEmail(input.email),
      country: input.country ?? null,
      consent: { method: 'agent-api', text: `subscribed through the API by agent ${caller.agentId ?? 'unknown'}`, page: null },
    };
    const contacts = signUpExtraContacts(input, 'agent', null, null);
    // storeForWrite puts a bound agent on its own store: only an unbound one is third-party.
    const now = nowIso();
    const pending = store !== null && (await this.confirmationRequired(store, target.country));
    if (pending && caller.storeDomain !== null) {
      const row = await this.store.subscribePending(target, { storeDomain: store, agentId: caller.agentId, thirdParty: false }, now);
      await this.addContacts(row, contacts, now);
      return { subscriptionId: row.id, status: row.status === 'active' ? 'active' : 'pending' };
    }
    if (caller.storeDomain !== null) {
      const row = await this.store.subscribe(target, { storeDomain: store, agentId: caller.agentId, thirdParty: false }, now);
      await this.addContacts(row, contacts, now);
      await this.announceIfNew(row, now);
      return { subscriptionId: row.id, status: 'active' };
    }
    const row = await this.store.subscribeWithin(target, { storeDomain: store, agentId: caller.agentId, thirdParty: true }, now, THIRD_PARTY_LIMIT_PER_STORE, pending ? 'pending' : 'active');
    if (row === OVER_LIMIT) {
      const where = store ?? 'products of no named store';
      throw new Problem(
        'too-many-subscriptions',
        `This agent already holds ${THIRD_PARTY_LIMIT_PER_STORE} waiting subscriptions for ${where}, the most an agent not bound to the store may hold. ` +
          'Cancel some, wait until they are notified, or have the store’s owner claim the agent for the store.',
        { extensions: { limit: THIRD_PARTY_LIMIT_PER_STORE } },
      );
    }
    await this.addContacts(row, contacts, now);
    if (row.status === 'pending') return { subscriptionId: row.id, status: 'pending' };
    await this.announceIfNew(row, now);
    return { subscriptionId: row.id, status: 'active' };
  }

  /** Whether a new e-mail signup at the store, from a shopper in that country, waits for a confirmation link. */
  private async confirmationRequired(storeDomain: string, shopperCountry: string | null | undefined): Promise<boolean> {
    return requiresConfirmation(await this.channels.settingsOf(storeDomain), shopperCountry);
  }

  /**
   * Adds phones and browsers beside the subscription's own: a sign-up proves nothing about who
   * makes it, so one never replaces or changes a contact point someone confirmed.
   */
  private async addContacts(row: SubscriptionRow, contacts: ExtraContact[], now: string): Promise<void> {
    for (const contact of contacts) {
      const added = await this.channels.contactPoints.put(contactPointRow(row, contact, now));
      if (added) continue;
      const what = `${contactPointKind(contact.channel).device}s`;
      throw new Problem('too-many-contact-points', `This alert already has ${CONTACT_POINTS_PER_CHANNEL} ${what}, the most one alert may have; none was added.`, {
        extensions: { limit: CONTACT_POINTS_PER_CHANNEL },
      });
    }
  }

  /** `subscription.created` for the store's webhooks, when this call made the row (not when it found the live one). */
  private async announceIfNew(row: SubscriptionRow, now: string): Promise<void> {
    if (row.store_domain === null || row.created_at !== now || row.status !== 'active') return;
    await this.events.announce({
      storeDomain: row.store_domain,
      type: 'subscription.created',
      id: eventId('subscription.created', row.id),
      occurredAt: row.created_at,
      data: { subscriptionId: row.id, productId: row.product_id, variantId: row.variant_id, email: row.email, madeBy: row.agent_id ?? 'storefront', thirdParty: row.third_party === 1, consentMethod: row.consent_method, confirmedAt: row.confirmed_at },
    });
  }

  /**
   * A shopper subscribing through the storefront widget: no agent, the store named by the page
   * (which the storefront checked is a customer).
   */
  async subscribeShopper(input: {
    shop: string;
    productId: string;
    variantId?: string | null;
    email: string;
    locale?: string | null;
    country?: string | null;
    consent?: Consent;
    contacts?: ExtraContact[];
  }): Promise<SubscriptionRow & { confirmationRequired: boolean }> {
    const target: WatchTarget = {
      productId: input.productId,
      variantId: input.variantId ?? null,
      email: normaliseEmail(input.email),
      locale: input.locale ?? null,
      country: input.country ?? null,
      ...(input.consent ? { consent: input.consent } : {}),
    };
    const now = nowIso();
    const owner: SubscriptionOwner = { storeDomain: input.shop, agentId: null, thirdParty: false };
    const pending = await this.confirmationRequired(input.shop, target.country);
    const row = pending ? await this.store.subscribePending(target, owner, now) : await this.store.subscribe(target, owner, now);
    if (input.contacts?.length) await this.addContacts(row, input.contacts, now);
    await this.announceIfNew(row, now);
    // The store's policy, not the row's status: the storefront's answer must not show whether the address already waited.
    return { ...row, confirmationRequired: pending };
  }

  // --- double opt-in ------------------------------------------------------------------------

  confirmUrl(subscriptionId: string): string {
    return `${this.baseUrl}/confirm/${this.signer.sign(CONFIRM, subscriptionId)}`;
  }

  /** The subscription a genuine confirmation token names; undefined for a forged one. */
  async subscriptionForConfirmToken(token: string): Promise<SubscriptionRow | undefined> {
    const id = this.signer.verify(CONFIRM, token);
    return id === undefined ? undefined : this.store.find(id);
  }

  /** The shopper confirmed: pending → active (once; an expired or ended one stays so). */
  async confirmSubscription(token: string): Promise<SubscriptionRow | undefined> {
    const id = this.signer.verify(CONFIRM, token);
    if (id === undefined) return undefined;
    const now = nowIso();
    const row = await this.store.confirm(id, now);
    if (row?.status === 'active' && row.confirmed_at === now) await this.announceIfNew({ ...row, created_at: now }, now);
    return row;
  }

  /** Pending subscriptions whose confirmation mail is still to go (the confirmation job). */
  awaitingConfirmationRequest(limit: number): Promise<SubscriptionRow[]> {
    return this.store.awaitingConfirmationRequest(limit);
  }

  markConfirmationSent(id: string): Promise<void> {
    return this.store.markConfirmationSent(id, nowIso());
  }

  /** Subscriptions and contact points (phones awaiting their YES) left unconfirmed `hours` expire: never alerted. */
  async expireUnconfirmed(hours: number, now = new Date()): Promise<number> {
    const before = new Date(now.getTime() - hours * 3600_000).toISOString();
    const at = now.toISOString();
    let expired = await this.store.expirePending(before, at);
    for (const channel of PENDING_CHANNELS) expired += await this.channels.contactPoints.expirePending(channel, before, at);
    return expired;
  }

  /** A subscription by id, for the service's own work (no caller: never for a request's answer). */
  subscriptionForWork(id: string): Promise<SubscriptionRow | undefined> {
    return this.store.find(id);
  }

  /** Contact points of `channel` whose confirmation request (a phone's "reply YES" text) is still to go (the confirmation jobs). */
  contactPointsAwaitingConfirmationRequest(channel: ContactChannel, limit: number): Promise<ContactPointRow[]> {
    return this.channels.contactPoints.awaitingConfirmationRequest(channel, limit);
  }

  markContactPointConfirmationSent(contactPointId: string): Promise<void> {
    return this.channels.contactPoints.markConfirmationSent(contactPointId, nowIso());
  }

  /** The address confirmed (a phone answered YES): its pending contact points of `channel` at these stores become active. */
  confirmContactPoints(channel: ContactChannel, address: string, storeDomains: string[]): Promise<number> {
    return this.channels.contactPoints.confirm(channel, address, storeDomains, nowIso());
  }

  /** Stores where this address waits to confirm alerts of `channel`. */
  storesAwaitingConfirmation(channel: ContactChannel, address: string): Promise<string[]> {
    return this.channels.contactPoints.pendingStores(channel, address);
  }

  // --- the shopper's page -------------------------------------------------------------------

  /** The shopper's page of the subscription's address at its store; the link names the subscription, never the address. */
  shopperPageUrl(subscriptionId: string): string {
    return `${this.baseUrl}/my/${this.signer.sign(SHOPPER_PAGE, subscriptionId)}`;
  }

  /** Whose page a genuine link opens; undefined for a forged link or an erased subscription. */
  async shopperForToken(token: string): Promise<Shopper | undefined> {
    const id = this.signer.verify(SHOPPER_PAGE, token);
    const row = id === undefined ? undefined : await this.store.find(id);
    if (!row || row.store_domain === null) return undefined;
    return { storeDomain: row.store_domain, emailKey: row.email_key, email: row.email };
  }

  /** Everything the address waits for (or waited for) at the store, with each subscription's channels. */
  async shopperSubscriptions(shopper: Shopper): Promise<ShopperSubscription[]> {
    const rows = await this.waitingStore.ofCustomer(shopper.storeDomain, shopper.emailKey);
    const points = await this.channels.contactPoints.ofSubscriptions(rows.map((row) => row.id));
    return rows
      .sort((a, b) => (a.created_at < b.created_at ? 1 : -1))
      .map((row) => ({ row, contactPoints: points.filter((point) => point.subscription_id === row.id) }));
  }

  /** The shopper ends one of their subscriptions, or all (`subscriptionId` undefined); returns how many ended. */
  async shopperCancel(shopper: Shopper, subscriptionId?: string): Promise<number> {
    const ids = await this.shopperIds(shopper, subscriptionId);
    return this.store.transitionMany(shopper.storeDomain, ids, ['pending', 'active', 'notified'], 'unsubscribed', nowIso());
  }

  /**
   * The shopper turns a channel on or off, for one subscription or all. E-mail is muted, not
   * ended (the subscription is the e-mail's); a phone or browser stops, and may start again.
   */
  async shopperSetChannel(shopper: Shopper, channel: Channel, on: boolean, subscriptionId?: string): Promise<void> {
    const ids = await this.shopperIds(shopper, subscriptionId);
    const now = nowIso();
    if (channel === 'email') return this.store.setEmailMuted(shopper.storeDomain, ids, !on, now);
    const points = (await this.channels.contactPoints.ofSubscriptions(ids)).filter((point) => point.channel === channel).map((point) => point.id);
    if (on) await this.channels.contactPoints.setStatus(points, ['stopped'], 'active', null, now);
    else await this.channels.contactPoints.setStatus(points, ['pending', 'active'], 'stopped', 'turned off on the shopper’s page', now);
  }

  /** The shopper's own subscription ids: one of them, or all; another address's id is no id. */
  private async shopperIds(shopper: Shopper, subscriptionId: string | undefined): Promise<string[]> {
    const rows = await this.waitingStore.ofCustomer(shopper.storeDomain, shopper.emailKey);
    const ids = rows.map((row) => row.id);
    if (subscriptionId === undefined) return ids;
    if (!ids.includes(subscriptionId)) throw new NotFound(`No subscription ${subscriptionId} on this page.`);
    return [subscriptionId];
  }

  // --- a phone's or browser's own stop link ----------------------------------------------------

  /**
   * Stops alerts to one contact point and covers nothing else: the only link a push notification
   * carries beside the product's, since a browser proves only itself (see docs/security.md).
   */
  contactPointStopUrl(contactPointId: string): string {
    return `${this.baseUrl}/stop/${this.signer.sign(CONTACT_POINT_STOP, contactPointId)}`;
  }

  /** The contact point a genuine stop link names; undefined for a forged link or an erased one. */
  async contactPointForStopToken(token: string): Promise<ContactPointRow | undefined> {
    const id = this.signer.verify(CONTACT_POINT_STOP, token);
    if (id === undefined) return undefined;
    return (await this.channels.contactPoints.byIds([id]))[0];
  }

  /** The browser (or phone) stops getting alerts through this contact point; stopping twice is harmless. Returns the point as it was. */
  async stopContactPoint(token: string): Promise<ContactPointRow | undefined> {
    const point = await this.contactPointForStopToken(token);
    if (point) await this.channels.contactPoints.setStatus([point.id], ['pending', 'active'], 'stopped', 'turned off from its own alert', nowIso());
    return point;
  }

  // --- channels, for dispatch ---------------------------------------------------------------

  /** The contact points of these subscriptions (dispatch plans a message per active one). */
  contactPointsOf(subscriptionIds: string[]): Promise<ContactPointRow[]> {
    return this.channels.contactPoints.ofSubscriptions(subscriptionIds);
  }

  contactPointsByIds(ids: string[]): Promise<ContactPointRow[]> {
    return this.channels.contactPoints.byIds(ids);
  }

  /** A contact point its channel says is gone (a browser's push subscription): removed wherever it was given. */
  async removeContactPoint(id: string, reason: string): Promise<void> {
    await this.channels.contactPoints.removeEverywhere(id, reason, nowIso());
  }

  async getSubscription(id: string, caller: Caller): Promise<Subscription> {
    return this.present(await this.mustFind(id, caller));
  }

  /**
   * The subscriptions the caller may read (as getSubscription decides), a page of at most `limit`
   * in id order after `after`; `next` is where the following page starts, absent after the last.
   */
  async listSubscriptions(caller: Caller, after: string | undefined, limit: number): Promise<{ subscriptions: Subscription[]; next?: string }> {
    const rows = await this.waitingStore.visiblePage({ agentId: caller.agentId, storeDomain: caller.storeDomain }, after, limit);
    const subscriptions = rows.filter((row) => canSee(caller, { agentId: row.agent_id, storeDomain: row.store_domain })).map((row) => this.present(row));
    return rows.length === limit ? { subscriptions, next: rows.at(-1)!.id } : { subscriptions };
  }

  /** Cancels through the API. Cancelling twice is harmless; an ended subscription stays ended. */
  async cancelSubscription(id: string, caller: Caller): Promise<Subscription> {
    await this.mustFind(id, caller);
    const row = await this.store.transition(id, ['active'], 'cancelled', nowIso());
    if (!row) throw new NotFound(`No subscription ${id}.`);
    if (row.status !== 'cancelled') {
      throw new Conflict(`Subscription ${id} is ${row.status} and can no longer be cancelled.`);
    }
    return this.present(row);
  }

  unsubscribeToken(subscriptionId: string): string {
    return this.signer.sign(UNSUBSCRIBE, subscriptionId);
  }

  /** The subscription a genuine unsubscribe token names, or undefined for a forged one. */
  async subscriptionForToken(token: string): Promise<SubscriptionRow | undefined> {
    const id = this.signer.verify(UNSUBSCRIBE, token);
    return id === undefined ? undefined : this.store.find(id);
  }

  /**
   * One-click unsubscribe. The shopper's word is final whatever the state: a waiting alert stops,
   * and so does the reminder of one already sent (notified → unsubscribed); a cancelled one stays
   * as it is. Returns undefined for a forged token.
   */
  async unsubscribe(token: string): Promise<SubscriptionRow | undefined> {
    const id = this.signer.verify(UNSUBSCRIBE, token);
    if (id === undefined) return undefined;
    return this.store.transition(id, ['active', 'notified'], 'unsubscribed', nowIso());
  }

  /** The one-click unsubscribe address of a subscription (for e-mails and their List-Unsubscribe header). */
  unsubscribeUrl(subscriptionId: string): string {
    return `${this.baseUrl}/unsubscribe/${this.unsubscribeToken(subscriptionId)}`;
  }

  /** Subscribers waiting for a restock, in signup order (dispatch plans its batches from these). */
  waitingSubscribers(query: WaitingQuery): Promise<WaitingSubscriber[]> {
    return this.waitingStore.waiting(query);
  }

  stillActive(subscriptionIds: string[]): Promise<Set<string>> {
    return this.waitingStore.stillActive(subscriptionIds);
  }

  /** Of these subscriptions, those whose shopper turned e-mail off. */
  emailMuted(subscriptionIds: string[]): Promise<Set<string>> {
    return this.waitingStore.emailMuted(subscriptionIds);
  }

  /** Of these subscriptions, those alerted and not unsubscribed since: a reminder may follow. */
  stillNotified(subscriptionIds: string[]): Promise<Set<string>> {
    return this.waitingStore.withStatus(subscriptionIds, 'notified');
  }

  /** Their alert was sent: active → notified, within the caller's transaction (see WaitingRepository). */
  markNotified(trx: Trx, subscriptionIds: string[]): Promise<void> {
    return this.waitingStore.markNotified(trx, subscriptionIds, nowIso());
  }

  /** An address got a restock's alert: its every waiting subscription the alert fulfils is notified too. */
  markAddressesNotified(trx: Trx, addresses: FulfilledAddress[]): Promise<void> {
    return this.waitingStore.markAddressesNotified(trx, addresses, nowIso());
  }

  /** Waiting subscribers per product and variant: the demand, and the length of the alert queue. */
  async waitingCounts(storeDomain: string, limit = 1000, order: WaitingOrder = 'product'): Promise<WaitingCount[]> {
    const rows = await this.waitingStore.waitingCounts(storeDomain, limit, order);
    return rows.map((row) => ({ productId: row.product_id, variantId: row.variant_id, waiting: Number(row.waiting) }));
  }

  /**
   * Waitlists (a product's, or one variant's) with at least `threshold` subscribers waiting, a
   * page at a time in (product, variant) order after `after`; whole-product first per product.
   */
  async waitingAtLeast(storeDomain: string, threshold: number, after: { productId: string; variantId: string | null } | null, limit = 500): Promise<WaitingCount[]> {
    const cursor = after && { productId: after.productId, variantKey: after.variantId ?? '' };
    const rows = await this.waitingStore.waitingAtLeast(storeDomain, threshold, cursor, limit);
    return rows.map((row) => ({ productId: row.product_id, variantId: row.variant_id, waiting: Number(row.waiting) }));
  }

  /**
   * A page of the store's waitlists ranked by shoppers waiting, then time waited (the purchasing
   * view), after `after`; for a caller bound to the store. `waitingSinceSum` is the waiting
   * shoppers' sign-up times summed in epoch seconds: time waited in all is waiting × now − it.
   */
  async rankedWaitlists(caller: Caller, domain: string, after: RankedWaitlistKey | null, limit: number): Promise<RankedWaitlist[]> {
    const rows = await this.waitingStore.rankedWaitlists(ownStore(caller, domain), after, limit);
    return rows.map((row) => ({ productId: row.product_id, variantId: row.variant_key === '' ? null : row.variant_key, waiting: row.waiting, waitingSinceSum: row.waiting_since_sum }));
  }

  /** The demand (`waitingCounts`), for a caller bound to the store. */
  async demandOf(caller: Caller, domain: string, limit = 1000, order: WaitingOrder = 'product'): Promise<WaitingCount[]> {
    return this.waitingCounts(ownStore(caller, domain), limit, order);
  }

  /** Who waits for these products of the store, per product and variant. */
  async waitingFor(caller: Caller, domain: string, productIds: string[]): Promise<WaitingCount[]> {
    const rows = await this.waitingStore.waitingForProducts(ownStore(caller, domain), productIds);
    return rows.map((row) => ({ productId: row.product_id, variantId: row.variant_id, waiting: Number(row.waiting) }));
  }

  /** Shoppers who unsubscribed from a store's alerts, most recent first. */
  async recentUnsubscribes(caller: Caller, domain: string, limit = 50): Promise<SubscriptionRow[]> {
    return this.waitingStore.inStatus(ownStore(caller, domain), 'unsubscribed', limit);
  }

  /** Sign-ups for the store in [from, to). */
  signupsBetween(storeDomain: string, from: string, to: string): Promise<number> {
    return this.waitingStore.countCreated(storeDomain, from, to);
  }

  /** The store's subscriptions, oldest first, read a page at a time (exports). Tenancy is decided at the call, before anything streams. */
  subscriberRows(caller: Caller, domain: string): AsyncGenerator<SubscriptionRow> {
    const store = ownStore(caller, domain);
    return inPages<SubscriptionRow, string>((after, limit) => this.waitingStore.subscriptionPage(store, after, limit), (row) => row.id);
  }

  /** A store's subscriptions per status (active, notified, unsubscribed, ...). */
  async subscriptionCounts(caller: Caller, domain: string): Promise<Record<string, number>> {
    return this.waitingStore.countsByStatus(ownStore(caller, domain));
  }

  /** A subscription of the store, for its owner's audit of an alert. */
  async subscriptionOfStore(caller: Caller, domain: string, id: string): Promise<SubscriptionRow | undefined> {
    const store = ownStore(caller, domain);
    const row = await this.store.find(id);
    return row?.store_domain === store ? row : undefined;
  }

  waitingProducts(storeDomain: string, limit = 250): Promise<string[]> {
    return this.waitingStore.waitingProducts(storeDomain, limit);
  }

  /** Countries of shoppers waiting for these products (where the platform must say whether it is on sale). */
  waitingCountries(storeDomain: string, productIds: string[], limit = 20): Promise<string[]> {
    return this.waitingStore.waitingCountries(storeDomain, productIds, limit);
  }

  /** What the service holds about one customer of a store (GDPR data request). */
  async customerData(storeDomain: string, email: string): Promise<Subscription[]> {
    return (await this.waitingStore.ofCustomer(storeDomain, addressKey(email))).map((row) => this.present(row));
  }

  eraseCustomer(storeDomain: string, email: string): Promise<number> {
    return this.waitingStore.eraseCustomer(storeDomain, addressKey(email));
  }

  eraseStore(storeDomain: string): Promise<number> {
    return this.waitingStore.eraseStore(storeDomain);
  }

  /** Someone else's subscription answers exactly like a missing one. */
  private async mustFind(id: string, caller: Caller): Promise<SubscriptionRow> {
    const row = await this.store.find(id);
    if (!row || !canSee(caller, { agentId: row.agent_id, storeDomain: row.store_domain })) {
      throw new NotFound(`No subscription ${id}.`);
    }
    return row;
  }

  private present(row: SubscriptionRow): Subscription {
    return {
      subscriptionId: row.id,
      status: row.status,
      productId: row.product_id,
      variantId: row.variant_id,
      shop: row.store_domain,
      email: row.email,
      createdAt: row.created_at,
      updatedAt: row.updated_at,
      unsubscribeUrl: this.unsubscribeUrl(row.id),
    };
  }
}

function contactPointRow(subscription: SubscriptionRow, contact: ExtraContact, now: string): ContactPointRow {
  const common = {
    id: newOpaqueId('cp'),
    subscription_id: subscription.id,
    store_domain: subscription.store_domain,
    time_zone: contact.timeZone,
    consent_method: contact.consent.method,
    consent_text: contact.consent.text,
    consent_page: contact.consent.page,
    consent_at: now,
    status_reason: null,
    confirmation_sent_at: null,
    created_at: now,
    updated_at: now,
  };
  // SMS always asks for a YES, whatever the store's e-mail opt-in; a browser's permission prompt is the shopper's explicit yes.
  const startsAs = contactPointKind(contact.channel).startsAs;
  const consent = { ...common, status: startsAs, confirmed_at: startsAs === 'active' ? now : null };
  // The details are checked against the channel's schema as the row is stored.
  return { ...consent, channel: contact.channel, address: contact.address, address_key: contact.addressKey, details: contact.details } as ContactPointRow;
}
