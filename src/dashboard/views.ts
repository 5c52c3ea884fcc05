// Longer than most files on purpose: the dashboard's pages share their tables and page parts, which
// one file keeps side by side (the webhooks' and the performance pages have their own).
import { LANGUAGES } from '../core/languages.ts';
import { STOREFRONT_OFFERS, type ContactChannel, type StorefrontOffer } from '../channels.ts';
import type { SubscriptionRow } from '../alerts/service.ts';
import { formatPrice } from '../billing/service.ts';
import type { BillingService, PlanUsage } from '../billing/service.ts';
import { html, page, SafeHtml, type AppBridgePage } from '../core/html.ts';
import type { OutboxMessage } from '../core/mail/outbox-repository.ts';
import type { NotificationRow, RestockRow, SuppressionRow } from '../dispatch/service.ts';
import type { Store } from '../stores/schemas.ts';
import { dailyBarChart, inlineBar } from './charts.ts';
import { csrfField, when, type DashboardPanel, type FieldErrors } from '../core/dashboard-panel.ts';
import { alertOutcomeSection, revenueSection } from './performance-views.ts';
import { productKey, type DashboardService, type Demand, type ProductTitles } from './service.ts';

/** The dashboard's sections, in navigation order. */
export const SECTIONS = [
  { path: '/dashboard', label: 'Overview' },
  { path: '/dashboard/performance', label: 'Performance' },
  { path: '/dashboard/demand', label: 'Demand' },
  { path: '/dashboard/alerts', label: 'Alerts' },
  { path: '/dashboard/audience', label: 'Unsubscribes' },
  { path: '/dashboard/plan', label: 'Plan' },
  { path: '/dashboard/settings', label: 'Settings' },
  // The store's platform's own page, when it has one (a WooCommerce store's connection).
  { path: 'panel', label: '' },
  { path: '/dashboard/webhooks', label: 'Webhooks' },
  // The integrations every store has (its Klaviyo connection).
  { path: 'integrations', label: '' },
  { path: '/dashboard/outbox', label: 'Outbox', only: 'embeddedMail' },
] as const;

/** What only some stores have (the outbox in embedded mode, their platform's own page), and the integrations' pages. */
export interface OptionalSections {
  embeddedMail: boolean;
  panel: Pick<DashboardPanel, 'path' | 'label'> | undefined;
  integrations: ReadonlyArray<Pick<DashboardPanel, 'path' | 'label'>>;
}

type Overview = Awaited<ReturnType<DashboardService['overview']>>;
type PlanOffer = ReturnType<BillingService['listPlans']>[number];

/** Who a page is for: the store, and the CSRF token of a cookie session (none inside the Shopify admin). */
export interface PageOwner {
  shop: string;
  csrfToken?: string;
}

/**
 * A page of the signed-in dashboard: navigation, the store's name and sign-out. Inside the Shopify
 * admin (`appBridge`) there is nothing to sign out of: the admin is the sign-in.
 */
export function dashboardPage(title: string, owner: PageOwner, current: string, body: SafeHtml, shown: OptionalSections, appBridge?: AppBridgePage): string {
  const sections = SECTIONS.flatMap((section) => {
    if (section.path === 'panel') return shown.panel ? [{ path: `/dashboard/${shown.panel.path}`, label: shown.panel.label }] : [];
    if (section.path === 'integrations') return shown.integrations.map((integration) => ({ path: `/dashboard/${integration.path}`, label: integration.label }));
    return 'only' in section && !shown[section.only] ? [] : [section];
  });
  const links = sections.map(
    (section) =>
      html`<li><a href="${section.path}"${section.path === current ? html` aria-current="page"` : ''}>${section.label}</a></li>`,
  );
  const signOut = appBridge
    ? ''
    : html`<form method="post" action="/dashboard/sign-out">${csrfField(owner.csrfToken)}<button class="quiet" type="submit">Sign out of ${owner.shop}</button></form>`;
  const header = html`<nav aria-label="Dashboard"><ul>${links}</ul></nav>
${signOut}`;
  return page(title, body, { wide: true, header, ...(appBridge ? { appBridge } : {}) });
}

