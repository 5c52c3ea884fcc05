/**
 * Attribution alone (src/conversions/attribution.ts): which alert an order's lines are credited
 * to, and what that is worth after refunds and cancellation, decided from facts given here.
 * Also how those amounts read (formatMinor in src/conversions/money.ts).
 */
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { describe, it } from './fixtures/suites.ts';
import {
  attributeOrder,
  conversionOf,
  netRevenue,
  sumByCurrency,
  type Attribution,
  type LineRefund,
  type SentNotification,
} from '../src/conversions/attribution.ts';
import { currencyExponent, formatMinor } from '../src/conversions/money.ts';
import type { OrderLineReport, RefundReport } from '../src/conversions/reports.ts';

const PLACED = '2026-05-10T12:00:00.000Z';
const PLACED_MS = Date.parse(PLACED);
const HOUR = 3_600_000;
const DAY = 24 * HOUR;
/** An instant relative to the order: before(2 * DAY) is two days before it was placed. */
const before = (ms: number) => new Date(PLACED_MS - ms).toISOString();
const eur = (minor: number) => ({ minor, currency: 'EUR' });
const usd = (minor: number) => ({ minor, currency: 'USD' });

const line = (lineId: string, overrides: Partial<OrderLineReport> = {}): OrderLineReport => ({
  lineId,
  productId: 'p1',
  variantId: 'v1',
  quantity: 1,
  amount: eur(1999),
  shopAmount: usd(2199),
  ...overrides,
});

const alert = (alertId: string, sentAt: string, clickedAt: string | null = null, overrides: Partial<SentNotification> = {}): SentNotification => ({
  alertId,
  productId: 'p1',
  variantId: 'v1',
  sentAt,
  clickedAt,
  ...overrides,
});

/** The attributions as [lineId, alertId, kind], the part each case is about. */
function credited(lines: OrderLineReport[], alerts: SentNotification[], windowDays = 7): Array<[string, string, string]> {
  return attributeOrder({ placedAt: PLACED, lines }, alerts, windowDays).map((a) => [a.lineId, a.alertId, a.kind]);
}

