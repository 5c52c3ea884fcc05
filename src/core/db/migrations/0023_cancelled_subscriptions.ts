import { sql, type Kysely } from 'kysely';
import { timestampType, type Dialect } from '../dialect.ts';
import type { DialectMigration } from './index.ts';

/**
 * A cancellation is final per subscription, however many a store has had: `store_plans` holds
 * one subscription per store, so a second cancellation there replaced the record of the first,
 * and the first one's late news could revive it. Each cancelled subscription is now kept here;
 * those a store's row shows cancelled are the ones known from before.
 */
export const cancelledSubscriptions: DialectMigration = {
  async up(db: Kysely<any>, dialect: Dialect) {
    const ts = timestampType(dialect);
    await db.schema
      .createTable('cancelled_subscriptions')
      .addColumn('provider', 'text', (c) => c.notNull())
      .addColumn('external_id', 'text', (c) => c.notNull())
      .addColumn('shop', 'text', (c) => c.notNull())
      .addColumn('cancelled_at', ts, (c) => c.notNull())
      .addPrimaryKeyConstraint('cancelled_subscriptions_pk', ['provider', 'external_id'])
      .execute();
    await sql`
      insert into cancelled_subscriptions (provider, external_id, shop, cancelled_at)
      select provider, external_id, shop, coalesce(event_at, updated_at)
      from store_plans
      where status = 'cancelled' and external_id is not null`.execute(db);
  },
};