export function overviewBody(o: Overview, snippet: string): SafeHtml {
  const quota = o.plan.monthlyAlertQuota;
  const tiles = [
    ['Waiting subscribers', o.waiting],
    ['Alerts sent', o.ledger.sent],
    ['Alerts pending', o.ledger.queued + o.ledger.sending],
    ['Held by the plan', o.heldByPlan],
    ['Unsubscribed', o.unsubscribed],
    ['Suppressed addresses', o.suppressed],
  ] as const;
  const fresh = o.waiting === 0 && o.ledger.sent === 0 && o.unsubscribed === 0;
  return html`<h1>${o.store.domain}</h1>
${fresh ? widgetInstructions(snippet) : ''}
<ul class="tiles">${tiles.map(([label, value]) => html`<li><span class="value">${value}</span>${label}</li>`)}</ul>
${revenueSection(o.performance)}
<h2>Alerts sent, last 30 days</h2>
${dailyBarChart(o.performance.byDay.map((d) => ({ day: d.day, value: d.sent })), 'Alerts sent')}
<h2>Plan</h2>
${planSummary(o.plan)}
${o.heldByPlan > 0
  ? o.plan.requiresOwnMailProvider && !o.store.ownSmtp
    ? html`<p class="error">${o.heldByPlan} alerts are waiting because the ${o.plan.plan} plan sends only through your own e-mail provider, and none is set. <a href="/dashboard/settings">Set your SMTP server</a> or <a href="/dashboard/plan">change plan</a>.</p>`
    : o.plan.overage.billed
      ? html`<p class="error">${o.heldByPlan} alerts are waiting because this period's allowance of ${quota} and your ceiling of ${usd(o.plan.overage.ceiling)} beyond it are used up. <a href="/dashboard/plan">Raise the ceiling or change plan</a>.</p>`
      : html`<p class="error">${o.heldByPlan} alerts are waiting because this period's allowance of ${quota} is used up. <a href="/dashboard/plan">Change plan</a>.</p>`
  : ''}
${o.nextRestock ? nextRestockLine(o.nextRestock) : ''}
<h2>Most wanted</h2>
${o.demand.length ? demandTable(o.demand, 'Products with the most waiting subscribers') : html`<p>No one is waiting for a product yet.</p>`}
<p><a href="/dashboard/demand">All demand</a></p>
<h2>Latest alerts</h2>
${o.recent.length ? alertsTable(o.recent, o.titles) : html`<p>No alert has been sent yet.</p>`}
<p><a href="/dashboard/alerts">All alerts</a></p>
${o.restocks.length ? html`<h2>Recent restocks</h2>${restocksTable(o.restocks, o.titles)}` : ''}`;
}

export function demandBody(demand: Demand[]): SafeHtml {
  return html`<h1>Demand</h1>
<p>Subscribers waiting per product and variant. A restock mails them in sign-up order, in batches sized to the stock.</p>
${demand.length ? demandTable(demand, 'Waiting subscribers per product and variant') : html`<p>No one is waiting for a product yet.</p>`}`;
}

function demandTable(demand: Demand[], caption: string): SafeHtml {
  const max = Math.max(...demand.map((d) => d.waiting));
  const rows = demand.map(
    (d) => html`<tr><td>${d.title}</td><td>${d.variantTitle ?? 'Any variant'}</td>
<td class="num">${d.waiting}</td><td>${inlineBar(d.waiting, max)}</td><td class="num">${d.available ?? '–'}</td></tr>`,
  );
  return html`<div class="table-scroll"><table><caption>${caption}</caption>
