import { sql, type Kysely } from 'kysely';
import type { Dialect } from '../dialect.ts';
import type { DialectMigration } from './index.ts';

/**
 * The ledger's prefix for alerts the store's plan held back, as the dispatch worker wrote it
 * until this migration. Spelled out here rather than imported: a migration must keep meaning
 * what it meant when it shipped, whatever the worker's wording becomes.
 */
const HELD_PREFIX = 'held by the plan: ';

/**
 * "Held by the plan" becomes a column of the notification ledger instead of a prefix of its
 * outcome text, so the queue's count of held alerts is an index lookup, not a LIKE over a
 * store's whole ledger, and the wording of the outcome can change without changing the count.
 */
export const heldByPlan: DialectMigration = {
  async up(db: Kysely<any>, _dialect: Dialect) {
    await db.schema.alterTable('notifications').addColumn('held_by_plan', 'integer', (c) => c.notNull().defaultTo(0)).execute();
    await db.updateTable('notifications').set({ held_by_plan: 1 }).where('outcome', 'like', `${HELD_PREFIX}%`).execute();
    // Only the rows the queue counts; literals, so both databases match the predicate to the
    // count's query (see DispatchRepository.countHeldByPlan).
    await sql`create index notifications_held_by_plan on notifications (store_domain) where held_by_plan = 1 and status = 'queued'`.execute(db);
  },
};
