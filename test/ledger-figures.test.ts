/**
 * The figures kept beside the alert ledger and the clicks (`ledger_counts`, `alerts_sent_daily`,
 * `alerts_sent_by_product`, `alert_clicks_daily`, `alert_clicks_by_product`, and the orders'
 * `orders_daily`, `orders_by_channel_daily`, `orders_by_product_daily`; triggers since
 * migrations 0018 and 0019) must equal what counting the rows gives after every kind of change: alerts
 * queued, claimed and sent by the worker, a click, an order of several credited lines, a refund
 * and a cancellation, a status or time changed afterwards, a customer and a store erased. And the performance report read from them must list the products
 * the full count lists, in the same order, with the same figures.
 */
import assert from 'node:assert/strict';
import { sql } from 'kysely';
import { after, before, describe, it } from './fixtures/suites.ts';
import { failOnLeakedHandles } from './fixtures/leaks.ts';
import { dialectSkip, startTestApp, testDialects, type TestApp } from './fixtures/app.ts';
import type { Database } from '../src/core/db/database.ts';
import { utcDay } from '../src/core/db/dialect.ts';
import { ownerCaller } from '../src/dashboard/service.ts';
import type { ProductPerformance } from '../src/conversions/service.ts';
import { ConversionRepository } from '../src/conversions/repository.ts';
import { DispatchRepository } from '../src/dispatch/repository.ts';

failOnLeakedHandles();

const UNLIMITED = { STOREFRONT_LIMIT_PER_HOUR: '1000000' };
const SOURCE = { kind: 'inventory-api', ref: 'agt_figures_test', verified: false } as const;
const DAY_MS = 86_400_000;

let counter = 0;
const unique = () => `${Date.now() % 1_000_000}${++counter}`;

type Row = Record<string, string | number | null>;
const COUNTED = new Set(['n', 'orders', 'direct_orders', 'net_minor', 'net_shop_minor']);
const numbers = (rows: Row[]) => rows.map((row) => Object.fromEntries(Object.entries(row).map(([key, value]) => [key, COUNTED.has(key) ? Number(value) : value])));

