import type { Kysely } from 'kysely';
import { timestampType, type Dialect } from '../dialect.ts';
import type { DialectMigration } from './index.ts';

/**
 * The language a shopper saw the storefront widget in, kept with the subscription and copied to
 * its alert, so the alert is written in it. And the merchant dashboard's sign-in: one-time links mailed to a store's owner, and the sessions
 * they (or a Shopify session token) open. Only hashes of the secrets are kept, so a copy of the
 * database signs nobody in.
 */
export const storefrontDashboard: DialectMigration = {
  async up(db: Kysely<any>, dialect: Dialect) {
    const ts = timestampType(dialect);
    await db.schema.alterTable('subscriptions').addColumn('locale', 'text').execute();
    await db.schema.alterTable('notifications').addColumn('locale', 'text').execute();

    await db.schema
      .createTable('dashboard_sign_in_links')
      .addColumn('token_hash', 'text', (c) => c.primaryKey())
      .addColumn('shop', 'text', (c) => c.notNull())
      .addColumn('created_at', ts, (c) => c.notNull())
      .addColumn('expires_at', ts, (c) => c.notNull())
      .addColumn('used_at', ts)
      .execute();
    await db.schema.createIndex('dashboard_sign_in_links_expiry').on('dashboard_sign_in_links').column('expires_at').execute();

    await db.schema
      .createTable('dashboard_sessions')
      .addColumn('id_hash', 'text', (c) => c.primaryKey())
      .addColumn('shop', 'text', (c) => c.notNull())
      .addColumn('via', 'text', (c) => c.notNull())
      .addColumn('created_at', ts, (c) => c.notNull())
      .addColumn('expires_at', ts, (c) => c.notNull())
      .addColumn('ended_at', ts)
      .execute();
    await db.schema.createIndex('dashboard_sessions_expiry').on('dashboard_sessions').column('expires_at').execute();
  },
};
