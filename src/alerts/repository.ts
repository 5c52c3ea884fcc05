// Longer than most files on purpose: every query of the subscriptions table in one place, where its
// indexes are chosen together.
import { sql } from 'kysely';
import type { Database, Db, Trx } from '../core/db/database.ts';
import type { SubscriptionsTable, WaitlistsTable } from '../core/db/schema.ts';
import { chunks } from '../core/chunks.ts';
import { isUniqueViolation } from '../core/db/dialect.ts';
import { addressKey } from '../core/email.ts';
import { newOpaqueId } from '../core/ids.ts';
import type { SubscriptionStatus } from './schemas.ts';

export type SubscriptionRow = SubscriptionsTable;

export interface WatchTarget {
  productId: string;
  variantId: string | null;
  email: string;
  /** The shopper's language, when the storefront widget knew it. */
  locale?: string | null;
  /** The shopper's country, when the storefront knew it. */
  country?: string | null;
  /** How the e-mail's consent was given, and the words shown; absent for callers that record none. */
  consent?: Consent;
}

/** A shopper's consent to one channel: how it was given, the words shown, from which page. */
export interface Consent {
  method: string;
  text: string;
  page: string | null;
}

/**
 * Who a subscription belongs to: the store it is for and its maker, the storefront (no agent) or
 * one agent. `thirdParty`: the maker is an agent not bound to that store.
 */
export interface SubscriptionOwner {
  storeDomain: string | null;
  agentId: string | null;
  thirdParty: boolean;
}

/** A third-party subscribe over the cap: nothing was stored. */
export const OVER_LIMIT = Symbol('over the third-party limit');

/** Storage of alert subscriptions; the only code that touches the `subscriptions` table. */
export class SubscriptionRepository {
  /** Every sign-up's insert, made once: true when the row went in, false when the live one is there already. */
  private readonly insertNew: (values: unknown[]) => Promise<boolean>;

  constructor(private readonly database: Database) {
    this.insertNew = database.insertSkippingConflicts({ table: 'subscriptions', columns: SUBSCRIPTION_COLUMNS, key: 'id' });
  }

  /**
   * The live subscription for this (product, variant, address key) of this owner (store and
   * maker), created if there is none. The insert comes first because a new watch is the common
   * case, and it is one statement (on PostgreSQL shared with the other sign-ups of the moment:
   * Database.insertSkippingConflicts), so it needs no explicit transaction. When the
   * partial unique index refuses it (a duplicate, or a race another process won), the live row
   * is read instead; should that row end in between, the insert is tried again.
   */
  async subscribe(target: WatchTarget, owner: SubscriptionOwner, now: string): Promise<SubscriptionRow> {
    for (let attempt = 0; ; attempt++) {
      const row = newRow(target, owner, now);
      if (await this.insertNew(SUBSCRIPTION_COLUMNS.map((column) => row[column]))) return row;
      const live = await findLive(this.database.db, target, owner);
      if (live) return live;
      if (attempt >= 2) throw new Error('subscription kept conflicting with a row that then ended');
    }
  }

  /**
   * As `subscribe` (or `subscribePending`), for a maker that may hold at most `limit` live or
   * pending third-party subscriptions for the store: its own one comes back whatever the count; a new one is made only under
   * the limit, else OVER_LIMIT and nothing is stored. The count and the insert are one
   * transaction, serialised per maker and store (SQLite has one writer; PostgreSQL takes an
   * advisory lock on the pair), so requests in parallel cannot slip past the limit together.
   */
  subscribeWithin(
    target: WatchTarget,
    owner: SubscriptionOwner & { agentId: string },
    now: string,
    limit: number,
    status: 'active' | 'pending' = 'active',
  ): Promise<SubscriptionRow | typeof OVER_LIMIT> {
    return this.database.write(async (trx) => {
      if (this.database.dialect === 'postgres') {
        await sql`select pg_advisory_xact_lock(hashtext(${`third-party-subscriptions\n${owner.agentId}\n${owner.storeDomain ?? ''}`}))`.execute(trx);
      }
      const live = (await findLive(trx, target, owner)) ?? (status === 'pending' ? await findPending(trx, target, owner) : undefined);
      if (live) return live;
      // Pending ones count too: each costs a confirmation mail to an address the agent named.
      const held = await trx
        .selectFrom('subscriptions')
        .select((eb) => eb.fn.countAll<number>().as('n'))
        .where('agent_id', '=', owner.agentId)
        .where(sql<string>`coalesce(store_domain, '')`, '=', owner.storeDomain ?? '')
        .where((eb) => (status === 'pending' ? eb('status', 'in', ['active', 'pending']) : eb('status', '=', sql.lit('active'))))
        .where('third_party', '=', sql.lit(1))
        .executeTakeFirstOrThrow();
      if (Number(held.n) >= limit) return OVER_LIMIT;
      const row = { ...newRow(target, owner, now), status };
      await trx.insertInto('subscriptions').values(row).execute();
      return row;
    });
  }

