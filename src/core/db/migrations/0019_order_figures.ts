import { sql, type Kysely } from 'kysely';
import type { Dialect } from '../dialect.ts';
import type { DialectMigration } from './index.ts';
import { createFigureTable } from './0018_ledger_figures.ts';

/**
 * The performance report's orders and revenue, kept per UTC day of the order as attributed order
 * lines change, instead of read from every line of the window (bench/scale.ts):
 *
 * - `orders_daily`: orders, orders with a direct line, net revenue in the shoppers' and in the
 *   store's currency, per store, day and currencies (an order has one of each).
 * - `orders_by_channel_daily`: orders and net revenue in the store's currency per channel of the
 *   credited alerts.
 * - `orders_by_product_daily`: the same per product and variant ('' for the whole product).
 *
 * An order counts once per figure however many of its lines share the key: `attributed_order_keys`
 * holds, per order, how many of its lines fall under each key, and a figure's order count moves
 * when that number leaves or reaches zero. Row triggers on both databases: each sees what the
 * ones before it wrote, which the count needs, and order lines come a few at a time.
 */
export const orderFigures: DialectMigration = {
  async up(db: Kysely<any>, dialect: Dialect) {
    await createTables(db, dialect);
    const steps = figureSteps(dialect);
    if (dialect === 'sqlite') {
      await sql.raw(`create trigger order_attributions_figures_insert after insert on order_attributions begin ${steps.arrive('new')} end`).execute(db);
      await sql.raw(`create trigger order_attributions_figures_delete after delete on order_attributions begin ${steps.leave('old')} end`).execute(db);
      await sql.raw(`create trigger order_attributions_figures_update after update on order_attributions begin ${steps.leave('old')} ${steps.arrive('new')} end`).execute(db);
    } else {
      await sql
        .raw(`create function order_attributions_figures() returns trigger language plpgsql as $$
        begin
          if tg_op <> 'INSERT' then ${steps.leave('old')} end if;
          if tg_op <> 'DELETE' then ${steps.arrive('new')} end if;
          return null;
        end $$`)
        .execute(db);
      for (const op of ['insert', 'delete', 'update']) {
        await sql.raw(`create trigger order_attributions_figures_${op} after ${op} on order_attributions for each row execute function order_attributions_figures()`).execute(db);
      }
    }
    // The lines already credited, replayed through the triggers: one update that changes nothing
    // would double them, so they are copied out and back in.
    await sql`create temporary table order_attributions_backfill as select * from order_attributions`.execute(db);
    await sql`delete from order_attributions`.execute(db);
    await sql`delete from attributed_order_keys`.execute(db);
    for (const table of ['orders_daily', 'orders_by_channel_daily', 'orders_by_product_daily']) await sql.raw(`delete from ${table}`).execute(db);
    await sql`insert into order_attributions select * from order_attributions_backfill`.execute(db);
    await sql`drop table order_attributions_backfill`.execute(db);
  },
};

async function createTables(db: Kysely<any>, dialect: Dialect): Promise<void> {
  const text = 'text';
  await createFigureTable(db, dialect, 'attributed_order_keys', { store_domain: text, order_id: text, figure: text, key: text }, { lines: 'integer' });
  const money = { net_shop_minor: 'bigint' };
  await createFigureTable(db, dialect, 'orders_daily', { store_domain: text, day: text, shop_currency: text, currency: text }, { orders: 'integer', direct_orders: 'integer', net_minor: 'bigint', ...money });
  await createFigureTable(db, dialect, 'orders_by_channel_daily', { store_domain: text, day: text, shop_currency: text, channel: text }, { orders: 'integer', ...money });
  await createFigureTable(db, dialect, 'orders_by_product_daily', { store_domain: text, product_id: text, variant_key: text, day: text, shop_currency: text }, { orders: 'integer', ...money });
  // The report reads every product's orders in its window: by day, from the index alone.
  await sql`create index orders_by_product_daily_by_day on orders_by_product_daily (store_domain, day, product_id, variant_key, shop_currency, orders, net_shop_minor)`.execute(db);
}

/** One kept figure: its table's key columns read off a line `r`, what it sums, and which lines it counts. */
interface OrderFigure {
  /** The name its per-order line counts go under in attributed_order_keys. */
  name: string;
  table: string;
  keys: Array<[column: string, expression: (r: string) => string]>;
  /** The column counting distinct orders. */
  orders: string;
  /** Columns summed from each line. */
  sums: Array<[column: string, expression: (r: string) => string]>;
  /** Which lines count (a condition on `r`), or null for all. */
  counts: ((r: string) => string) | null;
}

