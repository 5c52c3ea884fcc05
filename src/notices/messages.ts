import { formatMinor } from '../conversions/service.ts';
import { html, type SafeHtml } from '../core/html.ts';

/** One waitlist that reached the threshold, as the owner reads it. */
export interface CrossedWaitlist {
  productId: string;
  variantId: string | null;
  productTitle: string | null;
  variantTitle: string | null;
  waiting: number;
}

/** What a digest reports: `DigestFigures` for the week from `from` to `to`. */
export interface DigestReport {
  storeDomain: string;
  from: string;
  to: string;
  signups: number;
  sent: number;
  clicks: number;
  orders: number;
  revenue: { minor: number; currency: string }[];
}

export interface RenderedMail {
  subject: string;
  text: string;
  html: string;
}

/** The owner is told in one mail of every waitlist of a store that reached the threshold in one look. */
export function waitlistNotice(storeDomain: string, threshold: number, crossed: CrossedWaitlist[], dashboardUrl: string): RenderedMail {
  const first = crossed[0]!;
  const subject =
    crossed.length === 1
      ? `${first.waiting} shoppers are waiting for ${oneLine(nameOf(first), 120)}`
      : `${crossed.length} products reached your waitlist threshold of ${threshold}`;
  const lines = crossed.map((waitlist) => `- ${nameOf(waitlist)}: ${waitlist.waiting} waiting`);
  const text = [
    `Your waitlist threshold of ${threshold} was reached on ${storeDomain}:`,
    '',
    ...lines,
    '',
    'Each shopper on these waitlists gets an alert as soon as the product is back in stock.',
    `See the demand in your dashboard: ${dashboardUrl}`,
    '',
    `You get this e-mail because ${storeDomain} set a waitlist threshold; clear it in the dashboard's settings to stop these e-mails.`,
  ].join('\n');
  const body = html`<p>Your waitlist threshold of ${threshold} was reached on ${storeDomain}:</p>
<ul>${crossed.map((waitlist) => html`<li>${nameOf(waitlist)}: <strong>${waitlist.waiting}</strong> waiting</li>`)}</ul>
<p>Each shopper on these waitlists gets an alert as soon as the product is back in stock.</p>
<p><a href="${dashboardUrl}">See the demand in your dashboard</a></p>
<p style="color:#555">You get this e-mail because ${storeDomain} set a waitlist threshold; clear it in the dashboard's settings to stop these e-mails.</p>`;
  return { subject, text, html: document(subject, body) };
}

/** The weekly digest: last week's sign-ups, alerts, clicks, orders and revenue won back. */
export function weeklyDigest(report: DigestReport, dashboardUrl: string): RenderedMail {
  const period = `${day(report.from)} to ${day(report.to)}`;
  const subject = `Your week on Restock: ${report.sent} alerts sent, ${report.orders} orders won back`;
  const rows: Array<[string, string]> = [
    ['Sign-ups', String(report.signups)],
    ['Alerts sent', String(report.sent)],
    ['Clicks', String(report.clicks)],
    ['Orders attributed', String(report.orders)],
    ['Revenue won back', revenueOf(report.revenue)],
  ];
  const text = [
    `${report.storeDomain}, ${period} (UTC):`,
    '',
    ...rows.map(([label, value]) => `${label}: ${value}`),
    '',
    `More in your dashboard: ${dashboardUrl}`,
    '',
    `You get this e-mail because ${report.storeDomain} turned on the weekly digest; turn it off in the dashboard's settings.`,
  ].join('\n');
  const body = html`<p>${report.storeDomain}, ${period} (UTC):</p>
<table>${rows.map(([label, value]) => html`<tr><th style="text-align:left;padding-right:1em">${label}</th><td>${value}</td></tr>`)}</table>
<p><a href="${dashboardUrl}">More in your dashboard</a></p>
<p style="color:#555">You get this e-mail because ${report.storeDomain} turned on the weekly digest; turn it off in the dashboard's settings.</p>`;
  return { subject, text, html: document(subject, body) };
}

function nameOf(waitlist: CrossedWaitlist): string {
  const product = waitlist.productTitle ?? waitlist.productId;
  if (waitlist.variantId === null) return `${product} (any variant)`;
  return `${product} (${waitlist.variantTitle ?? waitlist.variantId})`;
}

/** Per currency, never summed across currencies; nothing won back reads as such. */
function revenueOf(revenue: DigestReport['revenue']): string {
  const amounts = revenue.filter((money) => money.minor !== 0).map(moneyText);
  return amounts.length > 0 ? amounts.join(', ') : 'none yet';
}

function moneyText(money: { minor: number; currency: string }): string {
  try {
    return formatMinor(money);
  } catch {
    // A currency Intl does not know still shows, as its amount in minor units and its code.
    return `${money.minor} ${money.currency} (minor units)`;
  }
}

/** A store's text in a header: one line, bounded. */
function oneLine(value: string, max: number): string {
  const flat = value.replace(/[\u0000-\u001f\u007f]+/g, ' ').trim();
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat;
}

function day(iso: string): string {
  return iso.slice(0, 10);
}

function document(title: string, body: SafeHtml): string {
  return html`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${title}</title></head>
<body style="font-family:system-ui,sans-serif;line-height:1.5;color:#111">
${body}
</body></html>`.value;
}