  /**
   * For a store that asks shoppers to confirm: the owner's live (active) or pending subscription
   * for this target, else a new pending one. Not guarded by a unique index (pending rows are
   * few and short-lived): two signups at once may each make one, and the second confirmed then
   * runs into the first (see `confirm`).
   */
  async subscribePending(target: WatchTarget, owner: SubscriptionOwner, now: string): Promise<SubscriptionRow> {
    const known = (await findLive(this.database.db, target, owner)) ?? (await findPending(this.database.db, target, owner));
    if (known) return known;
    const row = { ...newRow(target, owner, now), status: 'pending' as const };
    await this.database.writeStatement((db) => db.insertInto('subscriptions').values(row).executeTakeFirst());
    return row;
  }

  /**
   * pending → active, once. A second pending row of the same target confirmed after the first
   * would break the one-live index: it ends as cancelled instead, the shopper already waits.
   */
  async confirm(id: string, now: string): Promise<SubscriptionRow | undefined> {
    try {
      await this.database.writeStatement((db) =>
        db.updateTable('subscriptions').set({ status: 'active', confirmed_at: now, updated_at: now }).where('id', '=', id).where('status', '=', 'pending').executeTakeFirst(),
      );
    } catch (err) {
      if (!isUniqueViolation(err)) throw err;
      await this.database.writeStatement((db) => db.updateTable('subscriptions').set({ status: 'cancelled', updated_at: now }).where('id', '=', id).where('status', '=', 'pending').executeTakeFirst());
    }
    return this.find(id);
  }

  /** Pending subscriptions whose confirmation request has not gone out, oldest first. */
  awaitingConfirmationRequest(limit: number): Promise<SubscriptionRow[]> {
    return this.database.db
      .selectFrom('subscriptions')
      .selectAll()
      .where('status', '=', sql.lit('pending'))
      .where('confirmation_sent_at', 'is', null)
      .orderBy('created_at')
      .limit(limit)
      .execute();
  }

  async markConfirmationSent(id: string, now: string): Promise<void> {
    await this.database.writeStatement((db) => db.updateTable('subscriptions').set({ confirmation_sent_at: now }).where('id', '=', id).executeTakeFirst());
  }

  /** pending subscriptions made before `before` expire: never confirmed, never alerted. */
  async expirePending(before: string, now: string): Promise<number> {
    const result = await this.database.writeStatement((db) =>
      db.updateTable('subscriptions').set({ status: 'expired', updated_at: now }).where('status', '=', sql.lit('pending')).where('created_at', '<', before).executeTakeFirst(),
    );
    return Number(result.numUpdatedRows);
  }

  /** Mutes or unmutes e-mail for these subscriptions of one store (the shopper's page). */
  async setEmailMuted(storeDomain: string, ids: string[], muted: boolean, now: string): Promise<void> {
    for (const chunk of chunks(ids)) {
      await this.database.writeStatement((db) =>
        db.updateTable('subscriptions').set({ email_muted: muted ? 1 : 0, updated_at: now }).where('store_domain', '=', storeDomain).where('id', 'in', chunk).executeTakeFirst(),
      );
    }
  }

