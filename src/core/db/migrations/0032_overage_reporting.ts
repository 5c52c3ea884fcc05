import type { Kysely } from 'kysely';
import type { DialectMigration } from './index.ts';

/**
 * Alerts beyond the allowance are billed at the store's own provider: Stripe meter events, Shopify
 * usage records. `plan_usage.overage_reported` is how many of the period's `overage` the provider
 * was told of (the report job sends the difference). `overage_caps` keeps the capped amount the
 * merchant approved at a provider that holds one (Shopify's usage line item), per subscription:
 * alerts beyond the allowance stop there whatever ceiling is set here, since the provider would
 * refuse to bill them.
 */
export const overageReporting: DialectMigration = {
  async up(db: Kysely<any>) {
    await db.schema.alterTable('plan_usage').addColumn('overage_reported', 'integer', (c) => c.notNull().defaultTo(0)).execute();
    await db.schema
      .createTable('overage_caps')
      .addColumn('shop', 'text', (c) => c.primaryKey())
      .addColumn('provider', 'text', (c) => c.notNull())
      .addColumn('external_id', 'text', (c) => c.notNull())
      .addColumn('cap_cents', 'integer', (c) => c.notNull())
      .addColumn('updated_at', 'text', (c) => c.notNull())
      .execute();
  },
};
