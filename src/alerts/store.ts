import { sql } from 'kysely';
import type { Database, Trx } from '../core/db/database.ts';
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
   * The live subscription for this (product, variant, e-mail), created if there is none. The
   * insert comes first because a new watch is the common case; when the partial unique index
   * refuses it (a duplicate, or a race another process won), the live row is read instead.
   */
  async subscribe(target: WatchTarget, now: string): Promise<{ row: SubscriptionRow; created: boolean }> {
    return this.database.write(async (trx) => {
      const row: SubscriptionRow = {
        id: newId('sub'),
        product_id: target.productId,
        variant_id: target.variantId,
        email: target.email,
        status: 'active',
        created_at: now,
        updated_at: now,
      };
      const inserted = await trx.insertInto('subscriptions').values(row).onConflict((oc) => oc.doNothing()).executeTakeFirst();
      if (Number(inserted.numInsertedOrUpdatedRows ?? 0n) === 1) return { row, created: true };
      const live = await findLive(trx, target);
      if (!live) throw new Error('subscription insert conflicted but no live row was found');
      return { row: live, created: false };
    });
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
function findLive(trx: Trx, target: WatchTarget): Promise<SubscriptionRow | undefined> {
  return trx
    .selectFrom('subscriptions')
    .selectAll()
    .where('product_id', '=', target.productId)
    .where(sql<string>`coalesce(variant_id, '')`, '=', target.variantId ?? '')
    .where('email', '=', target.email)
    .where('status', '=', sql.lit('active'))
    .executeTakeFirst();
}