  /** Moves these subscriptions of one store in one of `from` to `to`; returns how many moved. */
  async transitionMany(storeDomain: string, ids: string[], from: SubscriptionStatus[], to: SubscriptionStatus, now: string): Promise<number> {
    let moved = 0;
    for (const chunk of chunks(ids)) {
      const result = await this.database.writeStatement((db) =>
        db.updateTable('subscriptions').set({ status: to, updated_at: now }).where('store_domain', '=', storeDomain).where('id', 'in', chunk).where('status', 'in', from).executeTakeFirst(),
      );
      moved += Number(result.numUpdatedRows);
    }
    return moved;
  }

  find(id: string): Promise<SubscriptionRow | undefined> {
    return this.database.db.selectFrom('subscriptions').selectAll().where('id', '=', id).executeTakeFirst();
  }

  /** Moves a subscription to `to` if it is in one of `from`; returns the row as it now is. */
  transition(id: string, from: SubscriptionStatus[], to: SubscriptionStatus, now: string): Promise<SubscriptionRow | undefined> {
    return this.database.write(async (trx) => {
      await trx
        .updateTable('subscriptions')
        .set({ status: to, updated_at: now })
        .where('id', '=', id)
        .where('status', 'in', from)
        .execute();
      return trx.selectFrom('subscriptions').selectAll().where('id', '=', id).executeTakeFirst();
    });
  }
}

export interface WaitingQuery {
  storeDomain: string;
  /** Also subscriptions made without naming a store (only when the platform vouched for the product). */
  includeUnowned: boolean;
  productId: string;
  /** null: every subscription to the product; otherwise those to this variant and to the whole product. */
  variantId: string | null;
  /** Third-party subscriptions (made by agents not bound to the store), or the store's own. */
  thirdParty: boolean;
  /** Signup-order cursor: only subscriptions after this one. */
  after: { createdAt: string; id: string } | null;
  limit: number;
  /** Countries where the product is not on sale: their shoppers wait on. */
  exceptCountries?: string[];
}

export type WaitingSubscriber = Pick<SubscriptionRow, 'id' | 'email' | 'product_id' | 'variant_id' | 'created_at' | 'store_domain' | 'locale' | 'email_muted'>;

/** The waiting rows of one address that a restock's alert to it fulfils. */
export interface FulfilledAddress {
  storeDomain: string;
  productId: string;
  /** The restock's variant: subscriptions to it and to the whole product; null: the whole product came back. */
  variantId: string | null;
  emailKey: string;
}

/** `product`: stable for readers paging through; `most-wanted`: the largest groups first (the dashboard). */
export type WaitingOrder = 'product' | 'most-wanted';

/** A waitlist as the purchasing view ranks it; also its keyset cursor. */
export interface RankedWaitlistKey {
  waiting: number;
  waitingSinceSum: number;
  productId: string;
  variantKey: string;
}

export type RankedWaitlistRow = Pick<WaitlistsTable, 'product_id' | 'variant_key' | 'waiting' | 'waiting_since_sum'>;

/** PostgreSQL's bigint arrives as a number through the pool's parsers, SQLite's integer as one already; counts too. */
const numbers = (row: RankedWaitlistRow): RankedWaitlistRow => ({ ...row, waiting: Number(row.waiting), waiting_since_sum: Number(row.waiting_since_sum) });

/** Queries the dispatch feature needs, still confined to the `subscriptions` table. */
export class WaitingRepository {
  constructor(private readonly database: Database) {}

  /** Active subscriptions of one kind (first- or third-party) matching a restock, in signup order. */
  waiting(query: WaitingQuery): Promise<WaitingSubscriber[]> {
    let select = this.database.db
      .selectFrom('subscriptions')
      .select(['id', 'email', 'product_id', 'variant_id', 'created_at', 'store_domain', 'locale', 'email_muted'])
      .where('product_id', '=', query.productId)
      .where('status', '=', sql.lit('active'))
      .where('third_party', '=', query.thirdParty ? 1 : 0);
    if (query.variantId !== null) {
      const variantId = query.variantId;
      select = select.where((eb) => eb.or([eb('variant_id', '=', variantId), eb('variant_id', 'is', null)]));
    }
    const except = query.exceptCountries ?? [];
    if (except.length > 0) select = select.where((eb) => eb.or([eb('country', 'is', null), eb('country', 'not in', except)]));
    select = query.includeUnowned
      ? select.where((eb) => eb.or([eb('store_domain', '=', query.storeDomain), eb('store_domain', 'is', null)]))
      : select.where('store_domain', '=', query.storeDomain);
    if (query.after) {
      const { createdAt, id } = query.after;
      select = select.where((eb) => eb.or([eb('created_at', '>', createdAt), eb.and([eb('created_at', '=', createdAt), eb('id', '>', id)])]));
    }
    return select.orderBy('created_at').orderBy('id').limit(query.limit).execute();
  }