/** Each kept table (its non-zero rows) against the same figure counted over its source rows. */
async function assertFiguresMatch(database: Database, step: string): Promise<void> {
  const { db, dialect } = database;
  const sentDay = utcDay(dialect, 'sent_at');
  const clickDay = utcDay(dialect, 'clicked_at');
  const variantKey = sql<string>`coalesce(variant_id, '')`;
  const pairs: Array<[string, Promise<Row[]>, Promise<Row[]>]> = [
    [
      'ledger_counts',
      db.selectFrom('ledger_counts').select(['store_domain', 'status', 'n']).where('n', '<>', 0).orderBy(['store_domain', 'status']).execute(),
      db.selectFrom('notifications').select(['store_domain', 'status', (eb) => eb.fn.countAll<number>().as('n')]).where('status', 'in', ['sent', 'skipped', 'failed']).groupBy(['store_domain', 'status']).orderBy(['store_domain', 'status']).execute(),
    ],
    [
      'alerts_sent_daily',
      db.selectFrom('alerts_sent_daily').select(['store_domain', 'day', 'channel', 'kind', 'n']).where('n', '<>', 0).orderBy(['store_domain', 'day', 'channel', 'kind']).execute(),
      db
        .selectFrom('notifications')
        .select(['store_domain', sentDay.as('day'), 'channel', 'kind', (eb) => eb.fn.countAll<number>().as('n')])
        .where('status', '=', 'sent')
        .where('sent_at', 'is not', null)
        .groupBy(['store_domain', sentDay, 'channel', 'kind'])
        .orderBy(['store_domain', 'day', 'channel', 'kind'])
        .execute(),
    ],
    [
      'alerts_sent_by_product',
      db.selectFrom('alerts_sent_by_product').select(['store_domain', 'product_id', 'variant_key', 'day', 'kind', 'n']).where('n', '<>', 0).orderBy(['store_domain', 'product_id', 'variant_key', 'day', 'kind']).execute(),
      db
        .selectFrom('notifications')
        .select(['store_domain', 'product_id', variantKey.as('variant_key'), sentDay.as('day'), 'kind', (eb) => eb.fn.countAll<number>().as('n')])
        .where('status', '=', 'sent')
        .where('sent_at', 'is not', null)
        .groupBy(['store_domain', 'product_id', variantKey, sentDay, 'kind'])
        .orderBy(['store_domain', 'product_id', 'variant_key', 'day', 'kind'])
        .execute(),
    ],
    [
      'alert_clicks_daily',
      db.selectFrom('alert_clicks_daily').select(['store_domain', 'day', 'channel', 'n']).where('n', '<>', 0).orderBy(['store_domain', 'day', 'channel']).execute(),
      db
        .selectFrom('alert_clicks')
        .select(['store_domain', clickDay.as('day'), 'channel', (eb) => eb.fn.countAll<number>().as('n')])
        .groupBy(['store_domain', clickDay, 'channel'])
        .orderBy(['store_domain', 'day', 'channel'])
        .execute(),
    ],
    [
      'alert_clicks_by_product',
      db.selectFrom('alert_clicks_by_product').select(['store_domain', 'product_id', 'variant_key', 'day', 'n']).where('n', '<>', 0).orderBy(['store_domain', 'product_id', 'variant_key', 'day']).execute(),
      db
        .selectFrom('alert_clicks')
        .select(['store_domain', 'product_id', variantKey.as('variant_key'), clickDay.as('day'), (eb) => eb.fn.countAll<number>().as('n')])
        .groupBy(['store_domain', 'product_id', variantKey, clickDay])
        .orderBy(['store_domain', 'product_id', 'variant_key', 'day'])
        .execute(),
    ],
  ];
  const placedDay = utcDay(dialect, 'placed_at');
  const orders = sql<number>`count(distinct order_id)`;
  const money = (column: 'net_minor' | 'net_shop_minor') => sql<number>`sum(${sql.ref(column)})`;
  pairs.push(
    [
      'orders_daily',
      db.selectFrom('orders_daily').select(['store_domain', 'day', 'shop_currency', 'currency', 'orders', 'direct_orders', 'net_minor', 'net_shop_minor']).where('orders', '<>', 0).orderBy(['store_domain', 'day', 'shop_currency', 'currency']).execute(),
      db
        .selectFrom('order_attributions')
        .select([
          'store_domain',
          placedDay.as('day'),
          'shop_currency',
          'currency',
          orders.as('orders'),
          sql<number>`count(distinct case when kind = 'direct' then order_id end)`.as('direct_orders'),
          money('net_minor').as('net_minor'),
          money('net_shop_minor').as('net_shop_minor'),
        ])
        .groupBy(['store_domain', placedDay, 'shop_currency', 'currency'])
        .orderBy(['store_domain', 'day', 'shop_currency', 'currency'])
        .execute(),
    ],
    [
      'orders_by_channel_daily',
      db.selectFrom('orders_by_channel_daily').select(['store_domain', 'day', 'shop_currency', 'channel', 'orders', 'net_shop_minor']).where('orders', '<>', 0).orderBy(['store_domain', 'day', 'shop_currency', 'channel']).execute(),
      db
        .selectFrom('order_attributions')
        .select(['store_domain', placedDay.as('day'), 'shop_currency', 'channel', orders.as('orders'), money('net_shop_minor').as('net_shop_minor')])
        .groupBy(['store_domain', placedDay, 'shop_currency', 'channel'])
        .orderBy(['store_domain', 'day', 'shop_currency', 'channel'])
        .execute(),
    ],
    [
      'orders_by_product_daily',
      db.selectFrom('orders_by_product_daily').select(['store_domain', 'product_id', 'variant_key', 'day', 'shop_currency', 'orders', 'net_shop_minor']).where('orders', '<>', 0).orderBy(['store_domain', 'product_id', 'variant_key', 'day', 'shop_currency']).execute(),
      db
        .selectFrom('order_attributions')
        .select(['store_domain', 'product_id', variantKey.as('variant_key'), placedDay.as('day'), 'shop_currency', orders.as('orders'), money('net_shop_minor').as('net_shop_minor')])
        .groupBy(['store_domain', 'product_id', variantKey, placedDay, 'shop_currency'])
        .orderBy(['store_domain', 'product_id', 'variant_key', 'day', 'shop_currency'])
        .execute(),
    ],
  );
  for (const [table, kept, counted] of pairs) {
    assert.deepEqual(numbers(await kept), numbers(await counted), `${step}: ${table} equals the count over its rows`);
  }
  const stale = await db.selectFrom('attributed_order_keys').select('order_id').where('lines', '<=', 0).execute();
  assert.deepEqual(stale, [], `${step}: no order is kept under a key none of its lines has`);
}

