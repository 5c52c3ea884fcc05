// Longer than most files on purpose: every query of the conversion tables (clicks, orders, their
// lines, refunds and attributions) in one place, where their indexes are chosen together.
import { sql } from 'kysely';
import { chunks } from '../core/chunks.ts';
import type { Database, Trx } from '../core/db/database.ts';
import type { AlertClicksTable, OrderAttributionsTable, OrderLinesTable, OrderRefundsTable, OrdersTable } from '../core/db/schema.ts';

export type ClickRow = AlertClicksTable;
export type OrderRow = OrdersTable;
export type OrderLineRow = OrderLinesTable;
export type RefundRow = OrderRefundsTable;
export type AttributionRow = OrderAttributionsTable;

/** An upper bound past every stored time: "until now and later". */
const FAR_FUTURE = '9999-12-31T23:59:59.999Z';

/** One day's attributed orders in one pair of currencies (the store's, the shoppers'). */
export interface OrdersDay {
  day: string;
  shop_currency: string;
  currency: string;
  orders: number;
  direct_orders: number;
  net_minor: number;
  net_shop_minor: number;
}

/** An order's stored facts, everything attribution and refunds need to recompute its revenue. */
export interface StoredOrder {
  order: OrderRow;
  attributions: AttributionRow[];
  refunds: RefundRow[];
}

/** Storage of clicks, orders and attributions; the only code that touches those tables. */
export class ConversionRepository {
  constructor(private readonly database: Database) {}

  /** The first click on an alert; false when it was clicked before. */
  async recordClick(row: ClickRow): Promise<boolean> {
    const result = await this.database.writeStatement((db) =>
      db.insertInto('alert_clicks').values(row).onConflict((oc) => oc.doNothing()).executeTakeFirst(),
    );
    return Number(result.numInsertedOrUpdatedRows ?? 0n) === 1;
  }

  async clicksOf(alertIds: string[]): Promise<Map<string, string>> {
    const clicks = new Map<string, string>();
    for (const chunk of chunks(alertIds)) {
      const rows = await this.database.db.selectFrom('alert_clicks').select(['notification_id', 'clicked_at']).where('notification_id', 'in', chunk).execute();
      for (const row of rows) clicks.set(row.notification_id, row.clicked_at);
    }
    return clicks;
  }

  /**
   * An order, its lines and their attributions in one transaction. False when the order was
   * recorded before (a webhook delivered twice): nothing is written again.
   */
  async insertOrder(order: OrderRow, lines: OrderLineRow[], attributions: AttributionRow[]): Promise<boolean> {
    return this.database.write(async (trx) => {
      const inserted = await trx.insertInto('orders').values(order).onConflict((oc) => oc.doNothing()).executeTakeFirst();
      if (Number(inserted.numInsertedOrUpdatedRows ?? 0n) !== 1) return false;
      for (const chunk of chunks(lines)) await trx.insertInto('order_lines').values(chunk).execute();
      for (const chunk of chunks(attributions)) await trx.insertInto('order_attributions').values(chunk).execute();
      return true;
    });
  }

  /**
   * Applies a refund or a cancellation: `change` writes it, then `recompute` is handed what the
   * order now holds and returns each attribution's net revenue, written in the same transaction.
   * Undefined when the order is not ours (never recorded: its buyer was never alerted).
   */
  async reviseOrder(
    storeDomain: string,
    orderId: string,
    change: (trx: Trx) => Promise<boolean>,
    recompute: (stored: StoredOrder) => Array<{ lineId: string; net: number; netShop: number }>,
  ): Promise<StoredOrder | undefined> {
    return this.database.write(async (trx) => {
      const order = await trx.selectFrom('orders').selectAll().where('store_domain', '=', storeDomain).where('order_id', '=', orderId).executeTakeFirst();
      if (!order) return undefined;
      if (!(await change(trx))) return undefined;
      // Read again: the change may be to the order itself (a cancellation), which the net depends on.
      const changed = await trx.selectFrom('orders').selectAll().where('store_domain', '=', storeDomain).where('order_id', '=', orderId).executeTakeFirstOrThrow();
      const stored = await readStoredOrder(trx, changed);
      for (const line of recompute(stored)) {
        await trx
          .updateTable('order_attributions')
          .set({ net_minor: line.net, net_shop_minor: line.netShop })
          .where('store_domain', '=', storeDomain)
          .where('order_id', '=', orderId)
          .where('line_id', '=', line.lineId)
          .execute();
      }
      return stored;
    });
  }

