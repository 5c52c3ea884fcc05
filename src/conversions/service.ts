// Longer than most files on purpose: what an alert did after it was sent (its click, the orders it
// is credited with, refunds taking revenue back) and the figures merchants read, in one service.
import type { Readable } from 'node:stream';
import type { FastifyBaseLogger } from 'fastify';
import type { Subscription } from '../alerts/schemas.ts';
import type { WaitingCount } from '../alerts/service.ts';
import { nowIso } from '../core/clock.ts';
import { inPages } from '../core/db/pages.ts';
import { addressKey } from '../core/email.ts';
import { eventId, type AgentNews, type EventSink } from '../core/events.ts';
import { ownStore, type Caller } from '../core/http/caller.ts';
import { idsAt, type PointedIds } from '../core/platforms.ts';
import type { TokenSigner } from '../core/signed-token.ts';
import type { NotificationRow, SentNotificationRow } from '../dispatch/service.ts';
import type { DigestFigures } from '../notices/service.ts';
import { DEFAULT_UTM, type EffectiveSettings } from '../stores/schemas.ts';
import { CHANNEL_NAMES } from '../channels.ts';
import type { Channel } from '../channels.ts';
import type { ChannelName } from '../core/channels.ts';
import { attributeOrder, netRevenue, type Attribution, type LineRefund, type SentNotification } from './attribution.ts';
import { exportCsv, type ExportKind, type ExportSources } from './exports.ts';
import { ConversionRepository, type AttributionRow, type StoredOrder } from './repository.ts';
import type { CancellationReport, OrderReport, OrderSink, RefundReport } from './reports.ts';

/** What other modules use of orders, money and exports. */
export { formatMinor, toMinorUnits } from './money.ts';
export type { CancellationReport, Money, OrderLineReport, OrderReport, OrderSink, RefundLineReport, RefundReport } from './reports.ts';
export type { AttributionRow } from './repository.ts';
export type { ExportKind } from './exports.ts';

const CLICK = 'alert-click';
/** What a subscription's news lists at most of what was sent for it: an alert and its reminder per restock that reached it are a handful. */
const NEWS_ALERTS_SHOWN = 20;
/** The products a performance report lists, most revenue first. */
const PRODUCTS_SHOWN = 200;
const DAY_MS = 86_400_000;

/** What this feature reads of the alert ledger (the dispatch service). */
export interface SentNotifications {
  sentNotification(id: string): Promise<NotificationRow | undefined>;
  /** The checkout of the unit held for the alert while the hold lasts (docs/dispatch.md, "Reserved units"). */
  heldCheckoutUrl?(alertId: string): Promise<string | undefined>;
  sentToAddressFor(storeDomain: string, email: string, productIds: string[]): Promise<SentNotificationRow[]>;
  sentForSubscription(subscriptionId: string, limit: number): Promise<Array<SentNotificationRow & Pick<NotificationRow, 'restock_id'>>>;
  sentBetween(storeDomain: string, from: string, to: string): Promise<number>;
  sentDaily(caller: Caller, domain: string, fromDay: string): Promise<Array<{ day: string; channel: string; kind: string; n: number }>>;
  sentForProducts(caller: Caller, domain: string, fromDay: string, productIds: string[]): Promise<Array<{ product_id: string; variant_id: string | null; kind: string; n: number }>>;
  productsSentSince(caller: Caller, domain: string, fromDay: string, limit: number): Promise<Array<{ product_id: string; variant_id: string | null }>>;
}

