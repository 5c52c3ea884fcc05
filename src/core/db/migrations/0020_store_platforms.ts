import { sql, type Kysely } from 'kysely';
import { timestampType, type Dialect } from '../dialect.ts';
import type { DialectMigration } from './index.ts';

/**
 * Stores on any platform. Every store so far has a myshopify.com domain, so a store without a
 * platform is a Shopify store (installed as the app or created by the operator). WooCommerce
 * connections are the WooCommerce feature's own: the site's address, its REST API keys and the
 * secret its webhooks are signed with (sealed), the webhooks created there.
 */
export const storePlatforms: DialectMigration = {
  async up(db: Kysely<any>, dialect: Dialect) {
    const ts = timestampType(dialect);
    await sql`update stores set platform = 'shopify' where platform is null`.execute(db);
    await db.schema
      .createTable('woocommerce_connections')
      .addColumn('store_domain', 'text', (c) => c.primaryKey())
      .addColumn('site_url', 'text', (c) => c.notNull())
      // connected | disconnected
      .addColumn('status', 'text', (c) => c.notNull())
      .addColumn('keys_sealed', 'text')
      .addColumn('webhook_secret_sealed', 'text', (c) => c.notNull())
      // A JSON array of the webhook ids created on the site.
      .addColumn('webhook_ids', 'text', (c) => c.notNull().defaultTo('[]'))
      .addColumn('connected_at', ts, (c) => c.notNull())
      .addColumn('disconnected_at', ts)
      .addColumn('disconnect_reason', 'text')
      .addColumn('reconciled_at', ts)
      .addColumn('updated_at', ts, (c) => c.notNull())
      .execute();
    await db.schema.createIndex('woocommerce_connections_due').on('woocommerce_connections').columns(['status', 'reconciled_at']).execute();
  },
};
