import { sql, type Kysely } from 'kysely';
import { timestampType, type Dialect } from '../dialect.ts';
import type { DialectMigration } from './index.ts';

/**
 * What an alert did after it was sent. `alert_clicks` holds the first shopper's click on each
 * alert; `orders`, `order_lines` and `order_refunds` keep of a store's orders only what
 * attribution needs (variants, quantities, amounts in minor units, the buyer's address key,
 * never names, addresses or payment details), and only orders by an alerted address;
 * `order_attributions` credits each order line to at most one alert, with its revenue net of
 * refunds. The ledger gets a `kind`: a reminder is a second row for the same restock and
 * subscription, so the once-per-restock index now counts per kind.
 */
export const conversions: DialectMigration = {
  async up(db: Kysely<any>, dialect: Dialect) {
    const ts = timestampType(dialect);
    await db.schema.alterTable('notifications').addColumn('kind', 'text', (c) => c.notNull().defaultTo('alert')).execute();
    await db.schema.alterTable('notifications').addColumn('reminder_of', 'text').execute();
    await sql`drop index notifications_once_per_restock`.execute(db);
    await sql`create unique index notifications_once_per_restock on notifications (restock_id, subscription_id, kind)`.execute(db);
    // Exports read a store's subscriptions and ledger page by page in id order (ids begin with their
    // creation time). Not (store_domain, created_at): SQLite would prefer that one for the waiting
    // subscribers' query, which has an index of its own.
    await db.schema.createIndex('subscriptions_by_store_id').on('subscriptions').columns(['store_domain', 'id']).execute();
    await db.schema.createIndex('notifications_by_store_id').on('notifications').columns(['store_domain', 'id']).execute();

    await db.schema
      .createTable('alert_clicks')
      .addColumn('notification_id', 'text', (c) => c.primaryKey())
      .addColumn('store_domain', 'text', (c) => c.notNull())
      .addColumn('product_id', 'text', (c) => c.notNull())
      .addColumn('variant_id', 'text')
      .addColumn('clicked_at', ts, (c) => c.notNull())
      .execute();
    await db.schema.createIndex('alert_clicks_by_store').on('alert_clicks').columns(['store_domain', 'clicked_at']).execute();

    await db.schema
      .createTable('orders')
      .addColumn('store_domain', 'text', (c) => c.notNull())
      .addColumn('order_id', 'text', (c) => c.notNull())
      .addColumn('email_key', 'text', (c) => c.notNull())
      .addColumn('placed_at', ts, (c) => c.notNull())
      .addColumn('source', 'text', (c) => c.notNull())
      .addColumn('cancelled_at', ts)
      .addColumn('recorded_at', ts, (c) => c.notNull())
      .addPrimaryKeyConstraint('orders_pk', ['store_domain', 'order_id'])
      .execute();
    await db.schema.createIndex('orders_by_address').on('orders').columns(['store_domain', 'email_key', 'placed_at']).execute();

    await db.schema
      .createTable('order_lines')
      .addColumn('store_domain', 'text', (c) => c.notNull())
      .addColumn('order_id', 'text', (c) => c.notNull())
      .addColumn('line_id', 'text', (c) => c.notNull())
      .addColumn('product_id', 'text', (c) => c.notNull())
      .addColumn('variant_id', 'text')
      .addColumn('quantity', 'integer', (c) => c.notNull())
      .addColumn('amount_minor', 'bigint', (c) => c.notNull())
      .addColumn('currency', 'text', (c) => c.notNull())
      .addColumn('shop_amount_minor', 'bigint', (c) => c.notNull())
      .addColumn('shop_currency', 'text', (c) => c.notNull())
      .addPrimaryKeyConstraint('order_lines_pk', ['store_domain', 'order_id', 'line_id'])
      .execute();

    await db.schema
      .createTable('order_refunds')
      .addColumn('store_domain', 'text', (c) => c.notNull())
      .addColumn('order_id', 'text', (c) => c.notNull())
      .addColumn('refund_id', 'text', (c) => c.notNull())
      .addColumn('line_id', 'text', (c) => c.notNull())
      .addColumn('amount_minor', 'bigint', (c) => c.notNull())
      .addColumn('currency', 'text', (c) => c.notNull())
      .addColumn('shop_amount_minor', 'bigint', (c) => c.notNull())
      .addColumn('shop_currency', 'text', (c) => c.notNull())
      .addColumn('refunded_at', ts, (c) => c.notNull())
      .addPrimaryKeyConstraint('order_refunds_pk', ['store_domain', 'order_id', 'refund_id', 'line_id'])
      .execute();

    await db.schema
      .createTable('order_attributions')
      .addColumn('store_domain', 'text', (c) => c.notNull())
      .addColumn('order_id', 'text', (c) => c.notNull())
      .addColumn('line_id', 'text', (c) => c.notNull())
      .addColumn('notification_id', 'text', (c) => c.notNull())
      .addColumn('product_id', 'text', (c) => c.notNull())
      .addColumn('variant_id', 'text')
      .addColumn('kind', 'text', (c) => c.notNull())
      .addColumn('placed_at', ts, (c) => c.notNull())
      .addColumn('amount_minor', 'bigint', (c) => c.notNull())
      .addColumn('currency', 'text', (c) => c.notNull())
      .addColumn('shop_amount_minor', 'bigint', (c) => c.notNull())
      .addColumn('shop_currency', 'text', (c) => c.notNull())
      // Net of refunds and cancellation: what the figures sum.
      .addColumn('net_minor', 'bigint', (c) => c.notNull())
      .addColumn('net_shop_minor', 'bigint', (c) => c.notNull())
      .addPrimaryKeyConstraint('order_attributions_pk', ['store_domain', 'order_id', 'line_id'])
      .execute();
    await db.schema.createIndex('order_attributions_by_store').on('order_attributions').columns(['store_domain', 'placed_at']).execute();
    await db.schema.createIndex('order_attributions_by_alert').on('order_attributions').columns(['notification_id']).execute();
  },
};