<thead><tr><th scope="col">Product</th><th scope="col">Variant</th><th scope="col" class="num">Waiting</th><th scope="col"><span class="visually-hidden">Share</span></th><th scope="col" class="num">In stock</th></tr></thead>
<tbody>${rows}</tbody></table></div>`;
}

const STATUSES = ['sent', 'queued', 'sending', 'skipped', 'failed'] as const;

export function alertsBody({ rows, titles }: { rows: NotificationRow[]; titles: ProductTitles }, status: string | undefined): SafeHtml {
  const filters = [html`<li><a href="/dashboard/alerts"${status ? '' : html` aria-current="true"`}>All</a></li>`].concat(
    STATUSES.map((s) => html`<li><a href="/dashboard/alerts?status=${s}"${status === s ? html` aria-current="true"` : ''}>${s}</a></li>`),
  );
  return html`<h1>Alerts</h1>
<p>Every alert, why it was sent and what happened. Open one for its full record.</p>
<nav aria-label="Filter by status"><ul class="filters">${filters}</ul></nav>
${rows.length ? alertsTable(rows, titles) : html`<p>No alerts${status ? html` with status ${status}` : ''}.</p>`}`;
}

function alertsTable(rows: NotificationRow[], titles: ProductTitles): SafeHtml {
  const body = rows.map(
    (row) => html`<tr><td><a href="/dashboard/alerts/${row.id}">${row.email}</a></td><td>${titles.get(productKey(row.product_id, row.variant_id)) ?? row.product_id}</td>
<td class="status-${row.status}">${row.status}</td><td>${when(row.sent_at ?? row.created_at)}</td><td>${row.outcome ?? ''}</td></tr>`,
  );
  return html`<div class="table-scroll"><table><caption class="visually-hidden">Alerts</caption>
<thead><tr><th scope="col">To</th><th scope="col">Product</th><th scope="col">Status</th><th scope="col">When</th><th scope="col">Outcome</th></tr></thead>
<tbody>${body}</tbody></table></div>`;
}

export function auditBody(audit: {
  notification: NotificationRow;
  restock: RestockRow | undefined;
  subscription: SubscriptionRow | undefined;
  product: string;
  outcome: Parameters<typeof alertOutcomeSection>[0];
}): SafeHtml {
  const { notification: n, restock: r, subscription: s } = audit;
  return html`<h1>Alert to ${n.email}</h1>
<h2>Why it was sent</h2>
<p>${n.reason}</p>
<dl>
<dt>Status</dt><dd class="status-${n.status}">${n.status}</dd>
<dt>Outcome</dt><dd>${n.outcome ?? '–'}</dd>
<dt>Sent at</dt><dd>${n.sent_at ? when(n.sent_at) : 'not sent'}</dd>
<dt>Attempts</dt><dd>${n.attempts}</dd>
<dt>Batch</dt><dd>${n.batch} (place ${n.position + 1} in the queue)</dd>
<dt>Kind</dt><dd>${n.kind === 'reminder' ? 'a reminder after the alert' : 'the back-in-stock alert'}</dd>
<dt>Product</dt><dd>${audit.product}<br><span class="muted">${n.variant_id ?? n.product_id}</span></dd>
</dl>
${n.status === 'sent' ? alertOutcomeSection(audit.outcome) : ''}
<h2>The restock</h2>
${
  r
    ? html`<dl><dt>Detected</dt><dd>${when(r.detected_at)}</dd><dt>Source</dt><dd>${r.source}</dd><dt>In stock when detected</dt><dd>${r.available}</dd>
<dt>Batches</dt><dd>${r.batches}</dd><dt>Alerts planned</dt><dd>${r.planned}</dd><dt>Status</dt><dd>${r.status}${r.stop_reason ? html` — ${r.stop_reason}` : ''}</dd></dl>`
    : html`<p>The restock record is gone.</p>`
}
<h2>The subscription</h2>
${
  s
    ? html`<dl><dt>Subscribed</dt><dd>${when(s.created_at)}</dd><dt>Now</dt><dd>${s.status} (since ${when(s.updated_at)})</dd><dt>Made by</dt><dd>${s.agent_id ? html`agent ${s.agent_id}` : 'the storefront widget'}</dd></dl>`
    : html`<p>The subscription was erased.</p>`
}
<p><a href="/dashboard/alerts">All alerts</a></p>`;
}

export function audienceBody(audience: { unsubscribes: SubscriptionRow[]; suppressions: SuppressionRow[] }, csrf: string | undefined, errors: FieldErrors = [], typed = ''): SafeHtml {
  const unsubscribed = audience.unsubscribes.map(
    (row) => html`<tr><td>${row.email}</td><td>${row.product_id}${row.variant_id ? html`<br><span class="muted">${row.variant_id}</span>` : ''}</td><td>${when(row.updated_at)}</td></tr>`,
  );
  const suppressed = audience.suppressions.map(
    (row) => html`<tr><td>${row.email}</td><td>${row.reason}${row.detail ? html`<br><span class="muted">${row.detail}</span>` : ''}</td><td>${when(row.created_at)}</td>
