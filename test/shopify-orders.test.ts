import assert from 'node:assert/strict';
import fc from 'fast-check';
import { fromMinorUnits, toMinorUnits } from '../src/conversions/money.ts';
import type { CancellationReport, OrderReport, OrderSink, RefundReport } from '../src/conversions/reports.ts';
import { buildShopify } from '../src/shopify/feature.ts';
import {
  cancellationReport,
  orderCancelledPayload as orderCancelledSchema,
  orderCreatePayload as orderCreateSchema,
  orderReport,
  refundCreatePayload as refundCreateSchema,
  refundReport,
} from '../src/shopify/order-payloads.ts';
import { storefrontService } from '../src/storefront/feature.ts';
import { dialectSkip, startTestApp, testDialects, type TestApp } from './fixtures/app.ts';
import { failOnLeakedHandles } from './fixtures/leaks.ts';
import { startShopifyAdmin, type ShopifyAdminStandIn } from './fixtures/shopify-admin.ts';
import { deliverWebhook, installByTokenExchange, shopifyTestApp } from './fixtures/shopify-app.ts';
import {
  fullOrderCreatePayload,
  fullRefundCreatePayload,
  orderCancelledPayload,
  orderCreatePayload,
  refundCreatePayload,
  type OrderInput,
} from './fixtures/shopify-orders.ts';
import { after, before, describe, it } from './fixtures/suites.ts';

failOnLeakedHandles();

const SHOP = 'orders-test.myshopify.com';
let counter = 0;
const newId = () => Number(`${Date.now() % 1_000_000}${String(++counter).padStart(4, '0')}`);

/** An order of one product in the store's currency: two of a variant at 19.99 with 5.00 off the line. */
function euroOrder(overrides: Partial<OrderInput> = {}): OrderInput {
  return {
    id: 5_940_139_491_234,
    email: 'shopper@example.com',
    createdAt: '2026-03-01T09:30:00-05:00',
    currency: 'EUR',
    lines: [{ id: 14_236_581_000_001, productId: 8_001, variantId: 9_001, quantity: 2, price: '19.99', discount: '5.00' }],
    ...overrides,
  };
}

describe('toMinorUnits', () => {
  const accepted: Array<[string, string, number]> = [
    ['19.99', 'EUR', 1999],
    ['0.5', 'EUR', 50],
    ['0', 'EUR', 0],
    ['1500', 'JPY', 1500],
    ['1500.00', 'JPY', 1500],
    ['12.345', 'KWD', 12345],
    ['0.001', 'KWD', 1],
    ['7', 'KWD', 7000],
    ['90071992547409.91', 'USD', Number.MAX_SAFE_INTEGER],
  ];
  for (const [decimal, currency, minor] of accepted) {
    it(`reads ${decimal} ${currency} as ${minor}`, () => assert.equal(toMinorUnits(decimal, currency), minor));
  }

  const refused: Array<[string, string, RegExp]> = [
    ['19.999', 'EUR', /more decimals than EUR has \(2\)/],
    ['1500.5', 'JPY', /more decimals than JPY has \(0\)/],
    ['1.2345', 'KWD', /more decimals than KWD has \(3\)/],
    ['', 'EUR', /Not a decimal amount/],
    ['1e3', 'EUR', /Not a decimal amount/],
    ['-1.00', 'EUR', /Not a decimal amount/],
    [' 1.00', 'EUR', /Not a decimal amount/],
    ['1,00', 'EUR', /Not a decimal amount/],
    ['.5', 'EUR', /Not a decimal amount/],
    ['5.', 'EUR', /Not a decimal amount/],
    ['1.00', 'eur', /Not an ISO 4217 currency code/],
    ['1.00', 'EURO', /Not an ISO 4217 currency code/],
    ['90071992547409.92', 'USD', /too large/],
  ];
  for (const [decimal, currency, message] of refused) {
    it(`refuses ${JSON.stringify(decimal)} ${currency}`, () => assert.throws(() => toMinorUnits(decimal, currency), message));
  }

  it('reads back every amount it writes, exactly, in currencies of 0, 2 and 3 decimals', () => {
    let checked = 0;
    fc.assert(
      fc.property(fc.constantFrom('EUR', 'USD', 'JPY', 'KWD', 'BHD'), fc.maxSafeNat(), fc.nat({ max: 3 }), (currency, minor, padding) => {
        const decimal = fromMinorUnits(minor, currency);
        assert.equal(toMinorUnits(decimal, currency), minor);
        // Zeros past the currency's digits do not change the value.
        const padded = decimal.includes('.') ? `${decimal}${'0'.repeat(padding)}` : padding > 0 ? `${decimal}.${'0'.repeat(padding)}` : decimal;
        assert.equal(toMinorUnits(padded, currency), minor);
        checked++;
      }),
      { numRuns: 500 },
    );
    assert.equal(checked, 500);
  });
});