  /** Inserts a refund's lines; false when this refund was applied before. */
  static async insertRefund(trx: Trx, rows: RefundRow[]): Promise<boolean> {
    let inserted = 0;
    for (const row of rows) {
      const result = await trx.insertInto('order_refunds').values(row).onConflict((oc) => oc.doNothing()).executeTakeFirst();
      inserted += Number(result.numInsertedOrUpdatedRows ?? 0n);
    }
    return inserted > 0;
  }

  static async markCancelled(trx: Trx, storeDomain: string, orderId: string, at: string): Promise<boolean> {
    const result = await trx
      .updateTable('orders')
      .set({ cancelled_at: at })
      .where('store_domain', '=', storeDomain)
      .where('order_id', '=', orderId)
      .where('cancelled_at', 'is', null)
      .executeTakeFirst();
    return Number(result.numUpdatedRows) > 0;
  }

  /**
   * Of these checks (an address, a product, a time), the keys of those whose address ordered the
   * product (any variant when the check names none) at or after the time, in an order not
   * cancelled: a shopper who bought after the alert gets no reminder.
   */
  async orderedSince(storeDomain: string, checks: Array<{ key: string; emailKey: string; productId: string; variantId: string | null; since: string }>): Promise<Set<string>> {
    const found = new Set<string>();
    for (const chunk of chunks(checks)) {
      const rows = await this.database.db
        .selectFrom('orders')
        .innerJoin('order_lines', (join) => join.onRef('order_lines.store_domain', '=', 'orders.store_domain').onRef('order_lines.order_id', '=', 'orders.order_id'))
        .select(['orders.email_key', 'orders.placed_at', 'order_lines.product_id', 'order_lines.variant_id'])
        .where('orders.store_domain', '=', storeDomain)
        .where('orders.email_key', 'in', [...new Set(chunk.map((check) => check.emailKey))])
        .where('orders.cancelled_at', 'is', null)
        .execute();
      for (const check of chunk) {
        const bought = rows.some(
          (row) =>
            row.email_key === check.emailKey &&
            row.product_id === check.productId &&
            (check.variantId === null || row.variant_id === check.variantId) &&
            Date.parse(row.placed_at) >= Date.parse(check.since),
        );
        if (bought) found.add(check.key);
      }
    }
    return found;
  }

  async countClicks(storeDomain: string, since: string, until = FAR_FUTURE): Promise<number> {
    const row = await this.database.db
      .selectFrom('alert_clicks')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('store_domain', '=', storeDomain)
      .where('clicked_at', '>=', since)
      .where('clicked_at', '<', until)
      .executeTakeFirstOrThrow();
    return Number(row.n);
  }

  /** Clicks from the UTC day `fromDay` on, per day and channel of the alert (kept in alert_clicks_daily). */
  async clicksDaily(storeDomain: string, fromDay: string): Promise<Array<{ day: string; channel: string; n: number }>> {
    const rows = await this.database.db
      .selectFrom('alert_clicks_daily')
      .select(['day', 'channel', 'n'])
      .where('store_domain', '=', storeDomain)
      .where('day', '>=', fromDay)
      .where('n', '>', 0)
      .execute();
    return rows.map((row) => ({ ...row, n: Number(row.n) }));
  }

  /** Clicks from `fromDay` on for these products, per product and variant (alert_clicks_by_product). */
  async clicksForProducts(storeDomain: string, fromDay: string, productIds: string[]): Promise<Array<{ product_id: string; variant_id: string | null; n: number }>> {
    const out: Array<{ product_id: string; variant_id: string | null; n: number }> = [];
    for (const chunk of chunks([...new Set(productIds)])) {
      const rows = await this.database.db
        .selectFrom('alert_clicks_by_product')
        .select(['product_id', sql<string | null>`nullif(variant_key, '')`.as('variant_id'), (eb) => eb.fn.sum<number>('n').as('n')])
        .where('store_domain', '=', storeDomain)
        .where('product_id', 'in', chunk)
        .where('day', '>=', fromDay)
        .groupBy(['product_id', 'variant_key'])
        .execute();
      for (const row of rows) if (Number(row.n) > 0) out.push({ ...row, n: Number(row.n) });
    }
    return out;
  }

