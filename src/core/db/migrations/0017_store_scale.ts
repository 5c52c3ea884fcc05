import { sql, type Kysely } from 'kysely';
import type { Dialect } from '../dialect.ts';
import type { DialectMigration } from './index.ts';

/**
 * A store's pages must cost the same at a million subscriptions and alerts as at a thousand
 * (bench/scale.ts). Two kinds of change:
 *
 * - Indexes in the order the pages list rows, so a page reads its 100 or 500 rows and stops:
 *   the ledger newest first (also in one status, on PostgreSQL); who unsubscribed, latest first;
 *   suppressions newest first; attributed orders in the export's
 *   order (which replaces the index on their first two columns).
 * - Counts kept as the rows change instead of counted on every read: `subscription_counts`
 *   (subscriptions per store and status) and `waitlists` (active subscriptions per store, product
 *   and variant, '' for the whole product; a row only while someone waits). Triggers keep them in
 *   the transaction of every insert, update and delete of a subscription, whichever feature's
 *   statement it is (dispatch marks subscriptions notified inside its own transaction), so no
 *   write path can forget them. Subscriptions of no store are not counted: nothing reads them
 *   per store.
 */
export const storeScale: DialectMigration = {
  async up(db: Kysely<any>, dialect: Dialect) {
    await sql`create index notifications_ledger on notifications (store_domain, created_at, position)`.execute(db);
    // SQLite plans without statistics and takes an index of two equalities over one with an IN
    // list: (store_domain, status) would win over notifications_by_address_key for the sending
    // worker's look-up of past alerts by address (store, keys, status) and read a store's whole
    // ledger. PostgreSQL weighs both by its statistics.
    if (dialect === 'postgres') await sql`create index notifications_ledger_by_status on notifications (store_domain, status, created_at, position)`.execute(db);
    // Partial, and asked for with the status spelt out, for the same reason: an index led by
    // (store_domain, status) would draw the worker's update of an address's waiting subscriptions.
    await sql`create index subscriptions_unsubscribed on subscriptions (store_domain, updated_at) where status = 'unsubscribed'`.execute(db);
    await sql`create index suppressions_by_store_time on suppressions (store_domain, created_at)`.execute(db);
    await sql`drop index order_attributions_by_store`.execute(db);
    await sql`create index order_attributions_by_store_order on order_attributions (store_domain, placed_at, order_id, line_id)`.execute(db);

    await db.schema
      .createTable('subscription_counts')
      .addColumn('store_domain', 'text', (c) => c.notNull())
      .addColumn('status', 'text', (c) => c.notNull())
      .addColumn('n', 'integer', (c) => c.notNull())
      .addPrimaryKeyConstraint('subscription_counts_pk', ['store_domain', 'status'])
      .execute();
    await db.schema
      .createTable('waitlists')
      .addColumn('store_domain', 'text', (c) => c.notNull())
      .addColumn('product_id', 'text', (c) => c.notNull())
      .addColumn('variant_key', 'text', (c) => c.notNull())
      .addColumn('waiting', 'integer', (c) => c.notNull())
      .addPrimaryKeyConstraint('waitlists_pk', ['store_domain', 'product_id', 'variant_key'])
      .execute();

    await sql`insert into subscription_counts (store_domain, status, n)
      select store_domain, status, count(*) from subscriptions where store_domain is not null group by store_domain, status`.execute(db);
    await sql`insert into waitlists (store_domain, product_id, variant_key, waiting)
      select store_domain, product_id, coalesce(variant_id, ''), count(*) from subscriptions
      where store_domain is not null and status = 'active' group by store_domain, product_id, coalesce(variant_id, '')`.execute(db);

    if (dialect === 'sqlite') await sqliteTriggers(db);
    else await postgresTriggers(db);
  },
};

/** The changes a subscription row (`old` or `new`) makes to the counts as it leaves or arrives. */
function leaves(row: 'old'): string {
  return `
    update subscription_counts set n = n - 1 where store_domain = ${row}.store_domain and status = ${row}.status;
    update waitlists set waiting = waiting - 1
      where ${row}.status = 'active' and store_domain = ${row}.store_domain and product_id = ${row}.product_id and variant_key = coalesce(${row}.variant_id, '');
    delete from waitlists
      where ${row}.status = 'active' and store_domain = ${row}.store_domain and product_id = ${row}.product_id and variant_key = coalesce(${row}.variant_id, '') and waiting <= 0;`;
}

function arrives(row: 'new'): string {
  // SQLite reads ON CONFLICT after INSERT ... SELECT only when the SELECT has a WHERE.
  return `
    insert into subscription_counts (store_domain, status, n)
      select ${row}.store_domain, ${row}.status, 1 where ${row}.store_domain is not null
      on conflict (store_domain, status) do update set n = subscription_counts.n + 1;
    insert into waitlists (store_domain, product_id, variant_key, waiting)
      select ${row}.store_domain, ${row}.product_id, coalesce(${row}.variant_id, ''), 1 where ${row}.store_domain is not null and ${row}.status = 'active'
      on conflict (store_domain, product_id, variant_key) do update set waiting = waitlists.waiting + 1;`;
}

/** Only a change of what is counted moves a subscription between counts. */
const COUNTED_CHANGE = `old.status is not new.status or old.store_domain is not new.store_domain or old.product_id is not new.product_id or old.variant_id is not new.variant_id`;

async function sqliteTriggers(db: Kysely<any>): Promise<void> {
  await sql.raw(`create trigger subscriptions_counted_insert after insert on subscriptions begin ${arrives('new')} end`).execute(db);
  await sql.raw(`create trigger subscriptions_counted_delete after delete on subscriptions begin ${leaves('old')} end`).execute(db);
  await sql
    .raw(`create trigger subscriptions_counted_update after update of status, store_domain, product_id, variant_id on subscriptions
      when ${COUNTED_CHANGE} begin ${leaves('old')} ${arrives('new')} end`)
    .execute(db);
}

async function postgresTriggers(db: Kysely<any>): Promise<void> {
  await sql
    .raw(`create function subscriptions_counted() returns trigger language plpgsql as $$
    begin
      if tg_op <> 'INSERT' then ${leaves('old')} end if;
      if tg_op <> 'DELETE' then ${arrives('new')} end if;
      return null;
    end $$`)
    .execute(db);
  await sql`create trigger subscriptions_counted_insert after insert on subscriptions for each row execute function subscriptions_counted()`.execute(db);
  await sql`create trigger subscriptions_counted_delete after delete on subscriptions for each row execute function subscriptions_counted()`.execute(db);
  await sql
    .raw(`create trigger subscriptions_counted_update after update of status, store_domain, product_id, variant_id on subscriptions
      for each row when (${COUNTED_CHANGE.replaceAll(' is not ', ' is distinct from ')}) execute function subscriptions_counted()`)
    .execute(db);
}