describe('order payloads into reports', () => {
  it('orders/create: each line at its price times its quantity less its discounts, in both currencies', () => {
    const payload = orderCreatePayload(euroOrder({ presentmentCurrency: 'JPY', lines: [{ id: 11, productId: 8_001, variantId: 9_001, quantity: 2, price: '19.99', presentmentPrice: '3200', discount: '5.00', presentmentDiscount: '800' }] }));
    const report = orderReport(SHOP, orderCreateSchema.parse(payload));
    assert.deepEqual(report, {
      storeDomain: SHOP,
      orderId: '5940139491234',
      email: 'shopper@example.com',
      placedAt: '2026-03-01T14:30:00.000Z',
      lines: [
        {
          lineId: '11',
          productId: 'gid://shopify/Product/8001',
          variantId: 'gid://shopify/ProductVariant/9001',
          quantity: 2,
          amount: { minor: 5600, currency: 'JPY' },
          shopAmount: { minor: 3498, currency: 'EUR' },
        },
      ],
      source: 'shopify',
    } satisfies OrderReport);
  });

  it('counts yen without decimals and dinars with three', () => {
    const yen = orderReport(SHOP, orderCreateSchema.parse(orderCreatePayload(euroOrder({ currency: 'JPY', lines: [{ id: 1, productId: 1, variantId: 2, quantity: 3, price: '1500' }] }))));
    assert.deepEqual(yen.lines[0]!.amount, { minor: 4500, currency: 'JPY' });
    const dinars = orderReport(SHOP, orderCreateSchema.parse(orderCreatePayload(euroOrder({ currency: 'KWD', lines: [{ id: 1, productId: 1, variantId: 2, quantity: 1, price: '12.345', discount: '0.345' }] }))));
    assert.deepEqual(dinars.lines[0]!.shopAmount, { minor: 12000, currency: 'KWD' });
  });

  it('subtracts every discount allocated to a line', () => {
    const payload = orderCreatePayload(euroOrder());
    const line = (payload.line_items as Array<{ discount_allocations: unknown[] }>)[0]!;
    line.discount_allocations.push({ amount: '1.50', amount_set: { shop_money: { amount: '1.50', currency_code: 'EUR' }, presentment_money: { amount: '1.50', currency_code: 'EUR' } }, discount_application_index: 1 });
    assert.equal(orderReport(SHOP, orderCreateSchema.parse(payload)).lines[0]!.amount.minor, 3998 - 500 - 150);
  });

  it('names products and variants by their global ids, as subscriptions do, and leaves out lines without a product', () => {
    const payload = orderCreatePayload(
      euroOrder({
        lines: [
          { id: 1, productId: 8_001, variantId: null, quantity: 1, price: '10.00' },
          { id: 2, productId: null, variantId: null, quantity: 1, price: '19.99' },
        ],
      }),
    );
    const report = orderReport(SHOP, orderCreateSchema.parse(payload));
    assert.deepEqual(
      report.lines.map((line) => [line.lineId, line.productId, line.variantId]),
      [['1', 'gid://shopify/Product/8001', null]],
    );
  });

  it('an order without an address is attributed to nobody; contact_email stands in for an empty email', () => {
    assert.equal(orderReport(SHOP, orderCreateSchema.parse(orderCreatePayload(euroOrder({ email: null })))).email, null);
    const payload = { ...orderCreatePayload(euroOrder()), email: '', contact_email: 'contact@example.com' };
    assert.equal(orderReport(SHOP, orderCreateSchema.parse(payload)).email, 'contact@example.com');
    assert.equal(orderReport(SHOP, orderCreateSchema.parse({ ...payload, contact_email: '  ' })).email, null);
  });

  it('reads the whole payload as the trimmed one: fields Shopify adds are ignored', () => {
    const order = euroOrder();
    assert.deepEqual(orderReport(SHOP, orderCreateSchema.parse(fullOrderCreatePayload(order))), orderReport(SHOP, orderCreateSchema.parse(orderCreatePayload(order))));
    const refund = { id: 77, orderId: order.id, createdAt: '2026-03-02T10:00:00+01:00', currency: 'EUR', lines: [{ lineItemId: 14_236_581_000_001, quantity: 1, subtotal: '17.49' }] };
    assert.deepEqual(refundReport(SHOP, refundCreateSchema.parse(fullRefundCreatePayload(refund))), refundReport(SHOP, refundCreateSchema.parse(refundCreatePayload(refund))));
  });

  it('refunds/create: each refunded line with its quantity and subtotal, naming the order and line as orders/create did', () => {
    const payload = refundCreatePayload({ id: 890_088_186, orderId: 5_940_139_491_234, createdAt: '2026-03-02T10:00:00+01:00', currency: 'KWD', presentmentCurrency: 'EUR', lines: [{ lineItemId: 11, quantity: 1, subtotal: '5.125', presentmentSubtotal: '15.50' }] });
    assert.deepEqual(refundReport(SHOP, refundCreateSchema.parse(payload)), {
      storeDomain: SHOP,
      orderId: '5940139491234',
      refundId: '890088186',
      refundedAt: '2026-03-02T09:00:00.000Z',
      lines: [{ lineId: '11', quantity: 1, amount: { minor: 1550, currency: 'EUR' }, shopAmount: { minor: 5125, currency: 'KWD' } }],
    } satisfies RefundReport);
  });

  it('orders/cancelled: the order and when', () => {
    const payload = orderCancelledPayload({ id: 5_940_139_491_234, cancelledAt: '2026-03-03T08:00:00-05:00' });
    assert.deepEqual(Object.keys(payload).sort(), ['cancelled_at', 'id'], 'Shopify sends only what the subscription asks');
    assert.deepEqual(cancellationReport(SHOP, orderCancelledSchema.parse(payload)), { storeDomain: SHOP, orderId: '5940139491234', cancelledAt: '2026-03-03T13:00:00.000Z' } satisfies CancellationReport);
  });

  it('sends no name, address or phone of the buyer past the subscription', () => {
    const text = JSON.stringify(orderCreatePayload(euroOrder()));
    for (const kept of ['Jane', 'Shopper', 'Elm', '6135551111', 'browser_ip', 'customer']) assert.ok(!text.includes(kept), `${kept} is not sent`);
  });

  it('refuses ids JSON cannot hold exactly, and amounts that do not add up', () => {
    assert.equal(orderCreateSchema.safeParse({ ...orderCreatePayload(euroOrder()), id: 2 ** 53 + 2 }).success, false);
    const overDiscounted = orderCreatePayload(euroOrder({ lines: [{ id: 1, productId: 1, variantId: 2, quantity: 1, price: '5.00', discount: '6.00' }] }));
    assert.throws(() => orderReport(SHOP, orderCreateSchema.parse(overDiscounted)), /exceed/);
    const otherCurrency = orderCreatePayload(euroOrder({ presentmentCurrency: 'USD' }));
    (otherCurrency as { presentment_currency: string }).presentment_currency = 'GBP';
    assert.throws(() => orderReport(SHOP, orderCreateSchema.parse(otherCurrency)), /in USD where the order's currency is GBP/);
  });
});

/** An OrderSink that keeps what it is told, for the worker to be watched through. */
class RecordingOrderSink implements OrderSink {
  orders: OrderReport[] = [];
  refunds: RefundReport[] = [];
  cancellations: CancellationReport[] = [];
  erasedCustomers: Array<[string, string]> = [];
  erasedStores: string[] = [];
  failNext: Error | undefined;

  async recordOrder(report: OrderReport) {
    const failure = this.failNext;
    this.failNext = undefined;
    if (failure) throw failure;
    this.orders.push(report);
  }
  async recordRefund(report: RefundReport) {
    this.refunds.push(report);
  }
  async recordCancellation(report: CancellationReport) {
    this.cancellations.push(report);
  }
  async eraseCustomer(storeDomain: string, email: string) {
    this.erasedCustomers.push([storeDomain, email]);
    return 0;
  }
  async eraseStore(storeDomain: string) {
    this.erasedStores.push(storeDomain);
  }
}

const { apiKey: API_KEY, apiSecret: API_SECRET, scopes: SCOPES, env: ENV } = shopifyTestApp('restock-orders-test', 'read_products,read_inventory,read_orders');

for (const dialect of testDialects()) {
  describe(`order webhooks through the app on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    let t: TestApp;
    let shopify: ShopifyAdminStandIn;
    let sink: RecordingOrderSink;
    let runQueue: () => Promise<void>;
    before(async () => {
      shopify = await startShopifyAdmin({ apiKey: API_KEY, apiSecret: API_SECRET, scopes: SCOPES });
      t = await startTestApp(dialect, ENV);
      sink = new RecordingOrderSink();
      // The app's own worker has no order sink until the conversions service is wired in; this
      // one is the Shopify feature as the app builds it, with the recording sink.
      const { stores, inventory, alerts, dispatch, billing } = t.app.restock;
      const mail = { kind: 'outbox' as const, send: async () => {}, close: async () => {} };
      const storefront = storefrontService({ stores, inventory, alerts });
      const feature = buildShopify({ config: t.config, database: t.database, log: t.app.log, mail, stores, inventory, alerts, dispatch, billing, storefront, orders: sink });
      const queue = feature.jobs.find((job) => job.name === 'shopify-webhooks')!;
      runQueue = async () => {
        while ((await queue.run()) > 0);
      };
    });
    after(async () => {
      await t.close();
      await shopify.close();
    });

    const newShop = () => `orders-${newId()}.myshopify.com`;
    const eventsOf = (shop: string) => t.database.db.selectFrom('shopify_webhook_events').selectAll().where('store_domain', '=', shop).orderBy('received_at').execute();

    async function installedShop(): Promise<string> {
      const shop = newShop();
      await installByTokenExchange(t, shopify, shop);
      return shop;
    }

    async function deliver(shop: string, topic: string, payload: unknown) {
      const res = await deliverWebhook(t, API_SECRET, { topic, shop, payload });
      assert.equal(res.statusCode, 200, res.body);
      assert.equal(res.json().status, 'queued');
    }

    it('a signed orders/create reaches the order sink, and its payload is dropped once handled', async () => {
      const shop = await installedShop();
      const order = euroOrder({ id: newId() });
      await deliver(shop, 'orders/create', orderCreatePayload(order));
      await runQueue();
      const recorded = sink.orders.filter((report) => report.storeDomain === shop);
      assert.deepEqual(recorded, [orderReport(shop, orderCreateSchema.parse(orderCreatePayload(order)))]);
      assert.equal(recorded[0]!.lines[0]!.shopAmount.minor, 3498);
      const [event] = await eventsOf(shop);
      assert.equal(event!.status, 'done');
      assert.equal(event!.payload, '{}', 'the buyer’s address is not kept in the queue');
    });

    it('refunds/create and orders/cancelled reach the sink, naming the order as orders/create did', async () => {
      const shop = await installedShop();
      const orderId = newId();
      await deliver(shop, 'refunds/create', refundCreatePayload({ id: newId(), orderId, createdAt: '2026-03-02T10:00:00Z', currency: 'JPY', lines: [{ lineItemId: 31, quantity: 2, subtotal: '3000' }] }));
      await deliver(shop, 'orders/cancelled', orderCancelledPayload({ id: orderId, cancelledAt: '2026-03-03T10:00:00Z' }));
      await runQueue();
      const refund = sink.refunds.find((report) => report.storeDomain === shop);
      assert.deepEqual(refund?.lines, [{ lineId: '31', quantity: 2, amount: { minor: 3000, currency: 'JPY' }, shopAmount: { minor: 3000, currency: 'JPY' } }]);
      assert.equal(refund?.orderId, String(orderId));
      assert.deepEqual(sink.cancellations.filter((report) => report.storeDomain === shop), [{ storeDomain: shop, orderId: String(orderId), cancelledAt: '2026-03-03T10:00:00.000Z' }]);
      assert.deepEqual((await eventsOf(shop)).map((event) => [event.status, event.payload]), [['done', '{}'], ['done', '{}']]);
    });

    it('a payload that does not parse, or whose amounts are malformed, fails at once and reaches nobody', async () => {
      const shop = await installedShop();
      const before = sink.orders.length;
      const { line_items: _lines, ...withoutLines } = orderCreatePayload(euroOrder({ id: newId() }));
      await deliver(shop, 'orders/create', withoutLines);
      await deliver(shop, 'orders/create', orderCreatePayload(euroOrder({ id: newId(), lines: [{ id: 1, productId: 1, variantId: 2, quantity: 1, price: '19.999' }] })));
      await runQueue();
      assert.equal(sink.orders.length, before);
      const events = await eventsOf(shop);
      assert.deepEqual(events.map((event) => [event.status, event.attempts]), [['failed', 1], ['failed', 1]]);
      assert.match(events[0]!.error ?? '', /line_items/);
      assert.match(events[1]!.error ?? '', /more decimals than EUR has/);
    });

    it('a sink that fails leaves the order queued for a retry, its payload kept', async () => {
      const shop = await installedShop();
      sink.failNext = new Error('database unavailable');
      await deliver(shop, 'orders/create', orderCreatePayload(euroOrder({ id: newId() })));
      await runQueue();
      const [event] = await eventsOf(shop);
      assert.equal(event!.status, 'queued');
      assert.match(event!.error ?? '', /database unavailable/);
      assert.notEqual(event!.payload, '{}');
    });

    it('the app’s own worker hands the order webhooks to the app’s order sink', async () => {
      const shop = await installedShop();
      const order = euroOrder({ id: newId() });
      await deliver(shop, 'orders/create', orderCreatePayload(order));
      await deliver(shop, 'refunds/create', refundCreatePayload({ id: newId(), orderId: order.id, createdAt: '2026-03-02T10:00:00Z', currency: 'EUR', lines: [{ lineItemId: 14_236_581_000_001, quantity: 1, subtotal: '17.49' }] }));
      await deliver(shop, 'orders/cancelled', orderCancelledPayload({ id: order.id, cancelledAt: '2026-03-03T10:00:00Z' }));
      await t.runWorker();
      const events = await eventsOf(shop);
      assert.deepEqual(events.map((event) => [event.topic, event.status, event.error, event.payload]), [
        ['ORDERS_CREATE', 'done', null, '{}'],
        ['REFUNDS_CREATE', 'done', null, '{}'],
        ['ORDERS_CANCELLED', 'done', null, '{}'],
      ]);
    });

    it('customers/redact erases the customer’s orders; shop/redact the store’s', async () => {
      const shop = await installedShop();
      const email = `gone-${newId()}@example.com`;
      await deliver(shop, 'customers/redact', { shop_id: 1, shop_domain: shop, customer: { id: 2, email, phone: null }, orders_to_redact: [] });
      await runQueue();
      assert.deepEqual(sink.erasedCustomers.filter(([domain]) => domain === shop), [[shop, email]]);
      await deliver(shop, 'shop/redact', { shop_id: 1, shop_domain: shop });
      await runQueue();
      assert.ok(sink.erasedStores.includes(shop));
    });
  });
}