export interface ConversionDeps {
  alerts: SentNotifications;
  waiting: {
    demandOf(caller: Caller, domain: string, limit?: number, order?: 'product' | 'most-wanted'): Promise<WaitingCount[]>;
    waitingFor(caller: Caller, domain: string, productIds: string[]): Promise<WaitingCount[]>;
    subscriptionCounts(caller: Caller, domain: string): Promise<Record<string, number>>;
    signupsBetween(storeDomain: string, from: string, to: string): Promise<number>;
    /** Whether the caller may read a subscription is the subscriptions' own rule. */
    getSubscription(id: string, caller: Caller): Promise<Subscription>;
  };
  stores: { activeStore(domain: string): Promise<string | undefined>; settingsOf(domain: string): Promise<EffectiveSettings>; requireStorePlatform(domain: string, ids: PointedIds): Promise<void> };
  products: {
    describeProduct(storeDomain: string, productId: string, variantId: string | null): Promise<{ productUrl: string | null; productTitle: string | null; variantTitle: string | null } | undefined>;
    stockStatusOf(caller: Caller, domain: string, productIds: string[]): Promise<Array<{ productId: string; variantId: string | null; productTitle: string | null; variantTitle: string | null }>>;
  };
  events: EventSink;
  /** The other features' rows the CSV exports stream (subscriptions, the alert ledger). */
  exports: Pick<ExportSources, 'subscriberRows' | 'ledgerRows'>;
  signer: TokenSigner;
  baseUrl: string;
  log: FastifyBaseLogger;
}

/** Whether a request for a click link is a shopper's: bots and prefetches land too, uncounted. */
export interface ClickVisit {
  counts: boolean;
}

export interface ProductPerformance {
  productId: string;
  variantId: string | null;
  title: string | null;
  waiting: number;
  sent: number;
  clicked: number;
  ordered: number;
  revenue: Array<{ currency: string; minor: number }>;
}

export interface Performance {
  shop: string;
  from: string;
  to: string;
  days: number;
  waiting: number;
  sent: number;
  reminders: number;
  clicks: number;
  orders: { direct: number; assisted: number; total: number };
  /** Attributed orders per alert sent. */
  conversionRate: number;
  /** Clicks per alert sent. */
  clickRate: number;
  /** Net revenue won back in the store's currency (one entry unless the store changed currency). */
  revenue: Array<{ currency: string; minor: number }>;
  /** The same in the currencies shoppers paid in. */
  revenueByPresentmentCurrency: Array<{ currency: string; minor: number }>;
  byDay: Array<{ day: string; sent: number; clicks: number; orders: number; revenueMinor: number }>;
  /** What each channel did: alerts sent, clicks, attributed orders and net revenue in the store's currency. */
  byChannel: Array<{ channel: Channel; sent: number; clicks: number; orders: number; revenueMinor: number }>;
  products: ProductPerformance[];
}

/**
 * Clicks, orders and what alerts won back. Orders come from Shopify's webhooks and the orders
 * API as `OrderReport`s; only orders by an address some alert reached, for a product it was
 * about, are kept, and each line is credited to at most one alert (attribution.ts decides).
 */
export class ConversionService implements OrderSink {
  constructor(
    private readonly store: ConversionRepository,
    private readonly deps: ConversionDeps,
  ) {}

  /** The link an alert's product button carries: ours, signed, naming the alert and its store. */
  clickUrl(storeDomain: string, alertId: string): string {
    return `${this.deps.baseUrl}/r/${encodeURIComponent(storeDomain)}/${this.deps.signer.sign(CLICK, alertId)}`;
  }

  /**
   * Where a click on an alert's link lands: the product, with the store's UTM parameters. A
   * tampered or unknown link lands on the store's home page (our own when the store is not
   * ours), never on an address the link carries. The first shopper's click is recorded.
   */
  async followClick(domain: string, token: string, visit: ClickVisit): Promise<string> {
    const store = await this.deps.stores.activeStore(domain);
    const home = store ? `https://${store}/` : `${this.deps.baseUrl}/`;
    const alertId = this.deps.signer.verify(CLICK, token);
    const alert = store && alertId ? await this.deps.alerts.sentNotification(alertId) : undefined;
    if (!store || !alert || alert.store_domain !== store) return home;
    const utm = utmFor(alert.channel ?? 'email', (await this.deps.stores.settingsOf(store)).utm);
    const product = await this.deps.products.describeProduct(store, alert.product_id, alert.variant_id);
    // A unit held for the shopper: the link checks that unit out, the click counted like any other.
    const held = await this.deps.alerts.heldCheckoutUrl?.(alert.id);
    const landing = held ?? landingUrl(product?.productUrl ?? null, alert.variant_id, utm) ?? withUtm(new URL(home), utm).href;
    // The shopper lands whatever happens to the record: a failed write costs a click in the figures, not the visit.
    if (visit.counts) await this.recordClick(alert).catch((err) => this.deps.log.error({ err, alertId: alert.id }, 'recording a click failed'));
    return landing;
  }

