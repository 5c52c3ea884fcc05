import { nowIso } from '../core/clock.ts';
import { eventId, type EventSink } from '../core/events.ts';
import { inPages } from '../core/db/pages.ts';
import type { Trx } from '../core/db/database.ts';
import { addressKey, normaliseEmail } from '../core/email.ts';
import { canSee, ownStore, storeForWrite, type Caller } from '../core/http/caller.ts';
import { Conflict, Forbidden, NotFound, Problem } from '../core/problems.ts';
import type { TokenSigner } from '../core/signed-token.ts';
import type { SubscribeAlertInput, Subscription } from './schemas.ts';
import {
  OVER_LIMIT,
  type FulfilledAddress,
  type SubscriptionRepository,
  type SubscriptionRow,
  type WaitingOrder,
  type WaitingQuery,
  type WaitingRepository,
  type WaitingSubscriber,
} from './repository.ts';

const UNSUBSCRIBE = 'unsubscribe';

/**
 * How many live subscriptions one agent not bound to a store may hold for it (or for no named
 * store). Such subscriptions are third-party: the store's shoppers never asked for them, and
 * every alert they get is paid from the store's allowance. An agent its owner bound to the
 * store is not limited (the store vouches for it), nor is the storefront (limited per client).
 */
export const THIRD_PARTY_LIMIT_PER_STORE = 50;

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
  ) {}

  /**
   * subscribeAlert: the caller's own live subscription for this product/variant/address,
   * created if needed. Never another maker's: the storefront's row or another agent's for the
   * same address is neither returned nor hinted at, so an agent learns nothing of other
   * shoppers. An agent not bound to the store makes third-party subscriptions, at most
   * THIRD_PARTY_LIMIT_PER_STORE live ones per store.
   */
  async subscribeAlert(input: SubscribeAlertInput, caller: Caller): Promise<{ subscriptionId: string; status: 'active' }> {
    const { store, foreign } = storeForWrite(caller, input.shop);
    if (foreign) throw new Forbidden(`This agent is bound to ${caller.storeDomain} and cannot subscribe for ${input.shop}.`);
    const target = { productId: input.productId, variantId: input.variantId ?? null, email: normaliseEmail(input.email), country: input.country ?? null };
    // storeForWrite puts a bound agent on its own store: only an unbound one is third-party.
    const now = nowIso();
    if (caller.storeDomain !== null) {
      const row = await this.store.subscribe(target, { storeDomain: store, agentId: caller.agentId, thirdParty: false }, now);
      await this.announceIfNew(row, now);
      return { subscriptionId: row.id, status: 'active' };
    }
    const row = await this.store.subscribeWithin(target, { storeDomain: store, agentId: caller.agentId, thirdParty: true }, now, THIRD_PARTY_LIMIT_PER_STORE);
    if (row === OVER_LIMIT) {
      const where = store ?? 'products of no named store';
      throw new Problem(
        'too-many-subscriptions',
        `This agent already holds ${THIRD_PARTY_LIMIT_PER_STORE} waiting subscriptions for ${where}, the most an agent not bound to the store may hold. ` +
          'Cancel some, wait until they are notified, or have the store’s owner claim the agent for the store.',
        { extensions: { limit: THIRD_PARTY_LIMIT_PER_STORE } },
      );
    }
    await this.announceIfNew(row, now);
    return { subscriptionId: row.id, status: 'active' };
  }

  /** `subscription.created` for the store's webhooks, when this call made the row (not when it found the live one). */
  private async announceIfNew(row: SubscriptionRow, now: string): Promise<void> {
    if (row.store_domain === null || row.created_at !== now) return;
    await this.events.announce({
      storeDomain: row.store_domain,
      type: 'subscription.created',
      id: eventId('subscription.created', row.id),
      occurredAt: row.created_at,
      data: { subscriptionId: row.id, productId: row.product_id, variantId: row.variant_id, email: row.email, madeBy: row.agent_id ?? 'storefront', thirdParty: row.third_party === 1 },
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
  }): Promise<SubscriptionRow> {
    const target = { productId: input.productId, variantId: input.variantId ?? null, email: normaliseEmail(input.email), locale: input.locale ?? null, country: input.country ?? null };
    const now = nowIso();
    const row = await this.store.subscribe(target, { storeDomain: input.shop, agentId: null, thirdParty: false }, now);
    await this.announceIfNew(row, now);
    return row;
  }

  async getSubscription(id: string, caller: Caller): Promise<Subscription> {
    return this.present(await this.mustFind(id, caller));
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

  /** The demand (`waitingCounts`), for a caller bound to the store. */
  async demandOf(caller: Caller, domain: string, limit = 1000, order: WaitingOrder = 'product'): Promise<WaitingCount[]> {
    return this.waitingCounts(ownStore(caller, domain), limit, order);
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