function figureSteps(dialect: Dialect): { arrive(r: 'new'): string; leave(r: 'old'): string } {
  const day = (r: string) => (dialect === 'sqlite' ? `substr(${r}.placed_at, 1, 10)` : `to_char(${r}.placed_at at time zone 'UTC', 'YYYY-MM-DD')`);
  const dayKeys: OrderFigure['keys'] = [['store_domain', (r) => `${r}.store_domain`], ['day', day], ['shop_currency', (r) => `${r}.shop_currency`]];
  const figures: OrderFigure[] = [
    {
      name: 'order',
      table: 'orders_daily',
      keys: [...dayKeys, ['currency', (r) => `${r}.currency`]],
      orders: 'orders',
      sums: [['net_minor', (r) => `${r}.net_minor`], ['net_shop_minor', (r) => `${r}.net_shop_minor`]],
      counts: null,
    },
    { name: 'direct', table: 'orders_daily', keys: [...dayKeys, ['currency', (r) => `${r}.currency`]], orders: 'direct_orders', sums: [], counts: (r) => `${r}.kind = 'direct'` },
    { name: 'channel', table: 'orders_by_channel_daily', keys: [...dayKeys, ['channel', (r) => `${r}.channel`]], orders: 'orders', sums: [['net_shop_minor', (r) => `${r}.net_shop_minor`]], counts: null },
    {
      name: 'product',
      table: 'orders_by_product_daily',
      keys: [['store_domain', (r) => `${r}.store_domain`], ['product_id', (r) => `${r}.product_id`], ['variant_key', (r) => `coalesce(${r}.variant_id, '')`], ['day', day], ['shop_currency', (r) => `${r}.shop_currency`]],
      orders: 'orders',
      sums: [['net_shop_minor', (r) => `${r}.net_shop_minor`]],
      counts: null,
    },
  ];
  // Every column of a kept row but its key starts at zero when the row is made.
  const zeros = (figure: OrderFigure) => {
    const all = figure.table === 'orders_daily' ? ['orders', 'direct_orders', 'net_minor', 'net_shop_minor'] : ['orders', 'net_shop_minor'];
    return all;
  };
  const keyOf = (figure: OrderFigure, r: string) => figure.keys.slice(1).map(([, expression]) => `coalesce(${expression(r)}, '')`).join(` || '|' || `);
  const linesOf = (figure: OrderFigure, r: string) =>
    `(select lines from attributed_order_keys where store_domain = ${r}.store_domain and order_id = ${r}.order_id and figure = '${figure.name}' and key = ${keyOf(figure, r)})`;

  const step = (figure: OrderFigure, r: 'new' | 'old', sign: 1 | -1) => {
    const when = figure.counts ? figure.counts(r) : 'true';
    const countKey = `insert into attributed_order_keys (store_domain, order_id, figure, key, lines)
      select ${r}.store_domain, ${r}.order_id, '${figure.name}', ${keyOf(figure, r)}, ${sign} where ${when}
      on conflict (store_domain, order_id, figure, key) do update set lines = attributed_order_keys.lines + excluded.lines;`;
    // The order counts once: when its first line under the key arrives, or its last one leaves.
    const ordersDelta = sign === 1 ? `case when ${linesOf(figure, r)} = 1 then 1 else 0 end` : `case when ${linesOf(figure, r)} = 0 then -1 else 0 end`;
    const columns = zeros(figure);
    const values = columns.map((column) => {
      if (column === figure.orders) return ordersDelta;
      const summed = figure.sums.find(([name]) => name === column);
      return summed ? `${sign === 1 ? '' : '-'}${summed[1](r)}` : '0';
    });
    const keyColumns = figure.keys.map(([column]) => column);
    const kept = `insert into ${figure.table} (${keyColumns.join(', ')}, ${columns.join(', ')})
      select ${figure.keys.map(([, expression]) => expression(r)).join(', ')}, ${values.join(', ')} where ${when}
      on conflict (${keyColumns.join(', ')}) do update set ${columns.map((column) => `${column} = ${figure.table}.${column} + excluded.${column}`).join(', ')};`;
    const forget = `delete from attributed_order_keys where store_domain = ${r}.store_domain and order_id = ${r}.order_id and figure = '${figure.name}' and lines <= 0;`;
    return sign === 1 ? `${countKey}\n${kept}` : `${countKey}\n${kept}\n${forget}`;
  };
  return {
    arrive: (r) => figures.map((figure) => step(figure, r, 1)).join('\n'),
    leave: (r) => figures.map((figure) => step(figure, r, -1)).join('\n'),
  };
}