  private async recordClick(alert: NotificationRow): Promise<void> {
    const clickedAt = nowIso();
    const first = await this.store.recordClick({
      notification_id: alert.id,
      channel: alert.channel,
      store_domain: alert.store_domain,
      product_id: alert.product_id,
      variant_id: alert.variant_id,
      clicked_at: clickedAt,
    });
    if (!first) return;
    await this.deps.events.announce({
      storeDomain: alert.store_domain,
      type: 'alert.clicked',
      id: eventId('alert.clicked', alert.id),
      occurredAt: clickedAt,
      data: { alertId: alert.id, kind: alert.kind, productId: alert.product_id, variantId: alert.variant_id, clickedAt },
    });
  }

  /**
   * An order, credited to the alerts that led to it. Kept only when its buyer was alerted about
   * one of its products before placing it; a second delivery of the same order changes nothing.
   */
  async recordOrder(given: OrderReport): Promise<void> {
    if (given.email === null) return;
    // Stored times are compared as text on SQLite: one form (UTC, Z) for every offset a platform sends.
    const report = { ...given, email: given.email, placedAt: utc(given.placedAt) };
    const storeDomain = report.storeDomain.toLowerCase();
    const productIds = [...new Set(report.lines.map((line) => line.productId))];
    const sent = (await this.deps.alerts.sentToAddressFor(storeDomain, report.email, productIds)).filter((alert) => Date.parse(alert.sent_at) <= Date.parse(report.placedAt));
    if (sent.length === 0) return;
    const clicks = await this.store.clicksOf(sent.map((alert) => alert.id));
    const candidates: SentNotification[] = sent.map((alert) => ({
      alertId: alert.id,
      channel: alert.channel,
      productId: alert.product_id,
      variantId: alert.variant_id,
      sentAt: alert.sent_at,
      clickedAt: clicks.get(alert.id) ?? null,
    }));
    const { attributionWindowDays } = await this.deps.stores.settingsOf(storeDomain);
    const attributions = attributeOrder(report, candidates, attributionWindowDays);
    const recorded = await this.store.insertOrder(
      { store_domain: storeDomain, order_id: report.orderId, email_key: addressKey(report.email), placed_at: report.placedAt, source: report.source, cancelled_at: null, recorded_at: nowIso() },
      report.lines.map((line) => ({
        store_domain: storeDomain,
        order_id: report.orderId,
        line_id: line.lineId,
        product_id: line.productId,
        variant_id: line.variantId,
        quantity: line.quantity,
        amount_minor: line.amount.minor,
        currency: line.amount.currency,
        shop_amount_minor: line.shopAmount.minor,
        shop_currency: line.shopAmount.currency,
      })),
      attributions.map((attribution) => attributionRow(storeDomain, report, attribution)),
    );
    if (recorded && attributions.length > 0) await this.announceAttributed(storeDomain, report, attributions);
  }

  private async announceAttributed(storeDomain: string, report: OrderReport, attributions: Attribution[]): Promise<void> {
    await this.deps.events.announce({
      storeDomain,
      type: 'order.attributed',
      id: eventId('order.attributed', storeDomain, report.orderId),
      occurredAt: nowIso(),
      data: {
        orderId: report.orderId,
        placedAt: report.placedAt,
        kind: attributions.some((attribution) => attribution.kind === 'direct') ? 'direct' : 'assisted',
        lines: attributions.map((attribution) => ({
          lineId: attribution.lineId,
          alertId: attribution.alertId,
          kind: attribution.kind,
          amount: attribution.amount,
          shopAmount: attribution.shopAmount,
        })),
      },
    });
  }

