import type { Kysely } from 'kysely';
import { timestampType, type Dialect } from '../dialect.ts';
import type { DialectMigration } from './index.ts';

/**
 * A unit held for the first in line (docs/dispatch.md, "Reserved units"): one row per alert of a
 * restock's first batch that carries a held unit. The planner writes it `planned` with the batch,
 * so that whichever worker sends the alert knows to hold a unit first; sending makes it `held`
 * (the platform's reference to the hold, the checkout link, the expiry) or `failed` (the alert
 * then goes out as an ordinary one). The worker releases expired holds (`released`) and lets
 * the restock's next batch go; a purchase of the unit makes it `claimed`.
 *
 * - `unit_holds_by_notification`: one hold per alert, however often its send is retried.
 * - `unit_holds_due`: the expired holds, found without reading the released ones.
 */
export const unitHolds: DialectMigration = {
  async up(db: Kysely<any>, dialect: Dialect) {
    const ts = timestampType(dialect);
    await db.schema
      .createTable('unit_holds')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('notification_id', 'text', (c) => c.notNull())
      .addColumn('restock_id', 'text', (c) => c.notNull())
      .addColumn('store_domain', 'text', (c) => c.notNull())
      .addColumn('subscription_id', 'text', (c) => c.notNull())
      .addColumn('product_id', 'text', (c) => c.notNull())
      .addColumn('variant_id', 'text')
      .addColumn('minutes', 'integer', (c) => c.notNull())
      .addColumn('status', 'text', (c) => c.notNull())
      .addColumn('hold_ref', 'text')
      .addColumn('checkout_url', 'text')
      .addColumn('expires_at', ts)
      .addColumn('outcome', 'text')
      .addColumn('created_at', ts, (c) => c.notNull())
      .addColumn('updated_at', ts, (c) => c.notNull())
      .execute();
    await db.schema.createIndex('unit_holds_by_notification').unique().on('unit_holds').columns(['notification_id']).execute();
    await db.schema.createIndex('unit_holds_due').on('unit_holds').columns(['status', 'expires_at']).execute();
  },
};
