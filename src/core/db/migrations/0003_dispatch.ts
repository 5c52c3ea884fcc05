import { sql, type Kysely } from 'kysely';
import { timestampType, type Dialect } from '../dialect.ts';
import type { DialectMigration } from './index.ts';

/**
 * Restock detection and alert dispatch: store installations and settings, the stock the service
 * knows of, the Shopify webhook queue, restocks, the notification ledger (which is the dispatch
 * queue) and per-store suppressions.
 */
export const dispatch: DialectMigration = {
  async up(db: Kysely<any>, dialect: Dialect) {
    const ts = timestampType(dialect);

    // stores: how the store is connected, its (sealed) credentials and its sending settings.
    await db.schema.alterTable('stores').addColumn('status', 'text', (c) => c.notNull().defaultTo('active')).execute();
    await db.schema.alterTable('stores').addColumn('platform', 'text').execute();
    await db.schema.alterTable('stores').addColumn('admin_token_sealed', 'text').execute();
    await db.schema.alterTable('stores').addColumn('admin_scopes', 'text').execute();
    await db.schema.alterTable('stores').addColumn('installed_at', ts).execute();
    await db.schema.alterTable('stores').addColumn('uninstalled_at', ts).execute();
    await db.schema.alterTable('stores').addColumn('reconciled_at', ts).execute();
    await db.schema.alterTable('stores').addColumn('settings', 'text', (c) => c.notNull().defaultTo('{}')).execute();
    await db.schema.alterTable('stores').addColumn('smtp_url_sealed', 'text').execute();

    // inventory: the last known stock of each variant ('' = the product as a whole).
    await db.schema
      .createTable('inventory_variants')
      .addColumn('store_domain', 'text', (c) => c.notNull())
      .addColumn('product_id', 'text', (c) => c.notNull())
      .addColumn('variant_id', 'text', (c) => c.notNull())
      .addColumn('inventory_item_id', 'text')
      .addColumn('available', 'integer')
      .addColumn('published', 'integer', (c) => c.notNull().defaultTo(1))
      .addColumn('product_title', 'text')
      .addColumn('variant_title', 'text')
      .addColumn('image_url', 'text')
      .addColumn('product_url', 'text')
      .addColumn('source_updated_at', ts)
      .addColumn('updated_at', ts, (c) => c.notNull())
      .addPrimaryKeyConstraint('inventory_variants_pk', ['store_domain', 'product_id', 'variant_id'])
      .execute();
    await db.schema
      .createIndex('inventory_variants_by_item')
      .on('inventory_variants')
      .columns(['store_domain', 'inventory_item_id'])
      .execute();
    // Per-location levels from inventory_levels/update; a variant's stock is their sum.
    await db.schema
      .createTable('inventory_levels')
      .addColumn('store_domain', 'text', (c) => c.notNull())
      .addColumn('inventory_item_id', 'text', (c) => c.notNull())
      .addColumn('location_id', 'text', (c) => c.notNull())
      .addColumn('available', 'integer')
      .addColumn('source_updated_at', ts)
      .addColumn('updated_at', ts, (c) => c.notNull())
      .addPrimaryKeyConstraint('inventory_levels_pk', ['store_domain', 'inventory_item_id', 'location_id'])
      .execute();

    // shopify: webhook deliveries, deduplicated by event id and worked off by the worker.
    await db.schema
      .createTable('shopify_webhook_events')
      .addColumn('event_id', 'text', (c) => c.primaryKey())
      .addColumn('store_domain', 'text', (c) => c.notNull())
      .addColumn('topic', 'text', (c) => c.notNull())
      .addColumn('webhook_id', 'text')
      .addColumn('payload', 'text', (c) => c.notNull())
      .addColumn('triggered_at', ts)
      .addColumn('status', 'text', (c) => c.notNull())
      .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
      .addColumn('lease_until', ts)
      .addColumn('error', 'text')
      .addColumn('received_at', ts, (c) => c.notNull())
      .addColumn('processed_at', ts)
      .execute();
    await db.schema
      .createIndex('shopify_webhook_events_queue')
      .on('shopify_webhook_events')
      .columns(['status', 'received_at'])
      .execute();

    // dispatch: one row per detected restock, planned batch by batch.
    await db.schema
      .createTable('restocks')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('store_domain', 'text', (c) => c.notNull())
      .addColumn('product_id', 'text', (c) => c.notNull())
      .addColumn('variant_id', 'text')
      .addColumn('available', 'integer', (c) => c.notNull())
      .addColumn('source', 'text', (c) => c.notNull())
      .addColumn('source_ref', 'text')
      .addColumn('include_unowned', 'integer', (c) => c.notNull().defaultTo(0))
      .addColumn('status', 'text', (c) => c.notNull())
      .addColumn('batches', 'integer', (c) => c.notNull().defaultTo(0))
      .addColumn('planned', 'integer', (c) => c.notNull().defaultTo(0))
      // Signup-order cursor: the last subscription planned (created_at, id).
      .addColumn('cursor_created_at', 'text')
      .addColumn('cursor_id', 'text')
      .addColumn('next_batch_at', ts, (c) => c.notNull())
      .addColumn('lease_owner', 'text')
      .addColumn('lease_until', ts)
      .addColumn('stop_reason', 'text')
      .addColumn('detected_at', ts, (c) => c.notNull())
      .addColumn('updated_at', ts, (c) => c.notNull())
      .execute();
    // One restock in dispatch per variant: reports while it runs only update the stock it re-reads.
    await sql`create unique index restocks_one_live
      on restocks (store_domain, product_id, coalesce(variant_id, ''))
      where status = 'dispatching'`.execute(db);
    await db.schema.createIndex('restocks_due').on('restocks').columns(['status', 'next_batch_at']).execute();
    await db.schema.createIndex('restocks_by_store').on('restocks').columns(['store_domain', 'detected_at']).execute();

    // The notification ledger, which is also the send queue: one row per subscription per restock.
    await db.schema
      .createTable('notifications')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('restock_id', 'text', (c) => c.notNull())
      .addColumn('subscription_id', 'text', (c) => c.notNull())
      .addColumn('store_domain', 'text', (c) => c.notNull())
      .addColumn('email', 'text', (c) => c.notNull())
      .addColumn('product_id', 'text', (c) => c.notNull())
      .addColumn('variant_id', 'text')
      .addColumn('batch', 'integer', (c) => c.notNull())
      // Place in signup order across the restock: the queue is worked in this order.
      .addColumn('position', 'integer', (c) => c.notNull())
      .addColumn('status', 'text', (c) => c.notNull())
      .addColumn('reason', 'text', (c) => c.notNull())
      .addColumn('outcome', 'text')
      .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
      .addColumn('next_attempt_at', ts, (c) => c.notNull())
      .addColumn('lease_owner', 'text')
      .addColumn('lease_until', ts)
      .addColumn('created_at', ts, (c) => c.notNull())
      .addColumn('sent_at', ts)
      .execute();
    await sql`create unique index notifications_once_per_restock on notifications (restock_id, subscription_id)`.execute(db);
    await db.schema
      .createIndex('notifications_queue')
      .on('notifications')
      .columns(['status', 'next_attempt_at', 'restock_id', 'position'])
      .execute();
    await db.schema.createIndex('notifications_by_subscription').on('notifications').columns(['subscription_id', 'status']).execute();
    await db.schema
      .createIndex('notifications_by_address')
      .on('notifications')
      .columns(['store_domain', 'email', 'sent_at'])
      .execute();

    // Addresses a store must not mail again (hard bounces, complaints, manual).
    await db.schema
      .createTable('suppressions')
      .addColumn('store_domain', 'text', (c) => c.notNull())
      .addColumn('email', 'text', (c) => c.notNull())
      .addColumn('reason', 'text', (c) => c.notNull())
      .addColumn('detail', 'text')
      .addColumn('created_at', ts, (c) => c.notNull())
      .addPrimaryKeyConstraint('suppressions_pk', ['store_domain', 'email'])
      .execute();

    // The outbox lists a store's mail for that store's agents.
    await db.schema.alterTable('mail_outbox').addColumn('store_domain', 'text').execute();
    await db.schema.createIndex('mail_outbox_by_store').on('mail_outbox').columns(['store_domain', 'created_at']).execute();
  },
};