describe('which alert an order line is credited to', () => {
  const L1 = [line('l1')];
  const cases: Array<[string, OrderLineReport[], SentNotification[], Array<[string, string, string]>]> = [
    ['direct: clicked before the order', L1, [alert('a1', before(2 * DAY), before(DAY))], [['l1', 'a1', 'direct']]],
    ['direct: clicked at the very instant of the order', L1, [alert('a1', before(DAY), before(0))], [['l1', 'a1', 'direct']]],
    ['assisted: sent in the window, never clicked', L1, [alert('a1', before(2 * DAY))], [['l1', 'a1', 'assisted']]],
    ['assisted: a click after the order does not make it direct', L1, [alert('a1', before(2 * DAY), before(-HOUR))], [['l1', 'a1', 'assisted']]],
    ['nothing: the alert went out after the order', L1, [alert('a1', before(-1))], []],
    ['credited: the alert went out at the instant of the order', L1, [alert('a1', before(0))], [['l1', 'a1', 'assisted']]],
    ['nothing: the order came after the window', L1, [alert('a1', before(8 * DAY), before(7.5 * DAY))], []],
    ['nothing: the order came exactly at the window’s end', L1, [alert('a1', before(7 * DAY))], []],
    ['credited: the order came a millisecond before the window’s end', L1, [alert('a1', before(7 * DAY - 1))], [['l1', 'a1', 'assisted']]],
    ['the window is as long as asked', L1, [alert('a1', before(20 * DAY))], []],
    ['a product-level alert matches any variant', [line('l1', { variantId: 'v2' })], [alert('a1', before(DAY), null, { variantId: null })], [['l1', 'a1', 'assisted']]],
    ['a product-level alert matches a line without a variant', [line('l1', { variantId: null })], [alert('a1', before(DAY), null, { variantId: null })], [['l1', 'a1', 'assisted']]],
    ['a variant alert does not match another variant', [line('l1', { variantId: 'v2' })], [alert('a1', before(DAY), before(HOUR))], []],
    ['a variant alert does not match a line without a variant', [line('l1', { variantId: null })], [alert('a1', before(DAY))], []],
    ['an alert about another product does not match', L1, [alert('a1', before(DAY), before(HOUR), { productId: 'p2' })], []],
    ['the latest alert sent wins', L1, [alert('a1', before(3 * DAY)), alert('a2', before(DAY)), alert('a3', before(2 * DAY))], [['l1', 'a2', 'assisted']]],
    ['a clicked alert beats a later one not clicked', L1, [alert('a1', before(3 * DAY), before(2 * DAY)), alert('a2', before(DAY))], [['l1', 'a1', 'direct']]],
    ['a click after the order does not beat a later alert', L1, [alert('a1', before(3 * DAY), before(-HOUR)), alert('a2', before(DAY))], [['l1', 'a2', 'assisted']]],
    ['among clicked alerts the latest sent wins', L1, [alert('a2', before(DAY), before(HOUR)), alert('a1', before(3 * DAY), before(2 * HOUR))], [['l1', 'a2', 'direct']]],
    ['sent at the same instant: the smaller alert id wins', L1, [alert('a9', before(DAY)), alert('a10', before(DAY))], [['l1', 'a10', 'assisted']]],
    [
      'instants, not strings: +02:00 and Z forms of the same hour are compared as times',
      L1,
      // 13:30+02:00 is 11:30Z, before the 12:00Z order; as strings it would sort after it.
      [alert('a1', '2026-05-10T13:30:00+02:00', '2026-05-10T13:45:00+02:00')],
      [['l1', 'a1', 'direct']],
    ],
    ['an unparseable send time matches nothing', L1, [alert('a1', 'yesterday')], []],
    ['an unparseable click counts as no click', L1, [alert('a1', before(DAY), 'soon')], [['l1', 'a1', 'assisted']]],
    ['a line of zero quantity gets nothing', [line('l1', { quantity: 0 })], [alert('a1', before(DAY))], []],
    ['a line of negative quantity gets nothing', [line('l1', { quantity: -1 })], [alert('a1', before(DAY))], []],
    ['a free line gets nothing', [line('l1', { amount: eur(0) })], [alert('a1', before(DAY))], []],
    ['a line of negative amount gets nothing', [line('l1', { amount: eur(-100) })], [alert('a1', before(DAY))], []],
    [
      'one alert credits several lines, each line its own best alert',
      [line('l1', { variantId: 'v1' }), line('l2', { variantId: 'v2' }), line('l3', { productId: 'p2', variantId: null }), line('l4', { productId: 'p3' })],
      [alert('a1', before(2 * DAY), null, { variantId: null }), alert('a2', before(DAY), null, { productId: 'p2', variantId: null })],
      [['l1', 'a1', 'assisted'], ['l2', 'a1', 'assisted'], ['l3', 'a2', 'assisted']],
    ],
    ['a line id given twice is credited once', [line('l1'), line('l1', { amount: eur(5) })], [alert('a1', before(DAY))], [['l1', 'a1', 'assisted']]],
    ['no alerts, nothing credited', L1, [], []],
  ];
  for (const [name, lines, alerts, expected] of cases) {
    it(name, () => assert.deepEqual(credited(lines, alerts), expected));
  }

  it('credits the line’s own amounts, in both currencies', () => {
    const [attribution] = attributeOrder({ placedAt: PLACED, lines: [line('l1', { amount: eur(1234), shopAmount: usd(1400) })] }, [alert('a1', before(DAY))], 7);
    assert.deepEqual(attribution, { lineId: 'l1', alertId: 'a1', channel: 'email', kind: 'assisted', amount: eur(1234), shopAmount: usd(1400) });
  });

  it('credits one alert in two orders: each order is decided on its own', () => {
    const alerts = [alert('a1', before(3 * DAY), before(2 * DAY))];
    const first = attributeOrder({ placedAt: before(DAY), lines: [line('l1')] }, alerts, 7);
    const second = attributeOrder({ placedAt: before(2.5 * DAY), lines: [line('l1')] }, alerts, 7);
    assert.deepEqual(first.map((a) => [a.alertId, a.kind]), [['a1', 'direct']]);
    // Placed before the click: the same alert only assisted that one.
    assert.deepEqual(second.map((a) => [a.alertId, a.kind]), [['a1', 'assisted']]);
  });
});

