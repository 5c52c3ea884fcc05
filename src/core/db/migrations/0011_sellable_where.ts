import type { Kysely } from 'kysely';
import { timestampType, type Dialect } from '../dialect.ts';
import type { DialectMigration } from './index.ts';

/**
 * Whether a shopper can buy a variant is more than its stock. `purchasable_without_stock` marks a
 * variant sold whatever its stock (Shopify: inventory policy CONTINUE, untracked inventory, or a
 * pre-order selling plan), which is never sold out. A subscription keeps the country the
 * storefront knew the shopper in (`country`, ISO 3166-1 alpha-2), and
 * `inventory_unlisted_countries` holds the countries where a product is not on sale (a market it
 * is not published to), so a restock there alerts nobody from that country.
 */
export const sellableWhere: DialectMigration = {
  async up(db: Kysely<any>, dialect: Dialect) {
    const ts = timestampType(dialect);
    await db.schema
      .alterTable('inventory_variants')
      .addColumn('purchasable_without_stock', 'integer', (col) => col.notNull().defaultTo(0))
      .execute();
    await db.schema.alterTable('subscriptions').addColumn('country', 'text').execute();
    await db.schema
      .createTable('inventory_unlisted_countries')
      .addColumn('store_domain', 'text', (col) => col.notNull())
      .addColumn('product_id', 'text', (col) => col.notNull())
      .addColumn('country', 'text', (col) => col.notNull())
      .addColumn('updated_at', ts, (col) => col.notNull())
      .addPrimaryKeyConstraint('inventory_unlisted_countries_pk', ['store_domain', 'product_id', 'country'])
      .execute();
  },
};