  /** Of these subscriptions, the ids still active. */
  stillActive(ids: string[]): Promise<Set<string>> {
    return this.withStatus(ids, 'active');
  }

  /** Of these subscriptions, those whose shopper muted e-mail. */
  async emailMuted(ids: string[]): Promise<Set<string>> {
    const out = new Set<string>();
    for (const chunk of chunks(ids)) {
      const rows = await this.database.db.selectFrom('subscriptions').select('id').where('id', 'in', chunk).where('email_muted', '=', 1).execute();
      for (const row of rows) out.add(row.id);
    }
    return out;
  }

  /** Of these subscriptions, the ids in this status. */
  async withStatus(ids: string[], status: SubscriptionStatus): Promise<Set<string>> {
    const out = new Set<string>();
    for (const chunk of chunks(ids)) {
      const rows = await this.database.db.selectFrom('subscriptions').select('id').where('id', 'in', chunk).where('status', '=', status).execute();
      for (const row of rows) out.add(row.id);
    }
    return out;
  }

  /**
   * active → notified for these subscriptions; the others stay as they are. Runs inside the
   * caller's transaction, so dispatch records an alert as sent and its subscription as notified
   * in one commit: a crash between the two would leave a sent alert's subscriber waiting.
   */
  async markNotified(trx: Trx, ids: string[], now: string): Promise<void> {
    for (const chunk of chunks(ids)) {
      await trx.updateTable('subscriptions').set({ status: 'notified', updated_at: now }).where('id', 'in', chunk).where('status', '=', 'active').execute();
    }
  }

  /**
   * active → notified for every waiting subscription of these addresses that their alert
   * fulfils (the same product, and the restock's variant or the whole product), whoever made
   * it: one alert per address per restock, so the storefront's row and each agent's row of one
   * shopper end together. Inside the caller's transaction, like `markNotified`.
   */
  async markAddressesNotified(trx: Trx, addresses: FulfilledAddress[], now: string): Promise<void> {
    const groups = new Map<string, { first: FulfilledAddress; keys: string[] }>();
    for (const address of addresses) {
      const group = `${address.storeDomain}\n${address.productId}\n${address.variantId ?? ''}`;
      const known = groups.get(group);
      if (known) known.keys.push(address.emailKey);
      else groups.set(group, { first: address, keys: [address.emailKey] });
    }
    for (const { first, keys } of groups.values()) {
      for (const chunk of chunks([...new Set(keys)])) {
        let update = trx
          .updateTable('subscriptions')
          .set({ status: 'notified', updated_at: now })
          .where('store_domain', '=', first.storeDomain)
          .where('email_key', 'in', chunk)
          .where('product_id', '=', first.productId)
          .where('status', '=', 'active');
        const variantId = first.variantId;
        if (variantId !== null) update = update.where((eb) => eb.or([eb('variant_id', '=', variantId), eb('variant_id', 'is', null)]));
        await update.execute();
      }
    }
  }

