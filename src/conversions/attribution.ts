/**
 * Which back-in-stock alert an order's lines are credited to, and what that is worth once refunds
 * and cancellations have had their say. Pure decisions over facts handed in: no database, clock
 * or I/O, so the storage can replay them and the tests can try every order of inputs.
 */
import type { ChannelName } from '../core/channels.ts';
import type { Money, OrderLineReport, OrderReport } from './reports.ts';

export interface SentNotification {
  alertId: string;
  /** email when absent. */
  channel?: ChannelName;
  productId: string;
  /** null: the alert was about the product as a whole. */
  variantId: string | null;
  /** ISO 8601. */
  sentAt: string;
  /** ISO 8601, when the shopper first followed the alert's link; null when never. */
  clickedAt: string | null;
}

export interface Attribution {
  lineId: string;
  alertId: string;
  channel: ChannelName;
  kind: 'direct' | 'assisted';
  amount: Money;
  shopAmount: Money;
}

export interface OrderConversion {
  kind: 'direct' | 'assisted' | null;
  /** Net attributed revenue per presentment currency, sorted by currency. */
  revenue: Money[];
  /** Net attributed revenue in the store's currency; null when no line is attributed. */
  shopRevenue: Money | null;
}

export interface LineRefund {
  lineId: string;
  amount: Money;
  shopAmount: Money;
}

export interface LineRevenue {
  lineId: string;
  amount: Money;
  shopAmount: Money;
}

const DAY_MS = 86_400_000;

/**
 * Credits each line of an order to at most one alert.
 *
 * - An alert matches a line when the product ids are equal and the alert names no variant (it was
 *   about the whole product) or names the line's variant.
 * - It is in the window when `sentAt <= placedAt < sentAt + windowDays` days (a day is 24 hours;
 *   an order exactly at the window's end is outside).
 * - A line gets at most one alert: one clicked at or before `placedAt` (direct) beats one not
 *   clicked (assisted; a click after the order does not make it direct). Among equals the latest
 *   sent wins, and among alerts sent at the same instant the smallest `alertId`, so the result is
 *   the same whatever order `alerts` come in.
 * - Lines with zero or negative quantity or amount get nothing.
 * - One alert may credit several lines of the same order.
 * - A line id given twice is credited once (the first line): refunds name lines by id and could
 *   not tell the two apart.
 *
 * Timestamps are ISO 8601 strings compared as instants (`Date.parse`), never as strings: `+02:00`
 * and `Z` forms of one instant are equal. An unparseable timestamp matches nothing, and an
 * unparseable click counts as no click.
 */
export function attributeOrder(
  order: Pick<OrderReport, 'placedAt' | 'lines'>,
  alerts: SentNotification[],
  windowDays: number,
): Attribution[] {
  const placedAt = Date.parse(order.placedAt);
  if (!Number.isFinite(placedAt) || !(windowDays > 0)) return [];
  const candidates = alerts.flatMap((alert) => candidateOf(alert, placedAt, windowDays * DAY_MS));
  const credited = new Set<string>();
  const attributions: Attribution[] = [];
  for (const line of order.lines) {
    if (credited.has(line.lineId) || !isCreditable(line)) continue;
    const best = bestFor(line, candidates);
    if (!best) continue;
    credited.add(line.lineId);
    attributions.push({ lineId: line.lineId, alertId: best.alert.alertId, channel: best.alert.channel ?? 'email', kind: best.kind, amount: line.amount, shopAmount: line.shopAmount });
  }
  return attributions;
}

interface Candidate {
  alert: SentNotification;
  sentAt: number;
  kind: 'direct' | 'assisted';
}

/** An alert whose window holds the order, with how it counts; none when it is outside. */
function candidateOf(alert: SentNotification, placedAt: number, windowMs: number): Candidate[] {
  const sentAt = Date.parse(alert.sentAt);
  if (!Number.isFinite(sentAt) || placedAt < sentAt || placedAt >= sentAt + windowMs) return [];
  return [{ alert, sentAt, kind: clickedBy(alert, placedAt) ? 'direct' : 'assisted' }];
}