  /** A refund takes its lines' revenue back, whenever it comes (also after the window); once per refund id. */
  async recordRefund(report: RefundReport): Promise<void> {
    const storeDomain = report.storeDomain.toLowerCase();
    const rows = report.lines.map((line) => ({
      store_domain: storeDomain,
      order_id: report.orderId,
      refund_id: report.refundId,
      line_id: line.lineId,
      amount_minor: line.amount.minor,
      currency: line.amount.currency,
      shop_amount_minor: line.shopAmount.minor,
      shop_currency: line.shopAmount.currency,
      refunded_at: utc(report.refundedAt),
    }));
    if (rows.length === 0) return;
    await this.store.reviseOrder(storeDomain, report.orderId, (trx) => ConversionRepository.insertRefund(trx, rows), netOf);
  }

  /** A cancelled order keeps its attribution; its revenue is 0. */
  async recordCancellation(report: CancellationReport): Promise<void> {
    const storeDomain = report.storeDomain.toLowerCase();
    await this.store.reviseOrder(storeDomain, report.orderId, (trx) => ConversionRepository.markCancelled(trx, storeDomain, report.orderId, utc(report.cancelledAt)), netOf);
  }

  eraseCustomer(storeDomain: string, email: string): Promise<number> {
    return this.store.eraseCustomer(storeDomain.toLowerCase(), addressKey(email));
  }

  eraseStore(storeDomain: string): Promise<void> {
    return this.store.eraseStore(storeDomain.toLowerCase());
  }

  /**
   * The orders API: a store's own agent reports an order of another platform. Tenancy is the
   * inventory API's: only an agent bound to the store.
   */
  async reportOrder(caller: Caller, domain: string, report: Omit<OrderReport, 'storeDomain' | 'source'>): Promise<void> {
    const storeDomain = ownStore(caller, domain);
    await this.deps.stores.requireStorePlatform(storeDomain, report.lines.flatMap((line, i) => idsAt(`/body/lines/${i}`, line)));
    await this.recordOrder({ ...report, storeDomain, source: 'api' });
  }

  async reportRefund(caller: Caller, domain: string, report: Omit<RefundReport, 'storeDomain'>): Promise<void> {
    await this.recordRefund({ ...report, storeDomain: ownStore(caller, domain) });
  }

  async reportCancellation(caller: Caller, domain: string, report: Omit<CancellationReport, 'storeDomain'>): Promise<void> {
    await this.recordCancellation({ ...report, storeDomain: ownStore(caller, domain) });
  }

  /** Of these checks, the keys of those whose shopper bought the product since: reminders skip them. */
  orderedSince(storeDomain: string, checks: Array<{ key: string; email: string; productId: string; variantId: string | null; since: string }>): Promise<Set<string>> {
    return this.store.orderedSince(
      storeDomain,
      checks.map((check) => ({ ...check, emailKey: addressKey(check.email) })),
    );
  }