  /**
   * Waiting subscribers per product and variant of a store, from `waitlists` (kept by triggers on
   * every change of a subscription), so the queue and the demand cost the same at any size of the
   * store. Ordered as the count over subscriptions was: `variant_id`, null for the whole product,
   * sorts as each database sorts nulls.
   */
  waitingCounts(storeDomain: string, limit: number, order: WaitingOrder): Promise<Array<{ product_id: string; variant_id: string | null; waiting: number }>> {
    const variantId = sql<string | null>`nullif(variant_key, '')`;
    const query = this.database.db.selectFrom('waitlists').select(['product_id', variantId.as('variant_id'), 'waiting']).where('store_domain', '=', storeDomain);
    // Most wanted: in waitlists_most_wanted's order (migration 0018), the whole product before its
    // variants on both databases, so the first rows are read and nothing is sorted.
    if (order === 'most-wanted') return query.orderBy('waiting', 'desc').orderBy('product_id').orderBy('variant_key').limit(limit).execute();
    return query.orderBy('product_id').orderBy(variantId).limit(limit).execute();
  }

  /**
   * One page of a store's waitlists in the purchasing view's rank: most waiting, then longest
   * waited (for equal `waiting`, the smallest sum of sign-up times), then product and variant;
   * after `after`, the last row of the page before. Read in waitlists_purchasing's order (0026) as
   * two seeks, the rest of `after`'s `waiting` and then the smaller ones, so a deep page costs what
   * the first does: one comparison of mixed directions would be a filter, not a seek.
   */
  async rankedWaitlists(storeDomain: string, after: RankedWaitlistKey | null, limit: number): Promise<RankedWaitlistRow[]> {
    const ranked = () =>
      this.database.db
        .selectFrom('waitlists')
        .select(['product_id', 'variant_key', 'waiting', 'waiting_since_sum'])
        .where('store_domain', '=', storeDomain)
        .orderBy('waiting', 'desc')
        .orderBy('waiting_since_sum')
        .orderBy('product_id')
        .orderBy('variant_key');
    const rows: RankedWaitlistRow[] = [];
    if (after) {
      rows.push(
        ...(await ranked()
          .where('waiting', '=', after.waiting)
          .where((eb) => eb(eb.refTuple('waiting_since_sum', 'product_id', 'variant_key'), '>', eb.tuple(after.waitingSinceSum, after.productId, after.variantKey)))
          .limit(limit)
          .execute()),
      );
      if (rows.length === limit) return rows.map(numbers);
    }
    let rest = ranked();
    if (after) rest = rest.where('waiting', '<', after.waiting);
    rows.push(...(await rest.limit(limit - rows.length).execute()));
    return rows.map(numbers);
  }

  /** Waiting subscribers of these products, per product and variant, from `waitlists`. */
  async waitingForProducts(storeDomain: string, productIds: string[]): Promise<Array<{ product_id: string; variant_id: string | null; waiting: number }>> {
    const out: Array<{ product_id: string; variant_id: string | null; waiting: number }> = [];
    for (const chunk of chunks([...new Set(productIds)])) {
      out.push(
        ...(await this.database.db
          .selectFrom('waitlists')
          .select(['product_id', sql<string | null>`nullif(variant_key, '')`.as('variant_id'), 'waiting'])
          .where('store_domain', '=', storeDomain)
          .where('product_id', 'in', chunk)
          .execute()),
      );
    }
    return out;
  }

  /** Waitlists of a store with at least `threshold` waiting, in (product, variant) order after `after`; the whole product ('') first. */
  waitingAtLeast(storeDomain: string, threshold: number, after: { productId: string; variantKey: string } | null, limit: number): Promise<Array<{ product_id: string; variant_id: string | null; waiting: number }>> {
    let query = this.database.db
      .selectFrom('waitlists')
      .select(['product_id', sql<string | null>`nullif(variant_key, '')`.as('variant_id'), 'waiting'])
      .where('store_domain', '=', storeDomain)
      .where('waiting', '>=', threshold);
    if (after) query = query.where((eb) => eb.or([eb('product_id', '>', after.productId), eb.and([eb('product_id', '=', after.productId), eb('variant_key', '>', after.variantKey)])]));
    return query.orderBy('product_id').orderBy('variant_key').limit(limit).execute();
  }

  /** Subscriptions made for the store in [from, to): the sign-ups of a digest. */
  async countCreated(storeDomain: string, from: string, to: string): Promise<number> {
    const row = await this.database.db
      .selectFrom('subscriptions')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('store_domain', '=', storeDomain)
      .where('created_at', '>=', from)
      .where('created_at', '<', to)
      .executeTakeFirstOrThrow();
    return Number(row.n);
  }