describe('what an order is worth', () => {
  const attributions: Attribution[] = [
    { lineId: 'l1', alertId: 'a1', channel: 'email', kind: 'assisted', amount: eur(1000), shopAmount: usd(1100) },
    { lineId: 'l2', alertId: 'a1', channel: 'email', kind: 'direct', amount: eur(500), shopAmount: usd(550) },
  ];
  const refund = (lineId: string, minor: number, shopMinor = minor): LineRefund => ({ lineId, amount: eur(minor), shopAmount: usd(shopMinor) });

  it('is the attributed lines’ amounts when nothing was refunded', () => {
    assert.deepEqual(conversionOf(attributions, [], false), { kind: 'direct', revenue: [eur(1500)], shopRevenue: usd(1650) });
  });

  it('takes refunds back line by line, their sum capped at the line', () => {
    const refunds = [refund('l1', 300, 330), refund('l1', 200, 220), refund('l2', 400, 440), refund('l2', 400, 440), refund('l9', 999)];
    assert.deepEqual(netRevenue(attributions, refunds, false), [
      { lineId: 'l1', amount: eur(500), shopAmount: usd(550) },
      { lineId: 'l2', amount: eur(0), shopAmount: usd(0) },
    ]);
    assert.deepEqual(conversionOf(attributions, refunds, false), { kind: 'direct', revenue: [eur(500)], shopRevenue: usd(550) });
  });

  it('takes back a refund that came long after the attribution window', () => {
    const lines = [line('l1', { amount: eur(1000), shopAmount: usd(1100) })];
    const attributed = attributeOrder({ placedAt: PLACED, lines }, [alert('a1', before(DAY))], 7);
    const late: RefundReport = {
      storeDomain: 'a.myshopify.com',
      orderId: 'o1',
      refundId: 'r1',
      refundedAt: before(-60 * DAY),
      lines: [{ lineId: 'l1', quantity: 1, amount: eur(400), shopAmount: usd(440) }],
    };
    const refunds = late.lines.map(({ lineId, amount, shopAmount }) => ({ lineId, amount, shopAmount }));
    assert.deepEqual(conversionOf(attributed, refunds, false).revenue, [eur(600)]);
  });

  it('leaves out a refund in another currency than its line', () => {
    assert.deepEqual(netRevenue(attributions, [{ lineId: 'l1', amount: usd(1000), shopAmount: eur(1000) }], false)[0], attributions.map(({ lineId, amount, shopAmount }) => ({ lineId, amount, shopAmount }))[0]);
  });

  it('keeps a cancelled order’s attribution at zero revenue', () => {
    assert.deepEqual(conversionOf(attributions, [], true), { kind: 'direct', revenue: [eur(0)], shopRevenue: usd(0) });
  });

  it('is assisted when no attributed line is direct, and nothing when no line is attributed', () => {
    assert.equal(conversionOf([attributions[0]!], [], false).kind, 'assisted');
    assert.deepEqual(conversionOf([], [], false), { kind: null, revenue: [], shopRevenue: null });
  });

  it('sums per presentment currency, and has no single shop figure for shop amounts in two currencies', () => {
    const mixed: Attribution[] = [...attributions, { lineId: 'l3', alertId: 'a2', channel: 'sms', kind: 'assisted', amount: usd(700), shopAmount: eur(650) }];
    assert.deepEqual(conversionOf(mixed, [], false), { kind: 'direct', revenue: [eur(1500), usd(700)], shopRevenue: null });
  });

  it('sums money per currency, sorted by currency', () => {
    assert.deepEqual(sumByCurrency([usd(1), eur(2), { minor: 3, currency: 'JPY' }, eur(4), usd(0)]), [eur(6), { minor: 3, currency: 'JPY' }, usd(1)]);
    assert.deepEqual(sumByCurrency([]), []);
  });
});

