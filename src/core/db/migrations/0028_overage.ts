import type { Kysely } from 'kysely';
import type { DialectMigration } from './index.ts';

/**
 * Alerts beyond a plan's allowance are billed per alert up to a ceiling the merchant sets
 * (billing's `overage_ceilings`), instead of waiting for the next period. A store with no row
 * takes the plan's default ceiling, agreed to when it buys a plan from now on. Stores that hold
 * a plan already agreed to no such charge: each gets a ceiling of 0, so they are never charged
 * until their owner raises it (and until then their alerts wait at the allowance, as before).
 * `plan_usage` counts the period's alerts beyond the allowance, and when the owner was warned
 * that the period's room is running out.
 */
export const overage: DialectMigration = {
  async up(db: Kysely<any>) {
    await db.schema
      .createTable('overage_ceilings')
      .addColumn('shop', 'text', (c) => c.primaryKey())
      .addColumn('ceiling_cents', 'integer', (c) => c.notNull())
      .addColumn('updated_at', 'text', (c) => c.notNull())
      .execute();
    const now = new Date().toISOString();
    const held = await db.selectFrom('store_plans').select('shop').execute();
    for (const { shop } of held as Array<{ shop: string }>) {
      await db.insertInto('overage_ceilings').values({ shop, ceiling_cents: 0, updated_at: now }).onConflict((oc) => oc.doNothing()).execute();
    }
    await db.schema.alterTable('plan_usage').addColumn('overage', 'integer', (c) => c.notNull().defaultTo(0)).execute();
    await db.schema.alterTable('plan_usage').addColumn('warned_at', 'text').execute();
  },
};