  /** One page of a store's subscriptions in id order (creation order: ids begin with the time), after the cursor: exports read it page by page. */
  subscriptionPage(storeDomain: string, after: string | undefined, limit: number): Promise<SubscriptionRow[]> {
    let query = this.database.db.selectFrom('subscriptions').selectAll().where('store_domain', '=', storeDomain);
    if (after !== undefined) query = query.where('id', '>', after);
    return query.orderBy('id').limit(limit).execute();
  }

  /**
   * One page, in id order after the cursor, of the subscriptions a viewer may read: a store's
   * agent, its store's and its own of no store; any other agent, its own (tenancy's one rule,
   * written as the query; the service applies the rule itself too). For MCP's resource list.
   */
  visiblePage(viewer: { agentId: string; storeDomain: string | null }, after: string | undefined, limit: number): Promise<SubscriptionRow[]> {
    const { agentId, storeDomain } = viewer;
    let query = this.database.db
      .selectFrom('subscriptions')
      .selectAll()
      .where((eb) => (storeDomain === null ? eb('agent_id', '=', agentId) : eb.or([eb('store_domain', '=', storeDomain), eb.and([eb('agent_id', '=', agentId), eb('store_domain', 'is', null)])])));
    if (after !== undefined) query = query.where('id', '>', after);
    return query.orderBy('id').limit(limit).execute();
  }

  /**
   * A store's subscriptions in one status, most recently changed first. The status is spelt out
   * so that the partial index of unsubscribes (subscriptions_unsubscribed) can serve it.
   */
  inStatus(storeDomain: string, status: SubscriptionStatus, limit: number): Promise<SubscriptionRow[]> {
    return this.database.db
      .selectFrom('subscriptions')
      .selectAll()
      .where('store_domain', '=', storeDomain)
      .where('status', '=', sql.lit(status))
      .orderBy('updated_at', 'desc')
      .limit(limit)
      .execute();
  }

  /** A store's subscriptions per status, from `subscription_counts` (kept by triggers); statuses with none are absent. */
  async countsByStatus(storeDomain: string): Promise<Record<string, number>> {
    const rows = await this.database.db.selectFrom('subscription_counts').select(['status', 'n']).where('store_domain', '=', storeDomain).where('n', '>', 0).execute();
    return Object.fromEntries(rows.map((row) => [row.status, Number(row.n)]));
  }

  /** Products of a store with someone waiting (what reconciliation checks). */
  async waitingProducts(storeDomain: string, limit: number): Promise<string[]> {
    const rows = await this.database.db
      .selectFrom('subscriptions')
      .select('product_id')
      .distinct()
      .where('store_domain', '=', storeDomain)
      .where('status', '=', 'active')
      .orderBy('product_id')
      .limit(limit)
      .execute();
    return rows.map((row) => row.product_id);
  }

  /** The countries the store's shoppers waiting for these products gave, at most `limit`. */
  async waitingCountries(storeDomain: string, productIds: string[], limit: number): Promise<string[]> {
    if (productIds.length === 0) return [];
    const rows = await this.database.db
      .selectFrom('subscriptions')
      .select('country')
      .distinct()
      .where('store_domain', '=', storeDomain)
      .where('product_id', 'in', productIds)
      .where('status', '=', 'active')
      .where('country', 'is not', null)
      .orderBy('country')
      .limit(limit)
      .execute();
    return rows.map((row) => row.country!);
  }

  /** A store's subscriptions of one address (GDPR data request), by its key: every case of it. */
  ofCustomer(storeDomain: string, emailKey: string): Promise<SubscriptionRow[]> {
    return this.database.db.selectFrom('subscriptions').selectAll().where('store_domain', '=', storeDomain).where('email_key', '=', emailKey).execute();
  }

