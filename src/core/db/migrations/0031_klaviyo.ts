import type { Kysely } from 'kysely';
import { timestampType, type Dialect } from '../dialect.ts';
import type { DialectMigration } from './index.ts';

/**
 * A store's Klaviyo account (docs/klaviyo.md): `klaviyo_connections` keeps its private API key,
 * sealed, one per store (a table of its own: `store_connections` holds one row per store, its
 * platform's). `klaviyo_events` is the queue of events for Klaviyo's Events API, each with the
 * body as sent, retried until Klaviyo takes it or refuses it for good:
 *
 * - unique per store and event id: an event announced twice is queued once (and its id is the
 *   Klaviyo `unique_id`, so Klaviyo too keeps it once);
 * - `alert_id` and `email` of each queued `alert.sent`: a click or an attributed order names
 *   only the alert, and is put on the profile that alert went to;
 * - `klaviyo_events_due`: the pending rows by when they are due, for the delivery job.
 *
 * In the same migration, the other integration of the store's events: `flow_triggers`, the
 * queue of Shopify Flow triggers (docs/shopify.md, "Shopify Flow"), one per store and event id,
 * each with the trigger's handle and payload as sent to `flowTriggerReceive`.
 */
export const klaviyo: DialectMigration = {
  async up(db: Kysely<any>, dialect: Dialect) {
    const ts = timestampType(dialect);
    await db.schema
      .createTable('klaviyo_connections')
      .addColumn('store_domain', 'text', (c) => c.primaryKey())
      .addColumn('status', 'text', (c) => c.notNull())
      .addColumn('key_sealed', 'text')
      .addColumn('key_hint', 'text')
      .addColumn('account_id', 'text')
      .addColumn('connected_at', ts, (c) => c.notNull())
      .addColumn('disconnected_at', ts)
      .addColumn('disconnect_reason', 'text')
      .addColumn('updated_at', ts, (c) => c.notNull())
      .execute();

    await db.schema
      .createTable('klaviyo_events')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('store_domain', 'text', (c) => c.notNull())
      .addColumn('event_id', 'text', (c) => c.notNull())
      .addColumn('event_type', 'text', (c) => c.notNull())
      .addColumn('alert_id', 'text')
      .addColumn('email', 'text')
      .addColumn('body', 'text', (c) => c.notNull())
      .addColumn('status', 'text', (c) => c.notNull())
      .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
      .addColumn('next_attempt_at', ts)
      .addColumn('last_status_code', 'integer')
      .addColumn('last_error', 'text')
      .addColumn('created_at', ts, (c) => c.notNull())
      .addColumn('finished_at', ts)
      .execute();
    await db.schema.createIndex('klaviyo_events_once').on('klaviyo_events').columns(['store_domain', 'event_id']).unique().execute();
    await db.schema.createIndex('klaviyo_events_by_alert').on('klaviyo_events').columns(['store_domain', 'alert_id']).execute();
    await db.schema.createIndex('klaviyo_events_due').on('klaviyo_events').columns(['status', 'next_attempt_at']).execute();

    await db.schema
      .createTable('flow_triggers')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('store_domain', 'text', (c) => c.notNull())
      .addColumn('event_id', 'text', (c) => c.notNull())
      .addColumn('handle', 'text', (c) => c.notNull())
      .addColumn('payload', 'text', (c) => c.notNull())
      .addColumn('status', 'text', (c) => c.notNull())
      .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
      .addColumn('next_attempt_at', ts)
      .addColumn('last_error', 'text')
      .addColumn('created_at', ts, (c) => c.notNull())
      .addColumn('finished_at', ts)
      .execute();
    await db.schema.createIndex('flow_triggers_once').on('flow_triggers').columns(['store_domain', 'event_id']).unique().execute();
    await db.schema.createIndex('flow_triggers_due').on('flow_triggers').columns(['status', 'next_attempt_at']).execute();
  },
};