/** A deterministic stream of numbers in [0, 1), so a failure can be replayed. */
function random(seed: number): () => number {
  let state = seed;
  return () => {
    state = (state * 1_103_515_245 + 12_345) % 2_147_483_648;
    return state / 2_147_483_648;
  };
}

interface Seeded {
  shop: string;
  now: Date;
}

/**
 * A store of `products` products, each with one variant key (so the report's order has no ties
 * its sort leaves open): shoppers waiting, alerts, reminders and texts sent inside and outside the
 * 30-day window, clicks, and attributed orders, as the rows the features write.
 */
async function seedStore(t: TestApp, seed: number, products: number, shares: { revenue: number; waiting: number }): Promise<Seeded> {
  const shop = `figures-${unique()}.myshopify.com`;
  await t.app.restock.stores.createStore(shop, `owner-${unique()}@example.com`);
  const next = random(seed);
  const now = new Date(Date.UTC(2026, 10, 24, 12));
  const at = (daysAgo: number) => new Date(now.getTime() - daysAgo * DAY_MS - Math.floor(next() * 3_600_000)).toISOString();
  const subscriptions: Row[] = [];
  const ledger: Row[] = [];
  const clicks: Row[] = [];
  const attributions: Row[] = [];
  for (let p = 0; p < products; p++) {
    const productId = `gid://shopify/Product/${String(p).padStart(6, '0')}`;
    const variantId = next() < 0.3 ? null : `gid://shopify/ProductVariant/${String(p).padStart(6, '0')}`;
    const waiting = next() < shares.waiting ? 1 + Math.floor(next() * 6) : 0;
    for (let w = 0; w < waiting; w++) {
      const created = at(40);
      subscriptions.push({ id: `sub_${shop}_${p}_${w}`, product_id: productId, variant_id: variantId, email: `w${p}-${w}@example.com`, email_key: `w${p}-${w}@example.com`, status: 'active', store_domain: shop, created_at: created, updated_at: created, locale: 'en', third_party: 0 });
    }
    const sends = Math.floor(next() * 5);
    for (let s = 0; s < sends; s++) {
      const daysAgo = Math.floor(next() * 45);
      const status = next() < 0.85 ? 'sent' : next() < 0.5 ? 'failed' : 'skipped';
      const kind = next() < 0.8 ? 'alert' : 'reminder';
      const channel = next() < 0.8 ? 'email' : 'sms';
      const id = `ntf_${shop}_${p}_${s}`;
      const time = at(daysAgo);
      ledger.push({
        id, restock_id: `rst_${shop}_${p}`, subscription_id: `sub_x_${shop}_${p}_${s}`, store_domain: shop, email: `s${p}-${s}@example.com`, email_key: `s${p}-${s}@example.com`,
        product_id: productId, variant_id: variantId, batch: 1, position: s, status, reason: 'seeded', outcome: null, attempts: 1, next_attempt_at: time,
        created_at: time, sent_at: status === 'sent' ? time : null, locale: 'en', held_by_plan: 0, third_party: 0, kind, channel,
      });
      if (status === 'sent' && next() < 0.4) clicks.push({ notification_id: id, store_domain: shop, product_id: productId, variant_id: variantId, clicked_at: at(Math.max(0, daysAgo - 1)), channel });
      if (status === 'sent' && kind === 'alert' && next() < shares.revenue) {
        const amount = 500 + Math.floor(next() * 20) * 250;
        // Some orders have several credited lines (products, channels, kinds): each counts once per figure.
        const previous = attributions.at(-1);
        const joins = previous !== undefined && next() < 0.4;
        attributions.push({
          store_domain: shop, order_id: joins ? previous.order_id! : `ord_${p}_${s}`, line_id: `line_${p}_${s}`, notification_id: id, channel, product_id: productId, variant_id: variantId,
          kind: next() < 0.7 ? 'direct' : 'assisted', placed_at: joins ? previous.placed_at! : at(daysAgo), amount_minor: amount, currency: joins ? previous.currency! : next() < 0.8 ? 'EUR' : 'USD',
          shop_amount_minor: amount, shop_currency: 'EUR', net_minor: amount, net_shop_minor: next() < 0.1 ? 0 : amount,
        });
      }
    }
  }
  await t.database.write(async (trx) => {
    for (const [table, rows] of [['subscriptions', subscriptions], ['notifications', ledger], ['alert_clicks', clicks], ['order_attributions', attributions]] as const) {
      for (let i = 0; i < rows.length; i += 200) await trx.insertInto(table).values(rows.slice(i, i + 200) as never).execute();
    }
  });
  return { shop, now };
}