  /** The address's subscriptions at the store and their contact points, in one transaction. */
  eraseCustomer(storeDomain: string, emailKey: string): Promise<number> {
    return this.database.write(async (trx) => {
      const ids = (await trx.selectFrom('subscriptions').select('id').where('store_domain', '=', storeDomain).where('email_key', '=', emailKey).execute()).map((row) => row.id);
      for (const chunk of chunks(ids)) await trx.deleteFrom('contact_points').where('subscription_id', 'in', chunk).execute();
      const result = await trx.deleteFrom('subscriptions').where('store_domain', '=', storeDomain).where('email_key', '=', emailKey).executeTakeFirst();
      return Number(result.numDeletedRows);
    });
  }

  async eraseStore(storeDomain: string): Promise<number> {
    return this.database.write(async (trx) => {
      await trx.deleteFrom('contact_points').where('store_domain', '=', storeDomain).execute();
      const result = await trx.deleteFrom('subscriptions').where('store_domain', '=', storeDomain).executeTakeFirst();
      return Number(result.numDeletedRows);
    });
  }
}


/**
 * The live subscription of this owner. Spelled exactly like the index `subscriptions_one_live`
 * (the coalesces, and `active` as a literal so PostgreSQL can match the partial index's
 * predicate even in a generic plan), so the lookup is one index probe however many shoppers
 * wait for the product.
 */
/** The owner's pending subscription for this target (double opt-in), found through subscriptions_by_address. */
function findPending(db: Db, target: WatchTarget, owner: SubscriptionOwner): Promise<SubscriptionRow | undefined> {
  return db
    .selectFrom('subscriptions')
    .selectAll()
    .where(sql<string>`coalesce(store_domain, '')`, '=', owner.storeDomain ?? '')
    .where('email_key', '=', addressKey(target.email))
    .where('product_id', '=', target.productId)
    .where(sql<string>`coalesce(variant_id, '')`, '=', target.variantId ?? '')
    .where(sql<string>`coalesce(agent_id, '')`, '=', owner.agentId ?? '')
    .where('status', '=', sql.lit('pending'))
    .executeTakeFirst();
}

function findLive(db: Db, target: WatchTarget, owner: SubscriptionOwner): Promise<SubscriptionRow | undefined> {
  return db
    .selectFrom('subscriptions')
    .selectAll()
    .where('product_id', '=', target.productId)
    .where(sql<string>`coalesce(variant_id, '')`, '=', target.variantId ?? '')
    .where('email_key', '=', addressKey(target.email))
    .where(sql<string>`coalesce(store_domain, '')`, '=', owner.storeDomain ?? '')
    .where(sql<string>`coalesce(agent_id, '')`, '=', owner.agentId ?? '')
    .where('status', '=', sql.lit('active'))
    .executeTakeFirst();
}

/** Ids carry no time (`newOpaqueId`): whoever holds one must not learn when the shopper signed up. */
/** The columns `newRow` fills, in the order the prepared insert binds them. */
const SUBSCRIPTION_COLUMNS = [
  'id',
  'product_id',
  'variant_id',
  'email',
  'email_key',
  'status',
  'store_domain',
  'agent_id',
  'third_party',
  'created_at',
  'updated_at',
  'locale',
  'country',
  'consent_method',
  'consent_text',
  'consent_page',
  'confirmed_at',
  'email_muted',
  'confirmation_sent_at',
] as const satisfies ReadonlyArray<keyof SubscriptionRow>;
// A column the table gains must be bound too: this stops compiling until it is listed above.
({}) satisfies Record<Exclude<keyof SubscriptionRow, (typeof SUBSCRIPTION_COLUMNS)[number]>, never>;

function newRow(target: WatchTarget, owner: SubscriptionOwner, now: string): SubscriptionRow {
  return {
    id: newOpaqueId('sub'),
    product_id: target.productId,
    variant_id: target.variantId,
    email: target.email,
    email_key: addressKey(target.email),
    status: 'active',
    store_domain: owner.storeDomain,
    agent_id: owner.agentId,
    third_party: owner.thirdParty ? 1 : 0,
    created_at: now,
    updated_at: now,
    locale: target.locale ?? null,
    country: target.country ?? null,
    consent_method: target.consent?.method ?? null,
    consent_text: target.consent?.text ?? null,
    consent_page: target.consent?.page ?? null,
    confirmed_at: null,
    email_muted: 0,
    confirmation_sent_at: null,
  };
}