<td><form method="post" action="/dashboard/suppressions/remove">${csrfField(csrf)}<input type="hidden" name="email" value="${row.email}"><button class="quiet" type="submit" aria-label="Mail ${row.email} again">Mail again</button></form></td></tr>`,
  );
  const emailError = errors.find((e) => e.pointer === '/email');
  return html`<h1>Unsubscribes and suppressions</h1>
<h2>Unsubscribed shoppers</h2>
${unsubscribed.length ? html`<div class="table-scroll"><table><caption class="visually-hidden">Unsubscribed shoppers</caption><thead><tr><th scope="col">E-mail</th><th scope="col">Product</th><th scope="col">When</th></tr></thead><tbody>${unsubscribed}</tbody></table></div>` : html`<p>No one has unsubscribed.</p>`}
<h2>Suppressed addresses</h2>
<p>Never mailed by this store: hard bounces, complaints, and addresses you add.</p>
${suppressed.length ? html`<div class="table-scroll"><table><caption class="visually-hidden">Suppressed addresses</caption><thead><tr><th scope="col">E-mail</th><th scope="col">Reason</th><th scope="col">Since</th><th scope="col"><span class="visually-hidden">Action</span></th></tr></thead><tbody>${suppressed}</tbody></table></div>` : html`<p>No address is suppressed.</p>`}
<form method="post" action="/dashboard/suppressions" novalidate>
${csrfField(csrf)}
<label for="suppress-email">Stop mailing an address</label>
<input id="suppress-email" name="email" type="email" autocomplete="off" value="${typed}"${emailError ? html` aria-invalid="true" aria-describedby="suppress-error"` : ''}>
${emailError ? html`<p id="suppress-error" class="error">${emailError.message}</p>` : ''}
<p><button type="submit">Suppress</button></p>
</form>`;
}

export function planBody(usage: PlanUsage, plans: PlanOffer[], csrf: string | undefined, errors: FieldErrors = []): SafeHtml {
  const offers = plans.map(
    (plan) => html`<tr><td><strong>${plan.name}</strong><br><span class="muted">${plan.description}</span></td>
<td>${formatPrice(Math.round(plan.amount * 100), plan.currency)} / ${plan.interval}</td><td class="num">${plan.monthlyAlertQuota}</td>
<td>${usage.plan === plan.plan && usage.status === 'active' ? html`<strong>Current plan</strong>` : html`<form method="post" action="/dashboard/plan/checkout">${csrfField(csrf)}<input type="hidden" name="plan" value="${plan.plan}"><button type="submit" aria-label="Choose the ${plan.name} plan">Choose</button></form>`}</td></tr>`,
  );
  return html`<h1>Plan and quota</h1>
