import { sql, type Kysely } from 'kysely';
import type { Dialect } from '../dialect.ts';
import type { DialectMigration } from './index.ts';

/**
 * The purchasing view (docs/purchasing.md): waitlists ranked by shoppers waiting and time waited,
 * with the revenue they would bring at the current price, as cheap at a million subscriptions as
 * at a thousand.
 *
 * - `waitlists.waiting_since_sum`: the sum of the waiting subscriptions' `created_at` in epoch
 *   seconds, kept by the same triggers as `waiting` (0017), so the time a waitlist has waited in
 *   all is `waiting × now − waiting_since_sum` without reading a subscription. A minimum (the
 *   oldest sign-up) could not be kept so: when the oldest leaves, the next oldest is only found
 *   by a scan.
 * - `waitlists_purchasing`: the ranking's order (most waiting, then the longest waited, which
 *   for equal `waiting` is the smallest sum), so a page reads its rows and sorts nothing.
 * - `inventory_variants.price_minor` and `price_currency`: the current price in the currency's
 *   minor unit, both null while unknown.
 */
export const purchasing: DialectMigration = {
  async up(db: Kysely<any>, dialect: Dialect) {
    // Epoch seconds times waiting shoppers outgrows 32 bits after two shoppers.
    await sql.raw(`alter table waitlists add column waiting_since_sum ${dialect === 'postgres' ? 'bigint' : 'integer'} not null default 0`).execute(db);
    await sql
      .raw(`update waitlists set waiting_since_sum = coalesce((select sum(${epochOf(dialect, 's.created_at')}) from subscriptions s
        where s.store_domain = waitlists.store_domain and s.product_id = waitlists.product_id
          and coalesce(s.variant_id, '') = waitlists.variant_key and s.status = 'active'), 0)`)
      .execute(db);
    await sql`create index waitlists_purchasing on waitlists (store_domain, waiting desc, waiting_since_sum, product_id, variant_key)`.execute(db);

    await db.schema.alterTable('inventory_variants').addColumn('price_minor', dialect === 'postgres' ? 'bigint' : 'integer').execute();
    await db.schema.alterTable('inventory_variants').addColumn('price_currency', 'text').execute();

    if (dialect === 'sqlite') await sqliteTriggers(db);
    else await postgresTriggers(db);
  },
};

/** A timestamp column's epoch seconds, whole: SQLite keeps ISO text, PostgreSQL timestamptz. */
function epochOf(dialect: Dialect, column: string): string {
  return dialect === 'sqlite' ? `cast(strftime('%s', ${column}) as integer)` : `floor(extract(epoch from ${column}))::bigint`;
}

/** 0017's counts, with the waiting shoppers' sign-up times summed beside `waiting`. */
function leaves(dialect: Dialect, row: 'old'): string {
  return `
    update subscription_counts set n = n - 1 where store_domain = ${row}.store_domain and status = ${row}.status;
    update waitlists set waiting = waiting - 1, waiting_since_sum = waiting_since_sum - ${epochOf(dialect, `${row}.created_at`)}
      where ${row}.status = 'active' and store_domain = ${row}.store_domain and product_id = ${row}.product_id and variant_key = coalesce(${row}.variant_id, '');
    delete from waitlists
      where ${row}.status = 'active' and store_domain = ${row}.store_domain and product_id = ${row}.product_id and variant_key = coalesce(${row}.variant_id, '') and waiting <= 0;`;
}

function arrives(dialect: Dialect, row: 'new'): string {
  // SQLite reads ON CONFLICT after INSERT ... SELECT only when the SELECT has a WHERE.
  return `
    insert into subscription_counts (store_domain, status, n)
      select ${row}.store_domain, ${row}.status, 1 where ${row}.store_domain is not null
      on conflict (store_domain, status) do update set n = subscription_counts.n + 1;
    insert into waitlists (store_domain, product_id, variant_key, waiting, waiting_since_sum)
      select ${row}.store_domain, ${row}.product_id, coalesce(${row}.variant_id, ''), 1, ${epochOf(dialect, `${row}.created_at`)}
      where ${row}.store_domain is not null and ${row}.status = 'active'
      on conflict (store_domain, product_id, variant_key) do update
        set waiting = waitlists.waiting + 1, waiting_since_sum = waitlists.waiting_since_sum + excluded.waiting_since_sum;`;
}

/** 0017's, and `created_at`: a sign-up time rewritten would otherwise leave its old value in the sum. */
const WATCHED = 'status, store_domain, product_id, variant_id, created_at';
const COUNTED_CHANGE = `old.status is not new.status or old.store_domain is not new.store_domain or old.product_id is not new.product_id or old.variant_id is not new.variant_id or old.created_at is not new.created_at`;

async function sqliteTriggers(db: Kysely<any>): Promise<void> {
  for (const name of ['insert', 'delete', 'update']) await sql.raw(`drop trigger subscriptions_counted_${name}`).execute(db);
  await sql.raw(`create trigger subscriptions_counted_insert after insert on subscriptions begin ${arrives('sqlite', 'new')} end`).execute(db);
  await sql.raw(`create trigger subscriptions_counted_delete after delete on subscriptions begin ${leaves('sqlite', 'old')} end`).execute(db);
  await sql
    .raw(`create trigger subscriptions_counted_update after update of ${WATCHED} on subscriptions
      when ${COUNTED_CHANGE} begin ${leaves('sqlite', 'old')} ${arrives('sqlite', 'new')} end`)
    .execute(db);
}

async function postgresTriggers(db: Kysely<any>): Promise<void> {
  await sql
    .raw(`create or replace function subscriptions_counted() returns trigger language plpgsql as $$
    begin
      if tg_op <> 'INSERT' then ${leaves('postgres', 'old')} end if;
      if tg_op <> 'DELETE' then ${arrives('postgres', 'new')} end if;
      return null;
    end $$`)
    .execute(db);
  await sql`drop trigger subscriptions_counted_update on subscriptions`.execute(db);
  await sql
    .raw(`create trigger subscriptions_counted_update after update of ${WATCHED} on subscriptions
      for each row when (${COUNTED_CHANGE.replaceAll(' is not ', ' is distinct from ')}) execute function subscriptions_counted()`)
    .execute(db);
}
