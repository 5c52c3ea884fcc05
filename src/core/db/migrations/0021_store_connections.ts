import { sql, type Kysely } from 'kysely';
import { timestampType, type Dialect } from '../dialect.ts';
import type { DialectMigration } from './index.ts';

/**
 * One table for every platform's connections (src/core/connectors): a WooCommerce site's keys
 * and a BigCommerce store's token are the same kind of record, a store's credentials on its
 * platform, the webhooks made there and the secret they prove themselves with. WooCommerce's
 * connections move here unchanged.
 */
export const storeConnections: DialectMigration = {
  async up(db: Kysely<any>, dialect: Dialect) {
    const ts = timestampType(dialect);
    await db.schema
      .createTable('store_connections')
      .addColumn('store_domain', 'text', (c) => c.primaryKey())
      .addColumn('platform', 'text', (c) => c.notNull())
      // Where the store lives on its platform: a WooCommerce site's address, a BigCommerce store's hash.
      .addColumn('site', 'text', (c) => c.notNull())
      // connected | disconnected
      .addColumn('status', 'text', (c) => c.notNull())
      .addColumn('credentials_sealed', 'text')
      .addColumn('webhook_secret_sealed', 'text', (c) => c.notNull())
      // A JSON array of the webhook ids created on the platform.
      .addColumn('webhook_ids', 'text', (c) => c.notNull().defaultTo('[]'))
      .addColumn('connected_at', ts, (c) => c.notNull())
      .addColumn('disconnected_at', ts)
      .addColumn('disconnect_reason', 'text')
      .addColumn('reconciled_at', ts)
      .addColumn('updated_at', ts, (c) => c.notNull())
      .execute();
    await db.schema.createIndex('store_connections_due').on('store_connections').columns(['platform', 'status', 'reconciled_at']).execute();
    await sql`
      insert into store_connections (store_domain, platform, site, status, credentials_sealed, webhook_secret_sealed, webhook_ids,
                                     connected_at, disconnected_at, disconnect_reason, reconciled_at, updated_at)
      select store_domain, 'woocommerce', site_url, status, keys_sealed, webhook_secret_sealed, webhook_ids,
             connected_at, disconnected_at, disconnect_reason, reconciled_at, updated_at
      from woocommerce_connections`.execute(db);
    await db.schema.dropTable('woocommerce_connections').execute();
  },
};
