import type { Kysely } from 'kysely';
import { timestampType, type Dialect } from '../dialect.ts';
import type { DialectMigration } from './index.ts';

/**
 * What a store's owner is told about, besides alerts. `waitlist_crossings` holds the waitlists
 * (a product, or one variant) now at or above the store's threshold: a row is one crossing,
 * noticed once (`noticed_at`), and deleted when the waitlist falls below, so the next rise is
 * a new crossing. `notice_digests` remembers, per store, the end of the week its last digest
 * covered. Both carry a lease, so that of several workers only one tells the owner.
 */
export const notices: DialectMigration = {
  async up(db: Kysely<any>, dialect: Dialect) {
    const ts = timestampType(dialect);
    await db.schema
      .createTable('waitlist_crossings')
      .addColumn('store_domain', 'text', (c) => c.notNull())
      .addColumn('product_id', 'text', (c) => c.notNull())
      .addColumn('variant_key', 'text', (c) => c.notNull())
      .addColumn('crossed_at', ts, (c) => c.notNull())
      .addColumn('waiting', 'integer', (c) => c.notNull())
      .addColumn('threshold', 'integer', (c) => c.notNull())
      .addColumn('noticed_at', ts)
      .addColumn('notice_lease_until', ts)
      .addPrimaryKeyConstraint('waitlist_crossings_pk', ['store_domain', 'product_id', 'variant_key'])
      .execute();

    await db.schema
      .createTable('notice_digests')
      .addColumn('store_domain', 'text', (c) => c.primaryKey())
      .addColumn('last_digest_at', ts)
      .addColumn('lease_until', ts)
      .execute();
  },
};
