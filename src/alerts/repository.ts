import { sql } from 'kysely';
import type { Database, Db, Trx } from '../core/db/database.ts';
import type { SubscriptionsTable } from '../core/db/schema.ts';
import { chunks } from '../core/chunks.ts';
import { newId } from '../core/ids.ts';
import type { SubscriptionStatus } from './schemas.ts';

export type SubscriptionRow = SubscriptionsTable;

export interface WatchTarget {
  productId: string;
  variantId: string | null;
  email: string;
  /** The shopper's language, when the storefront widget knew it. */
  locale?: string | null;
}

/** Storage of alert subscriptions; the only code that touches the `subscriptions` table. */
export class SubscriptionRepository {
  constructor(private readonly database: Database) {}

  /**
   * The live subscription for this (product, variant, e-mail) of this owner (the store, else the
   * agent), created if there is none. The
   * insert comes first because a new watch is the common case, and it is one statement, so on
   * PostgreSQL it needs no explicit transaction. When the partial unique index refuses it (a
   * duplicate, or a race another process won), the live row is read instead; should that row end
   * in between, the insert is tried again.
   */
  async subscribe(target: WatchTarget, owner: { storeDomain: string | null; agentId: string | null }, now: string): Promise<SubscriptionRow> {
    for (let attempt = 0; ; attempt++) {
      const row: SubscriptionRow = {
        id: newId('sub'),
        product_id: target.productId,
        variant_id: target.variantId,
        email: target.email,
        status: 'active',
        store_domain: owner.storeDomain,
        agent_id: owner.agentId,
        created_at: now,
        updated_at: now,
        locale: target.locale ?? null,
      };
      const inserted = await this.database.writeStatement((db) =>
        db.insertInto('subscriptions').values(row).onConflict((oc) => oc.doNothing()).executeTakeFirst(),
      );
      if (Number(inserted.numInsertedOrUpdatedRows ?? 0n) === 1) return row;
      const live = await findLive(this.database.db, target, owner.storeDomain ?? owner.agentId ?? '');
      if (live) return live;
      if (attempt >= 2) throw new Error('subscription kept conflicting with a row that then ended');
    }
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
  /** Signup-order cursor: only subscriptions after this one. */
  after: { createdAt: string; id: string } | null;
  limit: number;
}

export type WaitingSubscriber = Pick<SubscriptionRow, 'id' | 'email' | 'product_id' | 'variant_id' | 'created_at' | 'store_domain' | 'locale'>;

/** `product`: stable for readers paging through; `most-wanted`: the largest groups first (the dashboard). */
export type WaitingOrder = 'product' | 'most-wanted';

/** Queries the dispatch feature needs, still confined to the `subscriptions` table. */
export class WaitingRepository {
  constructor(private readonly database: Database) {}

  /** Active subscriptions matching a restock, in signup order. */
  waiting(query: WaitingQuery): Promise<WaitingSubscriber[]> {
    let select = this.database.db
      .selectFrom('subscriptions')
      .select(['id', 'email', 'product_id', 'variant_id', 'created_at', 'store_domain', 'locale'])
      .where('product_id', '=', query.productId)
      .where('status', '=', sql.lit('active'));
    if (query.variantId !== null) {
      const variantId = query.variantId;
      select = select.where((eb) => eb.or([eb('variant_id', '=', variantId), eb('variant_id', 'is', null)]));
    }
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
  async stillActive(ids: string[]): Promise<Set<string>> {
    const out = new Set<string>();
    for (const chunk of chunks(ids)) {
      const rows = await this.database.db.selectFrom('subscriptions').select('id').where('id', 'in', chunk).where('status', '=', 'active').execute();
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

  /** Waiting subscribers per product and variant of a store. */
  waitingCounts(storeDomain: string, limit: number, order: WaitingOrder): Promise<Array<{ product_id: string; variant_id: string | null; waiting: number }>> {
    let query = this.database.db
      .selectFrom('subscriptions')
      .select(['product_id', 'variant_id', (eb) => eb.fn.countAll<number>().as('waiting')])
      .where('store_domain', '=', storeDomain)
      .where('status', '=', 'active')
      .groupBy(['product_id', 'variant_id']);
    if (order === 'most-wanted') query = query.orderBy('waiting', 'desc');
    return query.orderBy('product_id').orderBy('variant_id').limit(limit).execute();
  }

  /** A store's subscriptions in one status, most recently changed first. */
  inStatus(storeDomain: string, status: SubscriptionStatus, limit: number): Promise<SubscriptionRow[]> {
    return this.database.db
      .selectFrom('subscriptions')
      .selectAll()
      .where('store_domain', '=', storeDomain)
      .where('status', '=', status)
      .orderBy('updated_at', 'desc')
      .limit(limit)
      .execute();
  }

  async countsByStatus(storeDomain: string): Promise<Record<string, number>> {
    const rows = await this.database.db
      .selectFrom('subscriptions')
      .select(['status', (eb) => eb.fn.countAll<number>().as('n')])
      .where('store_domain', '=', storeDomain)
      .groupBy('status')
      .execute();
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

  /** A store's subscriptions of one address (GDPR data request); emails compared as stored. */
  ofCustomer(storeDomain: string, email: string): Promise<SubscriptionRow[]> {
    return this.database.db.selectFrom('subscriptions').selectAll().where('store_domain', '=', storeDomain).where('email', '=', email).execute();
  }

  async eraseCustomer(storeDomain: string, email: string): Promise<number> {
    const result = await this.database.writeStatement((db) =>
      db.deleteFrom('subscriptions').where('store_domain', '=', storeDomain).where('email', '=', email).executeTakeFirst(),
    );
    return Number(result.numDeletedRows);
  }

  async eraseStore(storeDomain: string): Promise<number> {
    const result = await this.database.writeStatement((db) => db.deleteFrom('subscriptions').where('store_domain', '=', storeDomain).executeTakeFirst());
    return Number(result.numDeletedRows);
  }
}


/**
 * Spelled exactly like the index `subscriptions_one_live` (the coalesce, and `active` as a
 * literal so PostgreSQL can match the partial index's predicate even in a generic plan), so the
 * lookup is one index probe however many shoppers wait for the product.
 */
function findLive(db: Db, target: WatchTarget, owner: string): Promise<SubscriptionRow | undefined> {
  return db
    .selectFrom('subscriptions')
    .selectAll()
    .where('product_id', '=', target.productId)
    .where(sql<string>`coalesce(variant_id, '')`, '=', target.variantId ?? '')
    .where('email', '=', target.email)
    .where(sql<string>`coalesce(store_domain, agent_id, '')`, '=', owner)
    .where('status', '=', sql.lit('active'))
    .executeTakeFirst();
}