function clickedBy(alert: SentNotification, placedAt: number): boolean {
  if (alert.clickedAt === null) return false;
  const clickedAt = Date.parse(alert.clickedAt);
  return Number.isFinite(clickedAt) && clickedAt <= placedAt;
}

function isCreditable(line: OrderLineReport): boolean {
  return line.quantity > 0 && line.amount.minor > 0;
}

function matches(alert: SentNotification, line: OrderLineReport): boolean {
  return alert.productId === line.productId && (alert.variantId === null || alert.variantId === line.variantId);
}

function bestFor(line: OrderLineReport, candidates: Candidate[]): Candidate | undefined {
  let best: Candidate | undefined;
  for (const candidate of candidates) {
    if (matches(candidate.alert, line) && (!best || outranks(candidate, best))) best = candidate;
  }
  return best;
}

/** Direct before assisted, then the latest sent, then the smallest alert id (by code unit). */
function outranks(a: Candidate, b: Candidate): boolean {
  if (a.kind !== b.kind) return a.kind === 'direct';
  if (a.sentAt !== b.sentAt) return a.sentAt > b.sentAt;
  return a.alert.alertId < b.alert.alertId;
}

/**
 * What each attributed line is still worth: its attributed amount less the sum of its refunds,
 * never below zero. Refunds count whenever they arrive, after the attribution window too. A
 * cancelled order keeps its lines (the record that the alert led to an order) at zero. A refund
 * in another currency than its line's cannot be taken from it and is left out; refunds of lines
 * that were not attributed change nothing.
 */
export function netRevenue(attributions: Attribution[], refunds: LineRefund[], cancelled: boolean): LineRevenue[] {
  return attributions.map((line) => {
    if (cancelled) return { lineId: line.lineId, amount: zeroOf(line.amount), shopAmount: zeroOf(line.shopAmount) };
    const ofLine = refunds.filter((refund) => refund.lineId === line.lineId);
    return {
      lineId: line.lineId,
      amount: lessRefunded(line.amount, ofLine.map((refund) => refund.amount)),
      shopAmount: lessRefunded(line.shopAmount, ofLine.map((refund) => refund.shopAmount)),
    };
  });
}

function zeroOf(money: Money): Money {
  return { minor: 0, currency: money.currency };
}

/** The refunded part is capped at the attributed amount: revenue is never negative. */
function lessRefunded(attributed: Money, refunded: Money[]): Money {
  const taken = refunded
    .filter((refund) => refund.currency === attributed.currency)
    .reduce((sum, refund) => sum + Math.max(0, refund.minor), 0);
  return { minor: Math.max(0, attributed.minor - Math.min(attributed.minor, taken)), currency: attributed.currency };
}

/**
 * One order's figures: direct when any attributed line is direct, else assisted when any line is
 * attributed, else null; revenue net of refunds (zero when cancelled) per currency. `shopRevenue`
 * is null when nothing is attributed, and also when the shop amounts disagree on their currency
 * (a store has one; two would make no single figure).
 */
export function conversionOf(attributions: Attribution[], refunds: LineRefund[], cancelled: boolean): OrderConversion {
  const net = netRevenue(attributions, refunds, cancelled);
  const shop = sumByCurrency(net.map((line) => line.shopAmount));
  return {
    kind: kindOf(attributions),
    revenue: sumByCurrency(net.map((line) => line.amount)),
    shopRevenue: shop.length === 1 ? shop[0]! : null,
  };
}

function kindOf(attributions: Attribution[]): OrderConversion['kind'] {
  if (attributions.some((line) => line.kind === 'direct')) return 'direct';
  return attributions.length > 0 ? 'assisted' : null;
}

/** Sums amounts per currency, sorted by currency code; a currency whose amounts sum to 0 stays. */
export function sumByCurrency(amounts: Money[]): Money[] {
  const sums = new Map<string, number>();
  for (const money of amounts) sums.set(money.currency, (sums.get(money.currency) ?? 0) + money.minor);
  return [...sums.keys()].sort(byCodeUnit).map((currency) => ({ minor: sums.get(currency)!, currency }));
}

function byCodeUnit(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
