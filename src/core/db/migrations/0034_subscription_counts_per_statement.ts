import { sql, type Kysely } from 'kysely';
import type { Dialect } from '../dialect.ts';
import type { DialectMigration } from './index.ts';

/**
 * PostgreSQL: the subscription counts (0017, with 0026's sum of sign-up times) kept once per
 * statement over its transition tables, as 0018 keeps the ledger's, instead of once per row. The
 * sending worker marks hundreds of subscriptions notified per statement and a group of sign-ups
 * goes in as one insert (src/core/db/insert-batch.ts): a PL/pgSQL call per row ran four or five
 * statements each, on a store's same few kept rows. Now a statement's rows are summed per kept
 * row first (+1 arriving, -1 leaving, so an update that moves nothing counted sums to nothing),
 * and each kept row is written once, in key order, so two statements lock them in one order.
 * The figures are the same: `test/store-counts.test.ts` compares them with a count over the
 * subscriptions after every kind of change. SQLite keeps its row triggers, which run in C inside
 * the statement.
 */
export const subscriptionCountsPerStatement: DialectMigration = {
  async up(db: Kysely<any>, dialect: Dialect) {
    if (dialect !== 'postgres') return;
    for (const op of ['insert', 'delete', 'update']) await sql.raw(`drop trigger subscriptions_counted_${op} on subscriptions`).execute(db);
    await sql`drop function subscriptions_counted()`.execute(db);
    for (const op of ['INSERT', 'DELETE', 'UPDATE'] as const) {
      const name = `subscriptions_counted_${op.toLowerCase()}`;
      await sql.raw(`create function ${name}() returns trigger language plpgsql as $$ begin ${countsStep(op)} ${waitlistsStep(op)} return null; end $$`).execute(db);
      const tables = op === 'INSERT' ? 'new table as new_rows' : op === 'DELETE' ? 'old table as old_rows' : 'old table as old_rows new table as new_rows';
      await sql.raw(`create trigger ${name} after ${op.toLowerCase()} on subscriptions referencing ${tables} for each statement execute function ${name}()`).execute(db);
    }
  },
};

/** The statement's rows, +1 for each arriving (new_rows) and -1 for each leaving (old_rows). */
function changes(op: 'INSERT' | 'DELETE' | 'UPDATE', columns: string): string {
  const arriving = `select ${columns}, 1 as d from new_rows r`;
  const leaving = `select ${columns}, -1 as d from old_rows r`;
  return op === 'INSERT' ? arriving : op === 'DELETE' ? leaving : `${arriving} union all ${leaving}`;
}

/** `subscription_counts`: subscriptions per store and status; a row may stay at 0, as before. */
function countsStep(op: 'INSERT' | 'DELETE' | 'UPDATE'): string {
  return `insert into subscription_counts (store_domain, status, n)
      select store_domain, status, sum(d) from (${changes(op, 'r.store_domain, r.status')}) c
      where store_domain is not null group by store_domain, status having sum(d) <> 0 order by store_domain, status
      on conflict (store_domain, status) do update set n = subscription_counts.n + excluded.n;`;
}

/** `waitlists`: active subscriptions per store, product and variant, with their sign-up times summed; a row only while someone waits. */
function waitlistsStep(op: 'INSERT' | 'DELETE' | 'UPDATE'): string {
  const columns = `r.store_domain, r.product_id, coalesce(r.variant_id, '') as variant_key, r.status, floor(extract(epoch from r.created_at))::bigint as since`;
  const moved = `select store_domain, product_id, variant_key, sum(d) as waiting, sum(d * since) as since_sum from (${changes(op, columns)}) c
      where store_domain is not null and status = 'active' group by store_domain, product_id, variant_key having sum(d) <> 0 or sum(d * since) <> 0`;
  // Two statements: one that deleted a row the other updated would see it as it was before.
  return `insert into waitlists (store_domain, product_id, variant_key, waiting, waiting_since_sum)
      select store_domain, product_id, variant_key, waiting, since_sum from (${moved}) m order by store_domain, product_id, variant_key
      on conflict (store_domain, product_id, variant_key) do update
        set waiting = waitlists.waiting + excluded.waiting, waiting_since_sum = waitlists.waiting_since_sum + excluded.waiting_since_sum;
    delete from waitlists w using (${moved}) m
      where w.waiting <= 0 and w.store_domain = m.store_domain and w.product_id = m.product_id and w.variant_key = m.variant_key;`;
}