/** The report's products as counting every row of the window gives them (what it read before the kept figures). */
async function countedProducts(database: Database, shop: string, since: string): Promise<Array<Omit<ProductPerformance, 'title'>>> {
  const { db } = database;
  const byKey = new Map<string, Omit<ProductPerformance, 'title'>>();
  const entry = (productId: string, variantId: string | null) => {
    const key = `${productId}\n${variantId ?? ''}`;
    if (!byKey.has(key)) byKey.set(key, { productId, variantId, waiting: 0, sent: 0, clicked: 0, ordered: 0, revenue: [] });
    return byKey.get(key)!;
  };
  const waiting = await db.selectFrom('subscriptions').select(['product_id', 'variant_id', (eb) => eb.fn.countAll<number>().as('n')]).where('store_domain', '=', shop).where('status', '=', 'active').groupBy(['product_id', 'variant_id']).execute();
  for (const row of waiting) entry(row.product_id, row.variant_id).waiting += Number(row.n);
  const sent = await db.selectFrom('notifications').select(['product_id', 'variant_id', (eb) => eb.fn.countAll<number>().as('n')]).where('store_domain', '=', shop).where('status', '=', 'sent').where('kind', '=', 'alert').where('sent_at', '>=', since).groupBy(['product_id', 'variant_id']).execute();
  for (const row of sent) entry(row.product_id, row.variant_id).sent += Number(row.n);
  const clicks = await db.selectFrom('alert_clicks').select(['product_id', 'variant_id', (eb) => eb.fn.countAll<number>().as('n')]).where('store_domain', '=', shop).where('clicked_at', '>=', since).groupBy(['product_id', 'variant_id']).execute();
  for (const row of clicks) entry(row.product_id, row.variant_id).clicked += Number(row.n);
  const orders = await db
    .selectFrom('order_attributions')
    .select(['product_id', 'variant_id', 'shop_currency', sql<number>`count(distinct order_id)`.as('orders'), (eb) => eb.fn.sum<number>('net_shop_minor').as('revenue')])
    .where('store_domain', '=', shop)
    .where('placed_at', '>=', since)
    .groupBy(['product_id', 'variant_id', 'shop_currency'])
    .execute();
  for (const row of orders) {
    const product = entry(row.product_id, row.variant_id);
    product.ordered += Number(row.orders);
    product.revenue.push({ currency: row.shop_currency, minor: Number(row.revenue) });
  }
  const revenueOf = (product: Omit<ProductPerformance, 'title'>) => product.revenue.reduce((sum, money) => sum + money.minor, 0);
  return [...byKey.values()].sort((a, b) => revenueOf(b) - revenueOf(a) || b.waiting - a.waiting || a.productId.localeCompare(b.productId)).slice(0, 200);
}

/** The order figures counted over every line of the window, as the digest still reads them. */
function conversionsStore(t: TestApp): ConversionRepository {
  return new ConversionRepository(t.database);
}