  /** The first `limit` products and variants, in id order, whose alerts were clicked from `fromDay` on. */
  productsClickedSince(storeDomain: string, fromDay: string, limit: number): Promise<Array<{ product_id: string; variant_id: string | null }>> {
    return this.database.db
      .selectFrom('alert_clicks_by_product')
      .select(['product_id', sql<string | null>`nullif(variant_key, '')`.as('variant_id')])
      .where('store_domain', '=', storeDomain)
      .where('day', '>=', fromDay)
      .where('n', '>', 0)
      .groupBy(['product_id', 'variant_key'])
      .orderBy('product_id')
      .orderBy('variant_key')
      .limit(limit)
      .execute();
  }

  /** Attributed orders since `since` by kind: an order counts once, direct when any of its lines is. */
  async ordersByKind(storeDomain: string, since: string, until = FAR_FUTURE): Promise<{ direct: number; assisted: number }> {
    const rows = await this.database.db
      .selectFrom('order_attributions')
      .select(['order_id', sql<number>`max(case when kind = 'direct' then 1 else 0 end)`.as('direct')])
      .where('store_domain', '=', storeDomain)
      .where('placed_at', '>=', since)
      .where('placed_at', '<', until)
      .groupBy('order_id')
      .execute();
    const direct = rows.filter((row) => Number(row.direct) === 1).length;
    return { direct, assisted: rows.length - direct };
  }

  /** Net revenue won back since `since`, per currency: the store's (`shop`) and the shoppers' (`presentment`). */
  async revenue(
    storeDomain: string,
    since: string,
    until = FAR_FUTURE,
  ): Promise<{ shop: Array<{ currency: string; minor: number }>; presentment: Array<{ currency: string; minor: number }> }> {
    const base = this.database.db.selectFrom('order_attributions').where('store_domain', '=', storeDomain).where('placed_at', '>=', since).where('placed_at', '<', until);
    const shop = await base
      .select(['shop_currency as currency', (eb) => eb.fn.sum<number>('net_shop_minor').as('minor')])
      .groupBy('shop_currency')
      .orderBy('shop_currency')
      .execute();
    const presentment = await base.select(['currency', (eb) => eb.fn.sum<number>('net_minor').as('minor')]).groupBy('currency').orderBy('currency').execute();
    const money = (rows: Array<{ currency: string; minor: number | string | null }>) => rows.map((row) => ({ currency: row.currency, minor: Number(row.minor ?? 0) }));
    return { shop: money(shop), presentment: money(presentment) };
  }

  /** Attributed orders (direct ones apart) and net revenue per UTC day of the order and currencies, from `fromDay` on (kept in orders_daily). */
  async ordersDaily(storeDomain: string, fromDay: string): Promise<OrdersDay[]> {
    const rows = await this.database.db
      .selectFrom('orders_daily')
      .select(['day', 'shop_currency', 'currency', 'orders', 'direct_orders', 'net_minor', 'net_shop_minor'])
      .where('store_domain', '=', storeDomain)
      .where('day', '>=', fromDay)
      .where('orders', '>', 0)
      .execute();
    return rows.map((row) => ({ ...row, orders: Number(row.orders), direct_orders: Number(row.direct_orders), net_minor: Number(row.net_minor), net_shop_minor: Number(row.net_shop_minor) }));
  }

  /** Attributed orders and net revenue in the store's currency per channel of the credited alerts, from `fromDay` on (orders_by_channel_daily). */
  async ordersPerChannel(storeDomain: string, fromDay: string): Promise<Array<{ channel: string; shop_currency: string; orders: number; revenue: number }>> {
    const rows = await this.database.db
      .selectFrom('orders_by_channel_daily')
      .select(['channel', 'shop_currency', (eb) => eb.fn.sum<number>('orders').as('orders'), (eb) => eb.fn.sum<number>('net_shop_minor').as('revenue')])
      .where('store_domain', '=', storeDomain)
      .where('day', '>=', fromDay)
      .where('orders', '>', 0)
      .groupBy(['channel', 'shop_currency'])
      .execute();
    return rows.map((row) => ({ ...row, orders: Number(row.orders), revenue: Number(row.revenue ?? 0) }));
  }