describe('attribution properties', () => {
  const PRODUCTS = ['p1', 'p2'];
  const VARIANTS = ['v1', 'v2', null];
  const money = (currency: string) => fc.integer({ min: -100, max: 5000 }).map((minor) => ({ minor, currency }));
  const lineArb = fc.record({
    lineId: fc.constantFrom('l1', 'l2', 'l3', 'l4', 'l5'),
    productId: fc.constantFrom(...PRODUCTS),
    variantId: fc.constantFrom(...VARIANTS),
    quantity: fc.integer({ min: -1, max: 3 }),
    amount: money('EUR'),
    shopAmount: money('USD'),
  });
  // Sent on the hour of a day, not any millisecond: alerts sent at the same instant are common, so
  // the tie-break is tried.
  const alertArb = fc
    .record({
      productId: fc.constantFrom(...PRODUCTS),
      variantId: fc.constantFrom(...VARIANTS),
      sentHoursBefore: fc.integer({ min: -1, max: 10 }).map((days) => days * 24),
      clickHoursAfterSend: fc.option(fc.integer({ min: 0, max: 5 * 24 }), { nil: null }),
    })
    .map(({ sentHoursBefore, clickHoursAfterSend, ...rest }) => ({
      ...rest,
      sentAt: before(sentHoursBefore * HOUR),
      clickedAt: clickHoursAfterSend === null ? null : before((sentHoursBefore - clickHoursAfterSend) * HOUR),
    }));
  const scenario = fc
    .record({
      lines: fc.uniqueArray(lineArb, { minLength: 1, maxLength: 5, selector: (l) => l.lineId }),
      alerts: fc.array(alertArb, { minLength: 1, maxLength: 8 }),
      windowDays: fc.integer({ min: 3, max: 10 }),
      // Sort keys for the alerts: the same alerts in another order.
      shuffle: fc.array(fc.integer(), { minLength: 8, maxLength: 8 }),
    })
    .map(({ alerts, shuffle, ...rest }) => {
      const named = alerts.map((a, i): SentNotification => ({ alertId: `a${i}`, ...a }));
      const shuffled = named.map((a, i) => ({ a, key: shuffle[i]! })).sort((x, y) => x.key - y.key).map(({ a }) => a);
      return { ...rest, alerts: named, shuffled };
    });
  const RUNS = 400;

  const inWindow = (a: SentNotification, windowDays: number) => Date.parse(a.sentAt) <= PLACED_MS && PLACED_MS < Date.parse(a.sentAt) + windowDays * DAY;
  const isDirect = (a: SentNotification) => a.clickedAt !== null && Date.parse(a.clickedAt) <= PLACED_MS;
  const matching = (l: OrderLineReport, a: SentNotification) => a.productId === l.productId && (a.variantId === null || a.variantId === l.variantId);

  it('credits a line at most once, to the best alert that matches it, whatever the order of the alerts', () => {
    const credited = { direct: 0, assisted: 0 };
    fc.assert(
      fc.property(scenario, ({ lines, alerts, shuffled, windowDays }) => {
        const result = attributeOrder({ placedAt: PLACED, lines }, alerts, windowDays);
        assert.equal(new Set(result.map((a) => a.lineId)).size, result.length);
        assert.deepEqual(attributeOrder({ placedAt: PLACED, lines }, shuffled, windowDays), result);
        assert.deepEqual(attributeOrder({ placedAt: PLACED, lines }, [...alerts].reverse(), windowDays), result);
        for (const l of lines) {
          const eligible = alerts.filter((a) => matching(l, a) && inWindow(a, windowDays));
          const got = result.find((a) => a.lineId === l.lineId);
          if (l.quantity <= 0 || l.amount.minor <= 0 || eligible.length === 0) {
            assert.equal(got, undefined);
            continue;
          }
          credited[got!.kind]++;
          const chosen = alerts.find((a) => a.alertId === got!.alertId)!;
          assert.ok(eligible.includes(chosen), `credited to ${chosen.alertId}, which does not match or is outside the window`);
          assert.equal(got!.kind, isDirect(chosen) ? 'direct' : 'assisted');
          const rivals = eligible.filter((other) => other !== chosen && isDirect(other) === isDirect(chosen) && Date.parse(other.sentAt) === Date.parse(chosen.sentAt));
          for (const rival of rivals) assert.ok(chosen.alertId < rival.alertId, `${rival.alertId} sent at the same instant has the smaller id`);
          for (const other of eligible) {
            if (isDirect(other) !== isDirect(chosen)) assert.ok(isDirect(chosen), 'a direct alert was passed over');
            else assert.ok(Date.parse(other.sentAt) <= Date.parse(chosen.sentAt), 'a later alert was passed over');
          }
        }
      }),
      { numRuns: RUNS },
    );
    assert.ok(credited.direct >= RUNS / 8 && credited.assisted >= RUNS / 8, `too few lines credited in ${RUNS} runs: ${JSON.stringify(credited)}`);
  });

  it('breaks a tie between alerts sent at the same instant by the smallest id, whatever their order', () => {
    const tie = fc.record({
      clicked: fc.array(fc.boolean(), { minLength: 2, maxLength: 6 }),
      shuffle: fc.array(fc.integer(), { minLength: 6, maxLength: 6 }),
    });
    fc.assert(
      fc.property(tie, ({ clicked, shuffle }) => {
        const alerts = clicked.map((click, i) => alert(`a${i}`, before(DAY), click ? before(HOUR) : null, { variantId: null }));
        const shuffled = alerts.map((a, i) => ({ a, key: shuffle[i]! })).sort((x, y) => x.key - y.key).map(({ a }) => a);
        const first = clicked.indexOf(true);
        const expected: Array<[string, string, string]> = [['l1', `a${Math.max(0, first)}`, first >= 0 ? 'direct' : 'assisted']];
        assert.deepEqual(credited([line('l1')], shuffled), expected);
      }),
      { numRuns: 200 },
    );
  });

  it('decides the same order the same way every time', () => {
    fc.assert(
      fc.property(scenario, ({ lines, alerts, windowDays }) => {
        const order = { placedAt: PLACED, lines };
        assert.deepEqual(attributeOrder(order, alerts, windowDays), attributeOrder(structuredClone(order), structuredClone(alerts), windowDays));
      }),
      { numRuns: RUNS },
    );
  });

  const refundsArb = fc.array(
    fc.record({
      lineId: fc.constantFrom('l1', 'l2', 'l3', 'l9'),
      amount: fc.integer({ min: 0, max: 3500 }).map(eur),
      shopAmount: fc.integer({ min: 0, max: 3500 }).map(usd),
    }),
    { minLength: 1, maxLength: 6 },
  );

  it('nets revenue between zero and what was attributed, less exactly the refunds when they fit; zero when cancelled', () => {
    const refunded = { partly: 0, wholly: 0 };
    fc.assert(
      fc.property(scenario, refundsArb, ({ lines, alerts, windowDays }, refunds) => {
        const attributions = attributeOrder({ placedAt: PLACED, lines }, alerts, windowDays);
        const net = netRevenue(attributions, refunds, false);
        assert.deepEqual(net.map((n) => n.lineId), attributions.map((a) => a.lineId));
        attributions.forEach((a, i) => {
          const taken = refunds.filter((r) => r.lineId === a.lineId).reduce((sum, r) => sum + r.amount.minor, 0);
          if (taken > 0) refunded[taken < a.amount.minor ? 'partly' : 'wholly']++;
          assert.equal(net[i]!.amount.minor, Math.max(0, a.amount.minor - taken));
          assert.ok(net[i]!.shopAmount.minor >= 0 && net[i]!.shopAmount.minor <= Math.max(0, a.shopAmount.minor), `shop revenue ${net[i]!.shopAmount.minor} outside 0..${a.shopAmount.minor}`);
        });
        const cancelled = conversionOf(attributions, refunds, true);
        assert.deepEqual(cancelled.revenue.filter((m) => m.minor !== 0), [], 'revenue of a cancelled order');
        assert.equal(cancelled.shopRevenue?.minor ?? 0, 0);
        assert.equal(cancelled.kind, conversionOf(attributions, [], false).kind);
      }),
      { numRuns: RUNS },
    );
    assert.ok(refunded.partly >= RUNS / 16 && refunded.wholly >= RUNS / 16, `too few refunded lines in ${RUNS} runs: ${JSON.stringify(refunded)}`);
  });
});

describe('money as people read it', () => {
  const cases: Array<[number, string, string, string]> = [
    [1999, 'EUR', 'en', '€19.99'],
    [1500, 'JPY', 'en', '¥1,500'],
    [1999, 'EUR', 'de', '19,99\u00a0€'],
    [5, 'USD', 'en', '$0.05'],
    [0, 'USD', 'en', '$0.00'],
    [1234, 'KWD', 'en', 'KWD\u00a01.234'],
    [123456789012345, 'EUR', 'en', '€1,234,567,890,123.45'],
    [1999, 'EUR', 'not a locale!', '€19.99'],
  ];
  for (const [minor, currency, locale, expected] of cases) {
    it(`${minor} ${currency} in ${locale} reads ${expected}`, () => assert.equal(formatMinor({ minor, currency }, locale), expected));
  }

  it('uses the currency’s own exponent', () => {
    assert.deepEqual(['EUR', 'JPY', 'KWD'].map(currencyExponent), [2, 0, 3]);
  });

  it('refuses what is not an amount of minor units or a currency code', () => {
    assert.throws(() => formatMinor({ minor: 19.99, currency: 'EUR' }), RangeError);
    assert.throws(() => formatMinor({ minor: 1, currency: 'euro' }), RangeError);
  });
});
