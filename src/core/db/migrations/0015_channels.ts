import { sql, type Kysely } from 'kysely';
import { timestampType, type Dialect } from '../dialect.ts';
import type { DialectMigration } from './index.ts';

/**
 * More ways to be told, with consent. A subscription's e-mail stays on its row, which now keeps
 * the consent it was given (how, when, the words shown, the page) and whether it was confirmed
 * (double opt-in: `pending` until the shopper confirms); the shopper may mute the e-mail while
 * keeping other channels. `contact_points` holds the other channels of a subscription, a phone
 * (SMS) or a browser's push subscription, each with its own consent and status. The ledger gets
 * the channel of each message (one row per channel: the once-per-restock index counts per
 * channel), the contact point it went to, and the provider's id and delivery report of an SMS.
 * `sms_opt_outs` is what a phone asked of one sender number (STOP, until START).
 */
export const channels: DialectMigration = {
  async up(db: Kysely<any>, dialect: Dialect) {
    const ts = timestampType(dialect);
    await db.schema.alterTable('subscriptions').addColumn('consent_method', 'text').execute();
    await db.schema.alterTable('subscriptions').addColumn('consent_text', 'text').execute();
    await db.schema.alterTable('subscriptions').addColumn('consent_page', 'text').execute();
    await db.schema.alterTable('subscriptions').addColumn('confirmed_at', ts).execute();
    await db.schema.alterTable('subscriptions').addColumn('email_muted', 'integer', (c) => c.notNull().defaultTo(0)).execute();
    await db.schema.alterTable('subscriptions').addColumn('confirmation_sent_at', ts).execute();
    // The confirmation job and the expiry sweep read pending rows in age order (a second signup finds its pending row through subscriptions_by_address).
    await db.schema.createIndex('subscriptions_pending').on('subscriptions').columns(['status', 'created_at']).where(sql.ref('status'), '=', 'pending').execute();

    await db.schema
      .createTable('contact_points')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('subscription_id', 'text', (c) => c.notNull())
      .addColumn('store_domain', 'text')
      .addColumn('channel', 'text', (c) => c.notNull())
      .addColumn('address', 'text', (c) => c.notNull())
      .addColumn('address_key', 'text', (c) => c.notNull())
      .addColumn('push_p256dh', 'text')
      .addColumn('push_auth', 'text')
      .addColumn('status', 'text', (c) => c.notNull())
      .addColumn('time_zone', 'text')
      .addColumn('consent_method', 'text', (c) => c.notNull())
      .addColumn('consent_text', 'text', (c) => c.notNull())
      .addColumn('consent_page', 'text')
      .addColumn('consent_at', ts, (c) => c.notNull())
      .addColumn('confirmed_at', ts)
      .addColumn('status_reason', 'text')
      .addColumn('confirmation_sent_at', ts)
      .addColumn('created_at', ts, (c) => c.notNull())
      .addColumn('updated_at', ts, (c) => c.notNull())
      .execute();
    await db.schema.createIndex('contact_points_one_per_channel').unique().on('contact_points').columns(['subscription_id', 'channel']).execute();
    await db.schema.createIndex('contact_points_by_address').on('contact_points').columns(['channel', 'address_key', 'status']).execute();
    await db.schema.createIndex('contact_points_pending').on('contact_points').columns(['status', 'created_at']).where(sql.ref('status'), '=', 'pending').execute();

    await db.schema
      .createTable('sms_opt_outs')
      .addColumn('sender', 'text', (c) => c.notNull())
      .addColumn('phone', 'text', (c) => c.notNull())
      .addColumn('created_at', ts, (c) => c.notNull())
      .addPrimaryKeyConstraint('sms_opt_outs_pk', ['sender', 'phone'])
      .execute();

    await db.schema.alterTable('notifications').addColumn('channel', 'text', (c) => c.notNull().defaultTo('email')).execute();
    await db.schema.alterTable('notifications').addColumn('contact_point_id', 'text').execute();
    await db.schema.alterTable('notifications').addColumn('provider_ref', 'text').execute();
    await db.schema.alterTable('notifications').addColumn('delivery_status', 'text').execute();
    await sql`drop index notifications_once_per_restock`.execute(db);
    await sql`create unique index notifications_once_per_restock on notifications (restock_id, subscription_id, kind, channel)`.execute(db);
    await db.schema.createIndex('notifications_by_provider_ref').on('notifications').column('provider_ref').where(sql.ref('provider_ref'), 'is not', null).execute();

    await db.schema.alterTable('stores').addColumn('sms_sender_sealed', 'text').execute();
  },
};