async function assertReportCounts(t: TestApp, { shop, now }: Seeded): Promise<void> {
  const report = await t.app.restock.conversions.performance(ownerCaller(shop), shop, 30, now);
  const { db } = t.database;
  const expected = await countedProducts(t.database, shop, report.from);
  assert.deepEqual(report.products.map(({ title: _title, ...rest }) => rest), expected, 'the products shown, their order and their figures');
  const sent = await db.selectFrom('notifications').select(['kind', 'channel', (eb) => eb.fn.countAll<number>().as('n')]).where('store_domain', '=', shop).where('status', '=', 'sent').where('sent_at', '>=', report.from).groupBy(['kind', 'channel']).execute();
  const total = (kind: string, channel?: string) => sent.filter((row) => row.kind === kind && (!channel || row.channel === channel)).reduce((sum, row) => sum + Number(row.n), 0);
  assert.equal(report.sent, total('alert'), 'alerts sent in the window');
  assert.equal(report.reminders, total('reminder'), 'reminders sent in the window');
  assert.equal(report.byChannel.find((row) => row.channel === 'sms')?.sent, total('alert', 'sms'), 'texts sent in the window');
  const clicks = await db.selectFrom('alert_clicks').select((eb) => eb.fn.countAll<number>().as('n')).where('store_domain', '=', shop).where('clicked_at', '>=', report.from).executeTakeFirstOrThrow();
  assert.equal(report.clicks, Number(clicks.n), 'clicks in the window');
  assert.equal(report.byDay.reduce((sum, day) => sum + day.sent, 0), report.sent, 'the days add up to the alerts sent');
  assert.equal(report.byDay.reduce((sum, day) => sum + day.clicks, 0), report.clicks, 'the days add up to the clicks');
  const [kinds, money] = await Promise.all([conversionsStore(t).ordersByKind(shop, report.from), conversionsStore(t).revenue(shop, report.from)]);
  assert.deepEqual(report.orders, { ...kinds, total: kinds.direct + kinds.assisted }, 'orders credited in the window, direct and assisted');
  assert.deepEqual({ shop: report.revenue, presentment: report.revenueByPresentmentCurrency }, money, 'revenue won back in the window, in both currencies');
  assert.equal(report.byDay.reduce((sum, day) => sum + day.orders, 0), report.orders.total, 'the days add up to the orders');
  const waiting = await db.selectFrom('subscriptions').select((eb) => eb.fn.countAll<number>().as('n')).where('store_domain', '=', shop).where('status', '=', 'active').executeTakeFirstOrThrow();
  assert.equal(report.waiting, Number(waiting.n), 'everyone waiting, whatever the number of products');
}