  /** Attributed orders and net revenue in the store's currency per product and variant, from `fromDay` on (orders_by_product_daily). */
  async ordersPerProduct(storeDomain: string, fromDay: string): Promise<Array<{ product_id: string; variant_id: string | null; orders: number; currency: string; revenue: number }>> {
    const rows = await this.database.db
      .selectFrom('orders_by_product_daily')
      .select([
        'product_id',
        sql<string | null>`nullif(variant_key, '')`.as('variant_id'),
        'shop_currency as currency',
        (eb) => eb.fn.sum<number>('orders').as('orders'),
        (eb) => eb.fn.sum<number>('net_shop_minor').as('revenue'),
      ])
      .where('store_domain', '=', storeDomain)
      .where('day', '>=', fromDay)
      .where('orders', '>', 0)
      .groupBy(['product_id', 'variant_key', 'shop_currency'])
      .execute();
    return rows.map((row) => ({ ...row, orders: Number(row.orders), revenue: Number(row.revenue ?? 0) }));
  }

  /** The order lines credited to these alerts (order_attributions_by_alert), oldest order first. */
  async attributionsOf(alertIds: string[]): Promise<Array<Pick<AttributionRow, 'notification_id' | 'order_id' | 'kind' | 'placed_at'>>> {
    const rows: Array<Pick<AttributionRow, 'notification_id' | 'order_id' | 'kind' | 'placed_at'>> = [];
    for (const chunk of chunks(alertIds)) {
      rows.push(...(await this.database.db.selectFrom('order_attributions').select(['notification_id', 'order_id', 'kind', 'placed_at']).where('notification_id', 'in', chunk).execute()));
    }
    return rows.sort((a, b) => a.placed_at.localeCompare(b.placed_at));
  }

  /** What one alert led to: its click and the order lines credited to it. */
  async outcomeOf(storeDomain: string, alertId: string): Promise<{ clickedAt: string | null; attributions: AttributionRow[] }> {
    const click = await this.database.db
      .selectFrom('alert_clicks')
      .select('clicked_at')
      .where('notification_id', '=', alertId)
      .where('store_domain', '=', storeDomain)
      .executeTakeFirst();
    const attributions = await this.database.db
      .selectFrom('order_attributions')
      .selectAll()
      .where('notification_id', '=', alertId)
      .where('store_domain', '=', storeDomain)
      .orderBy('placed_at')
      .execute();
    return { clickedAt: click?.clicked_at ?? null, attributions };
  }

  /** One page of the store's attributions in order, after the cursor: exports read it page by page. */
  attributionPage(storeDomain: string, after: { placedAt: string; orderId: string; lineId: string } | undefined, limit: number): Promise<AttributionRow[]> {
    let query = this.database.db.selectFrom('order_attributions').selectAll().where('store_domain', '=', storeDomain);
    if (after) {
      query = query.where((eb) =>
        eb.or([
          eb('placed_at', '>', after.placedAt),
          eb.and([eb('placed_at', '=', after.placedAt), eb('order_id', '>', after.orderId)]),
          eb.and([eb('placed_at', '=', after.placedAt), eb('order_id', '=', after.orderId), eb('line_id', '>', after.lineId)]),
        ]),
      );
    }
    return query.orderBy('placed_at').orderBy('order_id').orderBy('line_id').limit(limit).execute();
  }

  /** customers/redact and its kind: the address's orders, and their lines, refunds and attributions. */
  async eraseCustomer(storeDomain: string, emailKey: string): Promise<number> {
    return this.database.write(async (trx) => {
      const orders = await trx.selectFrom('orders').select('order_id').where('store_domain', '=', storeDomain).where('email_key', '=', emailKey).execute();
      const ids = orders.map((row) => row.order_id);
      for (const chunk of chunks(ids)) {
        for (const table of ['order_attributions', 'order_refunds', 'order_lines', 'orders'] as const) {
          await trx.deleteFrom(table).where('store_domain', '=', storeDomain).where('order_id', 'in', chunk).execute();
        }
      }
      return ids.length;
    });
  }

  async eraseStore(storeDomain: string): Promise<void> {
    await this.database.write(async (trx) => {
      for (const table of ['order_attributions', 'order_refunds', 'order_lines', 'orders', 'alert_clicks'] as const) {
        await trx.deleteFrom(table).where('store_domain', '=', storeDomain).execute();
      }
    });
  }
}

async function readStoredOrder(trx: Trx, order: OrderRow): Promise<StoredOrder> {
  const attributions = await trx
    .selectFrom('order_attributions')
    .selectAll()
    .where('store_domain', '=', order.store_domain)
    .where('order_id', '=', order.order_id)
    .execute();
  const refunds = await trx.selectFrom('order_refunds').selectAll().where('store_domain', '=', order.store_domain).where('order_id', '=', order.order_id).execute();
  return { order, attributions, refunds };
}
