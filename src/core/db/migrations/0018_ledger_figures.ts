import { sql, type Kysely } from 'kysely';
import type { Dialect } from '../dialect.ts';
import type { DialectMigration } from './index.ts';

/**
 * The figures read from the alert ledger and the clicks, kept as the rows change instead of
 * counted on every read, so the queue, the overview and the performance report cost the same at
 * a million alerts as at a thousand (bench/scale.ts):
 *
 * - `ledger_counts`: a store's alerts per final ledger status (sent, skipped, failed: the queue,
 *   the overview). Queued and sending alerts are counted where they are, through the ledger's
 *   indexes by status: the queue is short-lived, and a worker's claim then moves no kept row, so
 *   claims never wait on one another's counts.
 * - `alerts_sent_daily`: sent alerts and reminders per store, UTC day of sending, channel and
 *   kind (the report's totals, its days and its channels).
 * - `alerts_sent_by_product`: the same per product and variant ('' for the whole product) and
 *   day, read only for the products a report shows.
 * - `alert_clicks_daily` and `alert_clicks_by_product`: the same of clicks, by day of the click.
 *
 * Triggers keep them in the transaction of every write, as 0017 does for subscriptions. On
 * PostgreSQL they run once per statement over its transition tables: the worker claims and
 * settles alerts hundreds per statement, and a row-level PL/pgSQL call each would cost more than
 * the statement. SQLite has row triggers only; they run in C inside the statement.
 *
 * The most wanted products (the demand page, the overview, the report) are read from
 * `waitlists_most_wanted` in its order instead of sorting every waitlist of the store.
 *
 * On SQLite, also partial indexes of the ledger in every status but `sent`, newest first: a
 * store's failed or queued alerts are read without walking its sent ones, and an index that
 * holds only rows in one status draws no other query (see 0017 for why SQLite has no index led by
 * (store_domain, status)).
 */
export const ledgerFigures: DialectMigration = {
  async up(db: Kysely<any>, dialect: Dialect) {
    await createTables(db, dialect);
    await backfill(db, dialect);
    await sql`create index waitlists_most_wanted on waitlists (store_domain, waiting desc, product_id, variant_key)`.execute(db);
    if (dialect === 'sqlite') {
      for (const status of ['queued', 'sending', 'skipped', 'failed']) {
        await sql.raw(`create index notifications_ledger_${status} on notifications (store_domain, created_at, position) where status = '${status}'`).execute(db);
      }
      await sqliteTriggers(db);
    } else {
      await postgresTriggers(db);
    }
  },
};

/**
 * A table of kept figures, stored in its key's order: WITHOUT ROWID on SQLite, so a store's rows
 * of one product lie together and a read touches few pages; on PostgreSQL its key index also
 * holds the counted columns, so a read can be answered from the index.
 */
export async function createFigureTable(db: Kysely<any>, dialect: Dialect, table: string, keys: Record<string, string>, counted: Record<string, string>): Promise<void> {
  const columns = Object.entries({ ...keys, ...counted }).map(([name, type]) => `${name} ${type} not null`);
  const include = dialect === 'postgres' ? ` include (${Object.keys(counted).join(', ')})` : '';
  const storage = dialect === 'sqlite' ? ' without rowid' : '';
  await sql.raw(`create table ${table} (${columns.join(', ')}, constraint ${table}_pk primary key (${Object.keys(keys).join(', ')})${include})${storage}`).execute(db);
}

async function createTables(db: Kysely<any>, dialect: Dialect): Promise<void> {
  const text = 'text';
  await createFigureTable(db, dialect, 'ledger_counts', { store_domain: text, status: text }, { n: 'integer' });
  await createFigureTable(db, dialect, 'alerts_sent_daily', { store_domain: text, day: text, channel: text, kind: text }, { n: 'integer' });
  await createFigureTable(db, dialect, 'alerts_sent_by_product', { store_domain: text, product_id: text, variant_key: text, day: text, kind: text }, { n: 'integer' });
  await createFigureTable(db, dialect, 'alert_clicks_daily', { store_domain: text, day: text, channel: text }, { n: 'integer' });
  await createFigureTable(db, dialect, 'alert_clicks_by_product', { store_domain: text, product_id: text, variant_key: text, day: text }, { n: 'integer' });
}

