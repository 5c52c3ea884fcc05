import { sql } from 'kysely';
import type { Database, Db } from '../core/db/database.ts';
import type { SubscriptionsTable } from '../core/db/schema.ts';
import { newId } from '../core/ids.ts';
import type { SubscriptionStatus } from './schemas.ts';

export type SubscriptionRow = SubscriptionsTable;

export interface WatchTarget {
  productId: string;
  variantId: string | null;
  email: string;
}

/** Storage of alert subscriptions; the only code that touches the `subscriptions` table. */
export class AlertStore {
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