for (const dialect of testDialects()) {
  describe(`figures kept beside the ledger on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    let t: TestApp;
    before(async () => {
      t = await startTestApp(dialect, UNLIMITED);
    });
    after(() => t.close());

    it('stay equal to the counts through sends, clicks, later changes and erasure', async () => {
      const shop = `figures-${unique()}.myshopify.com`;
      const other = `figures-${unique()}.myshopify.com`;
      const mug = `gid://shopify/Product/${unique()}`;
      const large = `gid://shopify/ProductVariant/${unique()}`;
      for (const domain of [shop, other]) {
        await t.app.restock.stores.createStore(domain, `owner-${unique()}@example.com`);
        for (let i = 0; i < 3; i++) {
          const res = await t.app.inject({ method: 'POST', url: '/storefront/v1/subscribe', headers: { 'content-type': 'application/json' }, payload: JSON.stringify({ shop: domain, productId: mug, variantId: i === 2 ? null : large, email: `shopper-${i}@example.com` }) });
          assert.equal(res.statusCode, 201, res.body);
        }
      }
      await assertFiguresMatch(t.database, 'before any alert');

      for (const domain of [shop, other]) await t.app.restock.inventory.reportStock(domain, [{ productId: mug, variantId: large, available: 10, productTitle: 'Mug', variantTitle: 'Large' }], SOURCE);
      await t.app.restock.worker.runUntilIdle();
      const alerts = await t.database.db.selectFrom('notifications').select(['id', 'status']).where('store_domain', '=', shop).orderBy('id').execute();
      assert.equal(alerts.length, 3, 'the three shoppers were alerted');
      assert.ok(alerts.every((row) => row.status === 'sent'), 'and every alert is sent');
      await assertFiguresMatch(t.database, 'after the worker queued, claimed and sent');

      const link = new URL(t.app.restock.conversions.clickUrl(shop, alerts[0]!.id));
      const click = await t.app.inject({ method: 'GET', url: link.pathname, headers: { 'user-agent': 'Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 Safari/605.1.15' } });
      assert.equal(click.statusCode, 302, click.body);
      assert.equal(Number((await t.database.db.selectFrom('alert_clicks').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow()).n), 1, 'the click was recorded');
      await assertFiguresMatch(t.database, 'after a click');

      // An order by an alerted shopper, two of its lines for the variant, then a refund and a cancellation.
      const money = (minor: number) => ({ minor, currency: 'EUR' });
      const line = (lineId: string, minor: number) => ({ lineId, productId: mug, variantId: large, quantity: 1, amount: money(minor), shopAmount: money(minor) });
      const orderId = `ord_${unique()}`;
      await t.app.restock.conversions.recordOrder({ storeDomain: shop, orderId, email: 'shopper-1@example.com', placedAt: new Date().toISOString(), lines: [line('l1', 2500), line('l2', 1500)], source: 'api' });
      assert.equal(Number((await t.database.db.selectFrom('order_attributions').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow()).n), 2, 'both lines were credited');
      await assertFiguresMatch(t.database, 'after an order of two credited lines');
      await t.app.restock.conversions.recordRefund({ storeDomain: shop, orderId, refundId: `re_${unique()}`, refundedAt: new Date().toISOString(), lines: [{ lineId: 'l2', quantity: 1, amount: money(1500), shopAmount: money(1500) }] });
      await assertFiguresMatch(t.database, 'after a refund of one line');
      await t.app.restock.conversions.recordCancellation({ storeDomain: shop, orderId, cancelledAt: new Date().toISOString() });
      const nets = await t.database.db.selectFrom('order_attributions').select(['net_minor', 'net_shop_minor']).where('order_id', '=', orderId).execute();
      assert.deepEqual(nets.map((row) => [Number(row.net_minor), Number(row.net_shop_minor)]), [[0, 0], [0, 0]], 'a cancelled order, refunded in part before, is worth nothing');
      await assertFiguresMatch(t.database, 'after the order was cancelled');

      // Changes no path of the service makes today, each moving a row between kept figures.
      await t.database.write((trx) => trx.updateTable('notifications').set({ status: 'failed' }).where('id', '=', alerts[1]!.id).execute());
      await t.database.write((trx) => trx.updateTable('notifications').set({ sent_at: '2026-01-02T03:04:05.000Z', channel: 'sms' }).where('id', '=', alerts[2]!.id).execute());
      await t.database.write((trx) => trx.updateTable('alert_clicks').set({ clicked_at: '2026-01-03T00:00:00.000Z', product_id: 'gid://shopify/Product/elsewhere' }).execute());
      await t.database.write((trx) => trx.updateTable('notifications').set({ status: 'queued', sent_at: null }).where('store_domain', '=', other).execute());
      await assertFiguresMatch(t.database, 'after statuses, times, channels and products changed');
      for (const domain of [shop, other]) {
        const counted = await t.database.db.selectFrom('notifications').select(['status', (eb) => eb.fn.countAll<number>().as('n')]).where('store_domain', '=', domain).groupBy('status').execute();
        assert.deepEqual(
          await new DispatchRepository(t.database).countsByStatus(domain),
          Object.fromEntries(counted.map((row) => [row.status, Number(row.n)])),
          'the ledger per status, queued alerts included, is what counting it gives',
        );
      }

      await t.app.restock.dispatch.eraseCustomer(shop, 'SHOPPER-0@example.com');
      await t.app.restock.conversions.eraseCustomer(shop, 'shopper-0@example.com');
      await assertFiguresMatch(t.database, 'after a customer was erased');
      await t.app.restock.dispatch.eraseStore(other);
      await assertFiguresMatch(t.database, 'after a store was erased');
    });

    it('give the report the products and figures the full count gives, when few products have revenue or shoppers waiting', async () => {
      await assertReportCounts(t, await seedStore(t, 7, 320, { revenue: 0.08, waiting: 0.2 }));
    });

    it('give the report the products and figures the full count gives, when more products have shoppers waiting than it shows', async () => {
      await assertReportCounts(t, await seedStore(t, 11, 320, { revenue: 0.15, waiting: 0.9 }));
    });
  });
}