  /**
   * getPerformance: what alerts did over the last `days` days, overall, per day and per product.
   * Sent alerts, clicks and attributed orders are read from the per-day figures kept beside the
   * ledger, the clicks and the order lines (migrations 0018 and 0019), so the report costs the
   * same at any size of the store.
   */
  async performance(caller: Caller, domain: string, days = 30, now = new Date()): Promise<Performance> {
    const shop = ownStore(caller, domain);
    const first = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate()) - (days - 1) * DAY_MS);
    const since = first.toISOString();
    const fromDay = since.slice(0, 10);
    const [subscriptions, sentDaily, clicksDaily, ordersDaily, ordersPerChannel, perProduct] = await Promise.all([
      this.deps.waiting.subscriptionCounts(caller, shop),
      this.deps.alerts.sentDaily(caller, shop, fromDay),
      this.store.clicksDaily(shop, fromDay),
      this.store.ordersDaily(shop, fromDay),
      this.store.ordersPerChannel(shop, fromDay),
      this.store.ordersPerProduct(shop, fromDay),
    ]);
    const revenue = {
      shop: moneyPer(ordersDaily.map((row) => ({ currency: row.shop_currency, minor: row.net_shop_minor }))),
      presentment: moneyPer(ordersDaily.map((row) => ({ currency: row.currency, minor: row.net_minor }))),
    };
    const direct = sum(ordersDaily.map((row) => row.direct_orders));
    const orders = { direct, assisted: sum(ordersDaily.map((row) => row.orders)) - direct };
    // The chart and the channels are in the store's currency (the first, if it ever changed).
    const currency = revenue.shop[0]?.currency;
    const inCurrency = ordersDaily.filter((row) => row.shop_currency === currency);
    const perChannel = ordersPerChannel.filter((row) => row.shop_currency === currency);
    const alerts = sentDaily.filter((row) => row.kind === 'alert');
    const sent = sum(alerts.map((row) => row.n));
    const clicks = sum(clicksDaily.map((row) => row.n));
    const total = orders.direct + orders.assisted;
    const countOf = (rows: Array<{ n: number }>) => sum(rows.map((row) => row.n));
    return {
      shop,
      from: since,
      to: now.toISOString(),
      days,
      waiting: subscriptions.active ?? 0,
      sent,
      reminders: countOf(sentDaily.filter((row) => row.kind === 'reminder')),
      clicks,
      orders: { ...orders, total },
      conversionRate: sent === 0 ? 0 : round4(total / sent),
      clickRate: sent === 0 ? 0 : round4(clicks / sent),
      revenue: revenue.shop,
      revenueByPresentmentCurrency: revenue.presentment,
      byDay: everyDay(first, days).map((day) => {
        const figures = inCurrency.filter((row) => row.day === day);
        return {
          day,
          sent: countOf(alerts.filter((row) => row.day === day)),
          clicks: countOf(clicksDaily.filter((row) => row.day === day)),
          orders: sum(figures.map((row) => row.orders)),
          revenueMinor: sum(figures.map((row) => row.net_shop_minor)),
        };
      }),
      byChannel: CHANNEL_NAMES.map((channel) => {
        const figures = perChannel.find((row) => row.channel === channel);
        return {
          channel,
          sent: countOf(alerts.filter((row) => row.channel === channel)),
          clicks: countOf(clicksDaily.filter((row) => row.channel === channel)),
          orders: figures?.orders ?? 0,
          revenueMinor: figures?.revenue ?? 0,
        };
      }),
      products: await this.productFigures(caller, shop, fromDay, perProduct),
    };
  }

  /**
   * The products the report lists: most revenue first, then most waiting, then by id. Figures are
   * read only for the products that can make the list: every product with attributed orders in
   * the window, the most waited for, and (when those leave room) the first by id of those alerts
   * went out or were clicked for. The last three are each as long as the list, so no product
   * outside them can rank above the last one shown.
   */
  private async productFigures(
    caller: Caller,
    shop: string,
    fromDay: string,
    orders: Array<{ product_id: string; variant_id: string | null; orders: number; currency: string; revenue: number }>,
  ): Promise<ProductPerformance[]> {
    const mostWanted = await this.deps.waiting.demandOf(caller, shop, PRODUCTS_SHOWN, 'most-wanted');
    const byKey = new Map<string, ProductPerformance>();
    const entry = (productId: string, variantId: string | null) => {
      const key = `${productId}\n${variantId ?? ''}`;
      let found = byKey.get(key);
      if (!found) byKey.set(key, (found = { productId, variantId, title: null, waiting: 0, sent: 0, clicked: 0, ordered: 0, revenue: [] }));
      return found;
    };
    for (const row of orders) {
      const product = entry(row.product_id, row.variant_id);
      product.ordered += row.orders;
      product.revenue.push({ currency: row.currency, minor: row.revenue });
    }
    const ordered = [...byKey.values()];
    for (const row of mostWanted) entry(row.productId, row.variantId).waiting = row.waiting;
    if (mostWanted.length < PRODUCTS_SHOWN) {
      // Everyone waiting is in the most wanted, and there is room for products with neither
      // revenue nor anyone waiting (they come last, by id) when fewer than a list have either.
      const ranked = [...byKey.values()].filter((product) => revenueOf(product) > 0 || product.waiting > 0).length;
      if (ranked < PRODUCTS_SHOWN) {
        const [sentFirst, clickedFirst] = await Promise.all([
          this.deps.alerts.productsSentSince(caller, shop, fromDay, PRODUCTS_SHOWN),
          this.store.productsClickedSince(shop, fromDay, PRODUCTS_SHOWN),
        ]);
        for (const row of [...sentFirst, ...clickedFirst]) entry(row.product_id, row.variant_id);
      }
    } else {
      // A full most-wanted list: products with orders outside it may have shoppers waiting too.
      const unknown = new Set(ordered.filter((product) => product.waiting === 0).map((product) => product.productId));
      for (const row of await this.deps.waiting.waitingFor(caller, shop, [...unknown])) {
        const product = byKey.get(`${row.productId}\n${row.variantId ?? ''}`);
        if (product && product.waiting === 0) product.waiting = row.waiting;
      }
    }
    const shown = [...byKey.values()].sort(byRevenueThenWaiting).slice(0, PRODUCTS_SHOWN);
    const shownIds = [...new Set(shown.map((product) => product.productId))];
    const [sent, clicks, known] = await Promise.all([
      this.deps.alerts.sentForProducts(caller, shop, fromDay, shownIds),
      this.store.clicksForProducts(shop, fromDay, shownIds),
      // The titles of every product shown, in one read of the store's known stock.
      this.deps.products.stockStatusOf(caller, shop, shownIds),
    ]);
    const shownByKey = new Map(shown.map((product) => [`${product.productId}\n${product.variantId ?? ''}`, product]));
    for (const row of sent) {
      const product = shownByKey.get(`${row.product_id}\n${row.variant_id ?? ''}`);
      if (product && row.kind === 'alert') product.sent += row.n;
    }
    for (const row of clicks) {
      const product = shownByKey.get(`${row.product_id}\n${row.variant_id ?? ''}`);
      if (product) product.clicked += row.n;
    }
    for (const product of shown) {
      const exact = known.find((row) => row.productId === product.productId && row.variantId === product.variantId);
      const any = exact ?? known.find((row) => row.productId === product.productId);
      product.title = any ? [any.productTitle, exact?.variantTitle].filter(Boolean).join(' — ') || null : null;
    }
    return shown;
  }

  /** exportCsv: the store's subscribers, alerts or attributed orders as a CSV stream; tenancy is decided before it starts. */
  exportCsv(caller: Caller, domain: string, kind: ExportKind): Readable {
    return exportCsv({ ...this.deps.exports, attributedOrderRows: (c, d) => this.attributedOrderRows(c, d) }, caller, domain, kind);
  }

  /** The week's figures of the owner's digest, for [from, to). */
  async digestFigures(storeDomain: string, from: string, to: string): Promise<DigestFigures> {
    const [signups, sent, clicks, orders, revenue] = await Promise.all([
      this.deps.waiting.signupsBetween(storeDomain, from, to),
      this.deps.alerts.sentBetween(storeDomain, from, to),
      this.store.countClicks(storeDomain, from, to),
      this.store.ordersByKind(storeDomain, from, to),
      this.store.revenue(storeDomain, from, to),
    ]);
    return { signups, sent, clicks, orders: orders.direct + orders.assisted, revenue: revenue.shop };
  }

  /**
   * A subscription's news so far, oldest first, as its callbacks tell it (docs/agents.md#callbacks):
   * the product back for it (its first alert), each alert sent, an alert's click, an order credited
   * to one. Only for a caller who may read the subscription.
   */
  async subscriptionNews(caller: Caller, subscriptionId: string): Promise<Array<Pick<AgentNews, 'type' | 'occurredAt' | 'data'>>> {
    await this.deps.waiting.getSubscription(subscriptionId, caller);
    const sent = await this.deps.alerts.sentForSubscription(subscriptionId, NEWS_ALERTS_SHOWN);
    const ids = sent.map((alert) => alert.id);
    const [clicks, credited] = await Promise.all([this.store.clicksOf(ids), this.store.attributionsOf(ids)]);
    const news: Array<Pick<AgentNews, 'type' | 'occurredAt' | 'data'>> = [];
    for (const alert of sent) {
      const about = { productId: alert.product_id, variantId: alert.variant_id };
      // A reminder is a second message about the same restock: the product came back once.
      if (alert.kind === 'alert') news.push({ type: 'subscription.restocked', occurredAt: alert.sent_at, data: { ...about, restockId: alert.restock_id } });
      news.push({ type: 'alert.sent', occurredAt: alert.sent_at, data: { ...about, alertId: alert.id, kind: alert.kind, channel: alert.channel, sentAt: alert.sent_at } });
      const clickedAt = clicks.get(alert.id);
      if (clickedAt) news.push({ type: 'alert.clicked', occurredAt: clickedAt, data: { ...about, alertId: alert.id, clickedAt } });
    }
    // One piece of news per order, however many of its lines the subscription's alerts are credited with.
    const orders = new Map<string, typeof credited>();
    for (const line of credited) orders.set(line.order_id, [...(orders.get(line.order_id) ?? []), line]);
    for (const lines of orders.values()) {
      const { notification_id: alertId, placed_at: placedAt } = lines[0]!;
      const attribution = lines.some((line) => line.kind === 'direct') ? 'direct' : 'assisted';
      news.push({ type: 'order.attributed', occurredAt: placedAt, data: { alertId, attribution, placedAt } });
    }
    return news.sort((a, b) => a.occurredAt.localeCompare(b.occurredAt));
  }

  /** What one alert led to, for its audit: when it was clicked and the order lines credited to it. */
  async alertOutcome(caller: Caller, domain: string, alertId: string): Promise<{ clickedAt: string | null; orders: AttributionRow[] }> {
    const { clickedAt, attributions } = await this.store.outcomeOf(ownStore(caller, domain), alertId);
    return { clickedAt, orders: attributions };
  }

  /** The store's attributed order lines, oldest first, a page at a time (exports). Tenancy is decided at the call, before anything streams. */
  attributedOrderRows(caller: Caller, domain: string): AsyncGenerator<AttributionRow> {
    const shop = ownStore(caller, domain);
    return inPages<AttributionRow, { placedAt: string; orderId: string; lineId: string }>((after, limit) => this.store.attributionPage(shop, after, limit), (row) => ({ placedAt: row.placed_at, orderId: row.order_id, lineId: row.line_id }));
  }
}