${planSummary(usage)}
${usage.overage.billed ? overageCeilingForm(usage, csrf, errors) : ''}
<h2>Plans</h2>
<div class="table-scroll"><table><caption class="visually-hidden">Plans</caption><thead><tr><th scope="col">Plan</th><th scope="col">Price</th><th scope="col" class="num">Alerts per month</th><th scope="col"><span class="visually-hidden">Action</span></th></tr></thead><tbody>${offers}</tbody></table></div>`;
}

function planSummary(usage: PlanUsage): SafeHtml {
  const inAllowance = Math.min(usage.used, usage.monthlyAlertQuota);
  const left = usage.monthlyAlertQuota - inAllowance;
  const { overage } = usage;
  return html`<dl>
<dt>Plan</dt><dd>${usage.plan}${usage.status === 'past_due' ? html` <span class="error">(payment past due)</span>` : ''}</dd>
<dt>This period</dt><dd>${usage.periodStart.slice(0, 10)} to ${usage.periodEnd.slice(0, 10)}</dd>
<dt><label for="quota-meter" style="margin:0;font-weight:normal">Alerts used</label></dt><dd><meter id="quota-meter" min="0" max="${usage.monthlyAlertQuota}" low="${Math.round(usage.monthlyAlertQuota * 0.8)}" high="${Math.round(usage.monthlyAlertQuota * 0.95)}" optimum="0" value="${inAllowance}">${inAllowance} of ${usage.monthlyAlertQuota}</meter><br>${inAllowance} of ${usage.monthlyAlertQuota} (${left} left)</dd>
${overage.billed
  ? html`<dt>Beyond the allowance</dt><dd>${overage.alerts} alerts at ${usd(overage.pricePerAlert)}: ${usd(overage.amount)} of your ${usd(overage.ceiling)} ceiling</dd>`
  : ''}
${usage.requiresOwnMailProvider ? html`<dt>Sending</dt><dd>Through your own mail provider (set it under Settings)</dd>` : ''}
</dl>`;
}

function usd(amount: number): string {
  return formatPrice(Math.round(amount * 100), 'USD');
}

/** What a restock of the most wanted product would send now, cost beyond the allowance, and leave waiting. */
function nextRestockLine(next: NonNullable<Overview['nextRestock']>): SafeHtml {
  const cost = next.beyondAllowance > 0 ? html`${next.beyondAllowance} of them beyond your allowance, costing ${usd(next.amount)}` : html`all within your allowance, at no extra cost`;
  const held = next.held > 0 ? html` <span class="error">${next.held} would wait until the next period: <a href="/dashboard/plan">raise your ceiling or change plan</a>.</span>` : '';
  return html`<p>The next restock of <strong>${next.product.title}</strong> would alert its ${next.alerts} waiting shoppers: ${cost}.${held}</p>`;
}

/** The owner's ceiling on what alerts beyond the allowance may cost a period. */
function overageCeilingForm(usage: PlanUsage, csrf: string | undefined, errors: FieldErrors): SafeHtml {
  const problem = errors.find((e) => e.pointer === '/overageCeiling');
  return html`<h2>Beyond the allowance</h2>
<p>Alerts beyond your allowance go out at ${usd(usage.overage.pricePerAlert)} each, up to this ceiling a period; past it they wait for the next period.</p>
<form method="post" action="/dashboard/plan/overage-ceiling">${csrfField(csrf)}
<label for="f-overageCeiling">Ceiling a period (USD)</label>
<input id="f-overageCeiling" name="overageCeiling" type="number" min="0" max="10000" step="0.01" value="${usage.overage.ceiling.toFixed(2)}" aria-describedby="h-overageCeiling${problem ? ' e-overageCeiling' : ''}"${problem ? html` aria-invalid="true"` : ''}>
<p id="h-overageCeiling" class="muted">0 sends nothing beyond the allowance.</p>
${problem ? html`<p id="e-overageCeiling" class="error">${problem.message}</p>` : ''}
<button type="submit">Save the ceiling</button></form>`;
}

/** How to put the form on the store's product pages, with the store filled in. */
function widgetInstructions(snippet: string): SafeHtml {
  return html`<h2>The storefront form</h2>