/** The ledger statuses an alert ends in; only rows in one of them are in a kept figure. */
const FINAL_STATUSES = `'sent', 'skipped', 'failed'`;

/** How a kept figure is told from the rows of its source: its key columns and which rows count. */
interface Figure {
  table: string;
  /** The figure's key columns, in the table's order, and how each is read off a source row `r`. */
  keys: Array<[column: string, expression: (r: string) => string]>;
  /** Which source rows count (a condition on `r`), or null for all. */
  counts: ((r: string) => string) | null;
}

function figures(dialect: Dialect): { ledger: Figure[]; clicks: Figure[] } {
  const day = (column: string) => (dialect === 'sqlite' ? `substr(${column}, 1, 10)` : `to_char(${column} at time zone 'UTC', 'YYYY-MM-DD')`);
  const sent = (r: string) => `${r}.status = 'sent' and ${r}.sent_at is not null`;
  const final = (r: string) => `${r}.status in (${FINAL_STATUSES})`;
  return {
    ledger: [
      { table: 'ledger_counts', keys: [['store_domain', (r) => `${r}.store_domain`], ['status', (r) => `${r}.status`]], counts: final },
      {
        table: 'alerts_sent_daily',
        keys: [['store_domain', (r) => `${r}.store_domain`], ['day', (r) => day(`${r}.sent_at`)], ['channel', (r) => `${r}.channel`], ['kind', (r) => `${r}.kind`]],
        counts: sent,
      },
      {
        table: 'alerts_sent_by_product',
        keys: [
          ['store_domain', (r) => `${r}.store_domain`],
          ['product_id', (r) => `${r}.product_id`],
          ['variant_key', (r) => `coalesce(${r}.variant_id, '')`],
          ['day', (r) => day(`${r}.sent_at`)],
          ['kind', (r) => `${r}.kind`],
        ],
        counts: sent,
      },
    ],
    clicks: [
      { table: 'alert_clicks_daily', keys: [['store_domain', (r) => `${r}.store_domain`], ['day', (r) => day(`${r}.clicked_at`)], ['channel', (r) => `${r}.channel`]], counts: null },
      {
        table: 'alert_clicks_by_product',
        keys: [['store_domain', (r) => `${r}.store_domain`], ['product_id', (r) => `${r}.product_id`], ['variant_key', (r) => `coalesce(${r}.variant_id, '')`], ['day', (r) => day(`${r}.clicked_at`)]],
        counts: null,
      },
    ],
  };
}

const columnsOf = (figure: Figure) => figure.keys.map(([column]) => column).join(', ');

async function backfill(db: Kysely<any>, dialect: Dialect): Promise<void> {
  const { ledger, clicks } = figures(dialect);
  for (const [source, kept] of [['notifications', ledger], ['alert_clicks', clicks]] as const) {
    for (const figure of kept) {
      const keys = figure.keys.map(([, expression]) => expression('r')).join(', ');
      const where = figure.counts ? `where ${figure.counts('r')}` : '';
      await sql.raw(`insert into ${figure.table} (${columnsOf(figure)}, n) select ${keys}, count(*) from ${source} r ${where} group by ${keys}`).execute(db);
    }
  }
}

/** SQLite: one row arriving (+1) or leaving (-1). Zero counts stay; readers skip them. */
function sqliteStep(figure: Figure, r: 'new' | 'old', delta: 1 | -1): string {
  const when = figure.counts ? `where ${figure.counts(r)}` : 'where true';
  const keys = figure.keys.map(([, expression]) => expression(r)).join(', ');
  // SQLite reads ON CONFLICT after INSERT ... SELECT only when the SELECT has a WHERE.
  return `insert into ${figure.table} (${columnsOf(figure)}, n) select ${keys}, ${delta} ${when}
    on conflict (${columnsOf(figure)}) do update set n = ${figure.table}.n + excluded.n;`;
}