function attributionRow(storeDomain: string, report: OrderReport, attribution: Attribution): AttributionRow {
  const line = report.lines.find((candidate) => candidate.lineId === attribution.lineId)!;
  return {
    store_domain: storeDomain,
    order_id: report.orderId,
    line_id: attribution.lineId,
    notification_id: attribution.alertId,
    channel: attribution.channel,
    product_id: line.productId,
    variant_id: line.variantId,
    kind: attribution.kind,
    placed_at: report.placedAt,
    amount_minor: attribution.amount.minor,
    currency: attribution.amount.currency,
    shop_amount_minor: attribution.shopAmount.minor,
    shop_currency: attribution.shopAmount.currency,
    net_minor: attribution.amount.minor,
    net_shop_minor: attribution.shopAmount.minor,
  };
}

/** Each attribution's revenue net of the order's refunds and cancellation, as attribution.ts reckons it. */
function netOf(stored: StoredOrder): Array<{ lineId: string; net: number; netShop: number }> {
  const attributions: Attribution[] = stored.attributions.map((row) => ({
    lineId: row.line_id,
    alertId: row.notification_id,
    channel: row.channel,
    kind: row.kind,
    amount: { minor: Number(row.amount_minor), currency: row.currency },
    shopAmount: { minor: Number(row.shop_amount_minor), currency: row.shop_currency },
  }));
  const refunds: LineRefund[] = stored.refunds.map((row) => ({
    lineId: row.line_id,
    amount: { minor: Number(row.amount_minor), currency: row.currency },
    shopAmount: { minor: Number(row.shop_amount_minor), currency: row.shop_currency },
  }));
  return netRevenue(attributions, refunds, stored.order.cancelled_at !== null).map((line) => ({ lineId: line.lineId, net: line.amount.minor, netShop: line.shopAmount.minor }));
}