<p>Shoppers sign up on your sold-out product pages. On Shopify, add the <strong>Back-in-stock alert</strong> block to your product template in the theme editor. Elsewhere, paste this tag where the form should appear (with the product's id in place of <code>{{ product.id }}</code>):</p>
<pre><code>${snippet}</code></pre>`;
}

/** Errors shown beside their own field; any other is listed above the form. */
const FIELD_NAMES = ['batchMultiplier', 'batchIntervalSeconds', 'minStock', 'frequencyCapMinutes', 'senderName', 'smtpUrl', 'doubleOptIn', 'country', 'quietStart', 'quietEnd', 'timeZone', 'twilioAccountSid', 'twilioAuthToken', 'twilioFrom'];
const FIELD_POINTERS = new Set([...FIELD_NAMES, ...STOREFRONT_OFFERS.map(([channel]) => channel)].map((name) => `/${name}`));

export function settingsBody(store: Store, csrf: string | undefined, errors: FieldErrors = [], saved = false, snippet?: string): SafeHtml {
  const s = store.settings;
  const error = (field: string) => errors.find((e) => e.pointer === `/${field}`);
  // `extra` holds attributes written here, never input.
  const field = (name: string, label: string, value: unknown, hint: string, type = 'number', extra = '') => {
    const problem = error(name);
    return html`<label for="f-${name}">${label}</label>
<input id="f-${name}" name="${name}" type="${type}" value="${value ?? ''}" ${new SafeHtml(extra)} aria-describedby="h-${name}${problem ? ` e-${name}` : ''}"${problem ? html` aria-invalid="true"` : ''}>
<p class="hint" id="h-${name}">${hint}</p>${problem ? html`<p class="error" id="e-${name}">${problem.message}</p>` : ''}`;
  };
  const choice = (name: string, label: string, value: string, options: Array<[string, string]>, hint: string) => {
    const problem = error(name);
    const items = options.map(([option, text]) => html`<option value="${option}"${option === value ? html` selected` : ''}>${text}</option>`);
    return html`<label for="f-${name}">${label}</label>
<select id="f-${name}" name="${name}" aria-describedby="h-${name}${problem ? ` e-${name}` : ''}"${problem ? html` aria-invalid="true"` : ''}>${items}</select>
<p class="hint" id="h-${name}">${hint}</p>${problem ? html`<p class="error" id="e-${name}">${problem.message}</p>` : ''}`;
  };
  // A channel's switch on the storefront's form: on, off, or (where its default depends on the store) unset.
  const storefrontSwitch = (channel: ContactChannel, { dashboard }: StorefrontOffer) =>
    choice(channel, dashboard.label, s[channel] === null ? '' : s[channel] ? 'on' : 'off', [...(dashboard.unset ? [['', dashboard.unset] as [string, string]] : []), ['on', 'Yes'], ['off', 'No']], dashboard.hint);
  const locales = LANGUAGES.map((l) => html`<option value="${l}"${s.locale === l ? html` selected` : ''}>${l}</option>`);
  const general = errors.filter((e) => !FIELD_POINTERS.has(e.pointer));
  return html`<h1>Settings</h1>
${saved ? html`<p role="status" class="status-sent">Saved.</p>` : ''}
${errors.length ? html`<p role="alert" class="error">Nothing was saved: ${errors.length === 1 ? 'one field needs' : `${errors.length} fields need`} attention.</p>` : ''}
${general.map((e) => html`<p class="error">${e.pointer}: ${e.message}</p>`)}
<form method="post" action="/dashboard/settings" novalidate>
${csrfField(csrf)}
<h2>Batch policy</h2>
${field('batchMultiplier', 'Subscribers per unit in stock', s.batchMultiplier, 'Each batch mails at most stock × this many subscribers. Leave empty for the default.', 'number', 'step="0.1" min="0.1" max="100"')}
${field('batchIntervalSeconds', 'Seconds between batches', s.batchIntervalSeconds, 'Stock is checked again before every batch.', 'number', 'min="0"')}
${field('minStock', 'Fewest units to announce', s.minStock, 'A restock smaller than this sends nothing.', 'number', 'min="1"')}
${field('frequencyCapMinutes', 'Frequency cap (minutes)', s.frequencyCapMinutes, 'At most one alert per address in this window; 0 for none.', 'number', 'min="0"')}
<h2>Sender</h2>
<label for="f-locale">Language of the alerts</label>
<select id="f-locale" name="locale">${locales}</select>
${field('senderName', 'Sender name', s.senderName, 'The name alerts come from, e.g. your store’s name.', 'text', 'maxlength="100"')}
${field('smtpUrl', 'Your own SMTP server', '', store.ownSmtp ? 'Set (kept sealed). Enter a new URL to replace it.' : 'smtp:// or smtps:// URL with credentials; alerts then go through it. Leave empty to keep the current sender.', 'text', 'autocomplete="off" spellcheck="false"')}
${store.ownSmtp ? html`<label><input type="checkbox" name="clearSmtp"> Stop using my SMTP server</label>` : ''}
<h2>Consent and channels</h2>
${choice('doubleOptIn', 'Ask shoppers to confirm by e-mail (double opt-in)', s.doubleOptIn, [['auto', 'When the store or the shopper is in the EU/EEA, the UK or Switzerland'], ['always', 'Always'], ['never', 'Never']], 'A new subscription waits for the shopper to click the link we e-mail; unconfirmed ones expire and are never alerted. Texts always ask for a YES.')}
${field('country', 'Store country', s.country, 'Two letters, e.g. DE; used when double opt-in is automatic.', 'text', 'maxlength="2" autocomplete="country"')}
${STOREFRONT_OFFERS.map(([channel, offer]) => storefrontSwitch(channel, offer))}
${field('quietStart', 'No texts from (hour)', s.smsQuietHours.start, 'Quiet hours in the shopper’s time zone, 0–23; texts due then wait until the end.', 'number', 'min="0" max="23"')}
${field('quietEnd', 'No texts until (hour)', s.smsQuietHours.end, 'Equal hours: no quiet hours.', 'number', 'min="0" max="23"')}
${field('timeZone', 'Store time zone', s.timeZone, 'IANA name, e.g. Europe/Paris; for shoppers whose time zone is unknown.', 'text', 'maxlength="64"')}
${field('twilioAccountSid', 'Your own Twilio Account SID', '', store.ownSmsSender ? 'Set (kept sealed). Enter all three parts to replace it.' : 'AC…; with the token and sender, texts go from your own Twilio account.', 'text', 'autocomplete="off" spellcheck="false"')}
${field('twilioAuthToken', 'Twilio auth token', '', 'Kept sealed, never shown again.', 'password', 'autocomplete="off"')}
${field('twilioFrom', 'Texts come from', '', 'An E.164 number (+15551234567) or a Messaging Service SID (MG…).', 'text', 'autocomplete="off" spellcheck="false"')}
${store.ownSmsSender ? html`<label><input type="checkbox" name="clearSmsSender"> Stop using my Twilio account</label>` : ''}
<p><button type="submit">Save settings</button></p>
</form>
${snippet ? widgetInstructions(snippet) : ''}`;
}

export function outboxBody(messages: OutboxMessage[]): SafeHtml {
  const rows = messages.map(
    (m) => html`<tr><td><a href="/dashboard/outbox/${m.id}">${m.subject}</a></td><td>${m.to}</td><td>${m.purpose}</td><td>${when(m.createdAt)}</td></tr>`,
  );
  return html`<h1>Outbox</h1>
<p>No SMTP server is configured, so mail is kept here instead of sent (the embedded default).</p>
${rows.length ? html`<div class="table-scroll"><table><caption class="visually-hidden">Outbox</caption><thead><tr><th scope="col">Subject</th><th scope="col">To</th><th scope="col">Kind</th><th scope="col">When</th></tr></thead><tbody>${rows}</tbody></table></div>` : html`<p>The outbox is empty.</p>`}`;
}

export function outboxMessageBody(message: OutboxMessage): SafeHtml {
  return html`<h1>${message.subject}</h1>
<dl><dt>To</dt><dd>${message.to}</dd><dt>Kind</dt><dd>${message.purpose}</dd><dt>When</dt><dd>${when(message.createdAt)}</dd></dl>
<h2>Text</h2><pre>${message.text}</pre>
<p><a href="/dashboard/outbox">Back to the outbox</a></p>`;
}

function restocksTable(rows: RestockRow[], titles: ProductTitles): SafeHtml {
  const body = rows.map(
    (r) => html`<tr><td>${titles.get(productKey(r.product_id, r.variant_id)) ?? r.product_id}</td><td>${when(r.detected_at)}</td><td class="num">${r.available}</td><td class="num">${r.planned}</td><td>${r.status}</td></tr>`,
  );
  return html`<div class="table-scroll"><table><caption class="visually-hidden">Recent restocks</caption><thead><tr><th scope="col">Product</th><th scope="col">Detected</th><th scope="col" class="num">Stock</th><th scope="col" class="num">Alerts planned</th><th scope="col">Status</th></tr></thead><tbody>${body}</tbody></table></div>`;
}

export function signInBody(options: { error?: string; typed?: string; shopify: boolean }): SafeHtml {
  return html`<h1>Sign in to your dashboard</h1>
<p>Enter your store’s domain. We e-mail a one-time sign-in link to the store owner’s address.</p>
<form method="post" action="/dashboard/sign-in" novalidate>
<label for="shop">Store domain</label>
<input id="shop" name="shop" type="text" inputmode="url" autocomplete="off" spellcheck="false" placeholder="my-store.myshopify.com" value="${options.typed ?? ''}" aria-describedby="shop-hint${options.error ? ' shop-error' : ''}"${options.error ? html` aria-invalid="true"` : ''}>
<p class="hint" id="shop-hint">Your myshopify.com address, e.g. my-store.myshopify.com</p>
${options.error ? html`<p class="error" id="shop-error">${options.error}</p>` : ''}
<p><button type="submit">E-mail me a sign-in link</button></p>
</form>
${options.shopify ? html`<p class="muted">Installed the Shopify app? Open Restock from your Shopify admin to sign in there.</p>` : ''}`;
}

export function linkSentBody(shop: string): SafeHtml {
  return html`<h1>Check your e-mail</h1>
<p role="status">If ${shop} uses Restock, a sign-in link is on its way to the store owner’s address. It works once, for a short while.</p>
<p><a href="/dashboard/sign-in">Use another store</a></p>`;
}

export function confirmLinkBody(shop: string, token: string): SafeHtml {
  // A button, not an automatic sign-in: mail scanners open links, and must not use them up.
  return html`<h1>Sign in to ${shop}</h1>
<form method="post" action="/dashboard/sign-in/${token}"><button type="submit">Continue to the dashboard</button></form>`;
}

export function expiredLinkBody(): SafeHtml {
  return html`<h1>This sign-in link no longer works</h1>
<p>Links work once and only for a short while. Ask for a new one.</p>
<p><a class="button" href="/dashboard/sign-in">Get a new link</a></p>`;
}


export function crossSiteSignInBody(): SafeHtml {
  return html`<h1>Sign in from your own e-mail</h1>
<p>This sign-in was sent from another website, so it was not used. Open the link from the e-mail Restock sent you and confirm there.</p>`;
}

/** The bounce page's few words while App Bridge fetches a session token and reloads. */
export function openingBody(): SafeHtml {
  return html`<h1>Opening Restock</h1>
<p role="status">Loading your store’s dashboard…</p>`;
}
