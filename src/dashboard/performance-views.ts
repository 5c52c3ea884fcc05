import type { AttributionRow } from '../conversions/service.ts';
import { CHANNELS } from '../channels.ts';
import type { Performance } from '../conversions/service.ts';
import { formatMinor } from '../conversions/service.ts';
import { html, type SafeHtml } from '../core/html.ts';
import { dailyBarChart, inlineBar } from './charts.ts';
import { when } from '../core/dashboard-panel.ts';

/** Amounts in each currency they were taken in, joined: one store rarely has more than one. */
function amounts(money: Array<{ currency: string; minor: number }>): string {
  return money.length === 0 ? '0' : money.map((entry) => formatMinor(entry)).join(', ');
}

function percent(rate: number): string {
  return `${Math.round(rate * 1000) / 10}%`;
}

/**
 * The overview's headline: revenue won back over 30 days as figures and a chart by day, in the
 * store's currency. The figures carry `data-figure` so tests read them as a merchant does.
 */
export function revenueSection(p: Performance): SafeHtml {
  const currency = p.revenue[0]?.currency;
  const tiles: Array<[string, string, string]> = [
    ['revenue', 'Revenue won back', amounts(p.revenue)],
    ['orders', 'Orders from alerts', String(p.orders.total)],
    ['conversion-rate', 'Conversion rate', percent(p.conversionRate)],
    ['clicks', 'Clicks', String(p.clicks)],
    ['sent', `Alerts sent in ${p.days} days`, String(p.sent)],
  ];
  const chart = currency
    ? dailyBarChart(
        p.byDay.map((day) => ({ day: day.day, value: day.revenueMinor })),
        'Revenue won back',
        (minor) => formatMinor({ minor: Math.round(minor), currency }),
      )
    : html`<p>No order has been credited to an alert yet. Orders by shoppers who got an alert count here once the store reports them (Shopify does so by itself).</p>`;
  return html`<h2>Revenue won back, last ${p.days} days</h2>
<ul class="tiles">${tiles.map(([figure, label, value]) => html`<li><span class="value" data-figure="${figure}">${value}</span>${label}</li>`)}</ul>
<p class="muted">${p.orders.direct} direct (the shopper followed the alert's link) and ${p.orders.assisted} assisted (ordered within the window without clicking); refunds and cancellations taken back.</p>
${chart}
<p><a href="/dashboard/performance">Per product</a></p>`;
}

/** Per product: waiting, sent, clicked, ordered, revenue; and the CSV exports. */
export function performanceBody(p: Performance): SafeHtml {
  const max = Math.max(0, ...p.products.map((product) => product.revenue.reduce((sum, money) => sum + money.minor, 0)));
  const rows = p.products.map(
    (product) => html`<tr><td>${product.title ?? product.productId}<br><span class="muted">${product.variantId ?? 'any variant'}</span></td>
<td class="num">${product.waiting}</td><td class="num">${product.sent}</td><td class="num">${product.clicked}</td><td class="num">${product.ordered}</td>
<td class="num">${amounts(product.revenue)}</td><td>${inlineBar(product.revenue.reduce((sum, money) => sum + money.minor, 0), max)}</td></tr>`,
  );
  return html`<h1>Performance</h1>
<p>What alerts did over the last ${p.days} days, per product and variant. Revenue is net of refunds and cancellations, in the store's currency.</p>
${
  p.products.length
    ? html`<div class="table-scroll"><table><caption>Alerts, clicks, orders and revenue per product</caption>
<thead><tr><th scope="col">Product</th><th scope="col" class="num">Waiting</th><th scope="col" class="num">Sent</th><th scope="col" class="num">Clicked</th><th scope="col" class="num">Ordered</th><th scope="col" class="num">Revenue</th><th scope="col"><span class="visually-hidden">Share</span></th></tr></thead>
<tbody>${rows}</tbody></table></div>`
    : html`<p>Nothing to show yet.</p>`
}
${channelTable(p)}
<h2>Exports</h2>
<p>CSV files (UTF-8, comma separated), streamed whatever their size:</p>
<ul><li><a href="/dashboard/exports/subscribers" download>Subscribers</a></li><li><a href="/dashboard/exports/alerts" download>Alerts</a></li><li><a href="/dashboard/exports/orders" download>Attributed orders</a></li></ul>`;
}

/** The channels side by side: what each sent, and the clicks, orders and revenue it brought. */
function channelTable(p: Performance): SafeHtml {
  const currency = p.revenue[0]?.currency;
  const rows = p.byChannel.map(
    (row) => html`<tr><th scope="row">${CHANNELS[row.channel].label}</th><td class="num" data-figure="${row.channel}-sent">${row.sent}</td><td class="num" data-figure="${row.channel}-clicks">${row.clicks}</td>
<td class="num" data-figure="${row.channel}-orders">${row.orders}</td><td class="num">${currency ? formatMinor({ minor: row.revenueMinor, currency }) : '0'}</td></tr>`,
  );
  return html`<h2>By channel</h2>
<div class="table-scroll"><table><caption>Alerts, clicks, orders and revenue per channel</caption>
<thead><tr><th scope="col">Channel</th><th scope="col" class="num">Sent</th><th scope="col" class="num">Clicked</th><th scope="col" class="num">Ordered</th><th scope="col" class="num">Revenue</th></tr></thead>
<tbody>${rows}</tbody></table></div>`;
}

/** In an alert's audit: when its link was first followed, and the order lines credited to it. */
export function alertOutcomeSection(outcome: { clickedAt: string | null; orders: AttributionRow[] }): SafeHtml {
  const lines = outcome.orders.map(
    (line) => html`<li>order ${line.order_id}, line ${line.line_id} (${line.kind}): ${formatMinor({ minor: Number(line.net_shop_minor), currency: line.shop_currency })}${
      Number(line.net_shop_minor) !== Number(line.shop_amount_minor) ? html` of ${formatMinor({ minor: Number(line.shop_amount_minor), currency: line.shop_currency })} after refunds` : ''
    }, placed ${when(line.placed_at)}</li>`,
  );
  return html`<h2>What it led to</h2>
<dl><dt>Clicked</dt><dd data-figure="clicked-at">${outcome.clickedAt ? when(outcome.clickedAt) : 'not clicked'}</dd>
<dt>Ordered</dt><dd data-figure="ordered">${lines.length ? html`<ul>${lines}</ul>` : 'nothing credited to this alert'}</dd></dl>`;
}