/**
 * The product page with the store's UTM parameters (and the variant selected, Shopify's
 * `?variant=`), or undefined when the known URL is not an http(s) address.
 */
/**
 * The store's UTM parameters for a click from this channel: a text's or a push's visits are not
 * e-mail's, so the default medium (`email`) becomes `sms` or `push`; a medium the store chose
 * itself is kept.
 */
export function utmFor(channel: ChannelName, utm: EffectiveSettings['utm']): EffectiveSettings['utm'] {
  return channel !== 'email' && utm.medium === DEFAULT_UTM.medium ? { ...utm, medium: channel } : utm;
}

export function landingUrl(productUrl: string | null, variantId: string | null, utm: EffectiveSettings['utm']): string | undefined {
  if (productUrl === null) return undefined;
  let url: URL;
  try {
    url = new URL(productUrl);
  } catch {
    return undefined;
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return undefined;
  // Shopify selects a variant by its numeric id; stores keep it as a GID (gid://shopify/ProductVariant/N) or bare.
  const numeric = variantId === null ? undefined : /^(?:gid:\/\/shopify\/ProductVariant\/)?(\d+)$/.exec(variantId)?.[1];
  if (numeric !== undefined && !url.searchParams.has('variant')) url.searchParams.set('variant', numeric);
  return withUtm(url, utm).href;
}

function withUtm(url: URL, utm: EffectiveSettings['utm']): URL {
  url.searchParams.set('utm_source', utm.source);
  url.searchParams.set('utm_medium', utm.medium);
  url.searchParams.set('utm_campaign', utm.campaign);
  return url;
}

function everyDay(first: Date, days: number): string[] {
  return Array.from({ length: days }, (_, i) => new Date(first.getTime() + i * DAY_MS).toISOString().slice(0, 10));
}

function utc(time: string): string {
  return new Date(time).toISOString();
}

function sum(values: number[]): number {
  return values.reduce((total, value) => total + value, 0);
}

function round4(value: number): number {
  return Math.round(value * 10_000) / 10_000;
}

/** Amounts summed per currency, in currency order. */
function moneyPer(amounts: Array<{ currency: string; minor: number }>): Array<{ currency: string; minor: number }> {
  const totals = new Map<string, number>();
  for (const { currency, minor } of amounts) totals.set(currency, (totals.get(currency) ?? 0) + minor);
  return [...totals].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([currency, minor]) => ({ currency, minor }));
}

function byRevenueThenWaiting(a: ProductPerformance, b: ProductPerformance): number {
  return revenueOf(b) - revenueOf(a) || b.waiting - a.waiting || a.productId.localeCompare(b.productId);
}

function revenueOf(product: ProductPerformance): number {
  return sum(product.revenue.map((money) => money.minor));
}
