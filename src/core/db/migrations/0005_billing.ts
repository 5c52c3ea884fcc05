import type { Kysely } from 'kysely';
import { timestampType, type Dialect } from '../dialect.ts';
import type { DialectMigration } from './index.ts';

/**
 * Plans bought for real: where a plan came from (local page, Stripe, Shopify Billing) and the
 * subscription there, its billing period, and the time of the last provider event applied (so
 * events arriving out of order cannot undo newer ones); provider events seen, so each is
 * applied once; and the alerts counted against each store's quota per billing period.
 */
export const billing: DialectMigration = {
  async up(db: Kysely<any>, dialect: Dialect) {
    const ts = timestampType(dialect);
    await db.schema.alterTable('store_plans').addColumn('provider', 'text', (c) => c.notNull().defaultTo('local')).execute();
    await db.schema.alterTable('store_plans').addColumn('external_id', 'text').execute();
    await db.schema.alterTable('store_plans').addColumn('period_start', ts).execute();
    await db.schema.alterTable('store_plans').addColumn('period_end', ts).execute();
    await db.schema.alterTable('store_plans').addColumn('event_at', ts).execute();

    await db.schema.alterTable('checkout_sessions').addColumn('external_id', 'text').execute();
    await db.schema.alterTable('checkout_sessions').addColumn('external_url', 'text').execute();
    await db.schema.createIndex('checkout_sessions_external').on('checkout_sessions').column('external_id').execute();

    await db.schema
      .createTable('billing_events')
      .addColumn('provider', 'text', (c) => c.notNull())
      .addColumn('event_id', 'text', (c) => c.notNull())
      .addColumn('type', 'text', (c) => c.notNull())
      .addColumn('shop', 'text')
      .addColumn('outcome', 'text', (c) => c.notNull())
      .addColumn('received_at', ts, (c) => c.notNull())
      .addPrimaryKeyConstraint('billing_events_pk', ['provider', 'event_id'])
      .execute();

    await db.schema
      .createTable('plan_usage')
      .addColumn('shop', 'text', (c) => c.notNull())
      .addColumn('period_start', 'text', (c) => c.notNull())
      .addColumn('used', 'integer', (c) => c.notNull().defaultTo(0))
      .addColumn('notified_at', ts)
      .addPrimaryKeyConstraint('plan_usage_pk', ['shop', 'period_start'])
      .execute();
  },
};