async function sqliteTriggers(db: Kysely<any>): Promise<void> {
  const { ledger, clicks } = figures('sqlite');
  const watched = { notifications: ['status', 'store_domain', 'sent_at', 'product_id', 'variant_id', 'channel', 'kind'], alert_clicks: ['store_domain', 'clicked_at', 'product_id', 'variant_id', 'channel'] };
  for (const [source, kept] of [['notifications', ledger], ['alert_clicks', clicks]] as const) {
    const arrive = kept.map((figure) => sqliteStep(figure, 'new', 1)).join('\n');
    const leave = kept.map((figure) => sqliteStep(figure, 'old', -1)).join('\n');
    const changed = watched[source].map((column) => `old.${column} is not new.${column}`).join(' or ');
    // A ledger row counts only in a final status: queueing and claiming alerts run no trigger.
    const counted = (r: string) => (source === 'notifications' ? `${r}.status in (${FINAL_STATUSES})` : 'true');
    await sql.raw(`create trigger ${source}_figures_insert after insert on ${source} when ${counted('new')} begin ${arrive} end`).execute(db);
    await sql.raw(`create trigger ${source}_figures_delete after delete on ${source} when ${counted('old')} begin ${leave} end`).execute(db);
    await sql
      .raw(`create trigger ${source}_figures_update after update of ${watched[source].join(', ')} on ${source}
        when (${counted('old')} or ${counted('new')}) and (${changed}) begin ${leave} ${arrive} end`)
      .execute(db);
  }
}

/** PostgreSQL: the statement's rows in `changes` (+1 per row arriving, -1 per row leaving), summed per key. */
function postgresStep(figure: Figure, op: 'INSERT' | 'DELETE' | 'UPDATE'): string {
  const side = (table: 'new_rows' | 'old_rows', delta: 1 | -1) => {
    const keys = figure.keys.map(([column, expression]) => `${expression('r')} as ${column}`).join(', ');
    return `select ${keys}, ${delta} as d from ${table} r${figure.counts ? ` where ${figure.counts('r')}` : ''}`;
  };
  const changes = op === 'INSERT' ? side('new_rows', 1) : op === 'DELETE' ? side('old_rows', -1) : `${side('new_rows', 1)} union all ${side('old_rows', -1)}`;
  const columns = columnsOf(figure);
  // In key order, so two statements moving the same kept rows lock them in the same order.
  return `insert into ${figure.table} (${columns}, n) select ${columns}, sum(d) from (${changes}) c group by ${columns} having sum(d) <> 0
    order by ${columns} on conflict (${columns}) do update set n = ${figure.table}.n + excluded.n;`;
}

async function postgresTriggers(db: Kysely<any>): Promise<void> {
  const { ledger, clicks } = figures('postgres');
  for (const [source, kept] of [['notifications', ledger], ['alert_clicks', clicks]] as const) {
    for (const op of ['INSERT', 'DELETE', 'UPDATE'] as const) {
      const name = `${source}_figures_${op.toLowerCase()}`;
      const steps = kept.map((figure) => postgresStep(figure, op)).join('\n');
      await sql.raw(`create function ${name}() returns trigger language plpgsql as $$ begin ${steps} return null; end $$`).execute(db);
      const tables = op === 'INSERT' ? 'new table as new_rows' : op === 'DELETE' ? 'old table as old_rows' : 'old table as old_rows new table as new_rows';
      await sql.raw(`create trigger ${name} after ${op.toLowerCase()} on ${source} referencing ${tables} for each statement execute function ${name}()`).execute(db);
    }
  }
}
