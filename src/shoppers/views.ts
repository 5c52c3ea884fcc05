import type { ContactPointRow } from '../alerts/service.ts';
import { CHANNELS, CONTACT_CHANNELS, type Channel } from '../channels.ts';
import type { ChannelWords } from '../core/channels.ts';
import { html, page, type SafeHtml } from '../core/html.ts';
import type { ListedSubscription, ShopperPage } from './service.ts';
import type { Language } from '../core/languages.ts';
import { formatDate, STRINGS, type Strings } from './strings.ts';

/** Subscriptions the shopper can still change: the statuses the alerts service lets a shopper end. */
const LIVE = new Set(['pending', 'active', 'notified']);
const isLive = (entry: ListedSubscription) => LIVE.has(entry.row.status);
const pointIsOn = (point: ContactPointRow) => point.status === 'pending' || point.status === 'active';

/** The shared layout in the shopper's language (the layout itself is written for English). */
export function shopperPage(language: Language, title: string, body: SafeHtml): string {
  return page(title, body).replace('<html lang="en">', `<html lang="${language}">`);
}

export function listBody(view: ShopperPage, token: string, language: Language): SafeHtml {
  const s = STRINGS[language];
  const base = `/my/${token}`;
  const live = view.subscriptions.filter(isLive);
  return html`<h1>${s.heading(view.shopper.storeDomain)}</h1>
<p>${s.intro(view.shopper.email)}</p>
<p class="muted">${s.linkNote}</p>
<h2 id="alerts">${s.listLabel}</h2>
${
  view.subscriptions.length === 0
    ? html`<p>${s.none}</p>`
    : html`<ul aria-labelledby="alerts" style="list-style:none;padding:0">${view.subscriptions.map((entry) => subscriptionItem(entry, base, s, language))}</ul>`
}
${live.length > 0 ? allAlertsSection(live, base, s) : ''}
<h2>${s.dataHeading}</h2>
<p>${s.dataIntro}</p>
<p><a href="${base}/data.json" download>${s.download}</a></p>
<p><a href="${base}/erase">${s.eraseLink}</a></p>`;
}

function subscriptionItem(entry: ListedSubscription, base: string, s: Strings, language: Language): SafeHtml {
  const { row } = entry;
  const title = entry.title ?? s.product(row.product_id);
  const heading = entry.productUrl ? html`<a href="${entry.productUrl}">${title}</a>` : html`${title}`;
  return html`<li style="border-top:1px solid var(--line);padding:.5rem 0 1rem">
<h3>${heading}</h3>
<dl>
<dt>${s.statusLabel}</dt><dd>${s.status[row.status]}</dd>
<dt>${s.subscribedLabel}</dt><dd>${formatDate(language, row.created_at)}</dd>
<dt>${s.channelsLabel}</dt><dd><ul>${channelItems(entry, s, language)}</ul></dd>
<dt>${s.consentLabel}</dt><dd>${consentRecord(s, language, row.consent_method, row.consent_text, row.consent_page, row.created_at, row.confirmed_at)}</dd>
</dl>
${isLive(entry) ? subscriptionForms(entry, base, s, title) : ''}
</li>`;
}

function channelItems(entry: ListedSubscription, s: Strings, language: Language): SafeHtml[] {
  const email = html`<li>${s.email} (${entry.row.email}): ${entry.row.email_muted === 1 ? s.emailMuted : s.emailOn}</li>`;
  const others = entry.contactPoints.map(
    (point) => html`<li>${(CHANNELS[point.channel].pages[language] as ChannelWords).point?.(point.address) ?? point.address}: ${s.point[point.status]}
<br><span class="muted">${s.consentLabel}: ${consentRecord(s, language, point.consent_method, point.consent_text, point.consent_page, point.consent_at, point.confirmed_at)}</span></li>`,
  );
  return [email, ...others];
}

function consentRecord(s: Strings, language: Language, method: string | null, text: string | null, pageUrl: string | null, at: string, confirmedAt: string | null): SafeHtml {
  // Rows made before consent was recorded have no method: the date is all there is.
  const how = method ? html`${s.consentHow(method)}, ${formatDate(language, at)}` : html`${formatDate(language, at)}`;
  return html`${how}${confirmedAt ? html`; ${s.confirmedAt(formatDate(language, confirmedAt))}` : ''}${
    text ? html`<br>${s.consentWords}: “${text}”` : ''
  }${pageUrl ? html`<br>${s.consentPage}: ${pageUrl}` : ''}`;
}

function subscriptionForms(entry: ListedSubscription, base: string, s: Strings, title: string): SafeHtml {
  const subscription = html`<input type="hidden" name="subscription" value="${entry.row.id}">`;
  const forProduct = html`<span class="visually-hidden">${s.forProduct(title)}</span>`;
  const toggles: SafeHtml[] = [toggleForm(base, 'email', entry.row.email_muted !== 1, s, subscription, forProduct)];
  for (const channel of CONTACT_CHANNELS) {
    const points = entry.contactPoints.filter((point) => point.channel === channel);
    // A removed or expired phone or browser cannot be turned back on from here.
    if (points.some(pointIsOn)) toggles.push(toggleForm(base, channel, true, s, subscription, forProduct));
    else if (points.some((point) => point.status === 'stopped')) toggles.push(toggleForm(base, channel, false, s, subscription, forProduct));
  }
  return html`<div style="display:flex;flex-wrap:wrap;gap:.5rem">
<form method="post" action="${base}/cancel">${subscription}<button type="submit">${s.cancelOne}${forProduct}</button></form>
${toggles}
</div>`;
}

function toggleForm(base: string, channel: Channel, isOn: boolean, s: Strings, subscription: SafeHtml | string, forProduct: SafeHtml | string): SafeHtml {
  const label = isOn ? s.turnOff(s.channelName[channel]) : s.turnOn(s.channelName[channel]);
  return html`<form method="post" action="${base}/channel">${subscription}<input type="hidden" name="channel" value="${channel}"><input type="hidden" name="on" value="${isOn ? '0' : '1'}"><button type="submit" class="quiet">${label}${forProduct}</button></form>`;
}

function allAlertsSection(live: ListedSubscription[], base: string, s: Strings): SafeHtml {
  const forms: SafeHtml[] = [html`<form method="post" action="${base}/cancel"><button type="submit">${s.cancelAll}</button></form>`];
  if (live.some((entry) => entry.row.email_muted !== 1)) forms.push(offForAll(base, 'email', s));
  for (const channel of CONTACT_CHANNELS) {
    if (live.some((entry) => entry.contactPoints.some((point) => point.channel === channel && pointIsOn(point)))) forms.push(offForAll(base, channel, s));
  }
  return html`<h2>${s.allHeading}</h2>
<div style="display:flex;flex-wrap:wrap;gap:.5rem">${forms}</div>`;
}

function offForAll(base: string, channel: Channel, s: Strings): SafeHtml {
  return html`<form method="post" action="${base}/channel"><input type="hidden" name="channel" value="${channel}"><input type="hidden" name="on" value="0"><button type="submit" class="quiet">${s.turnOffAll(s.channelName[channel])}</button></form>`;
}

export function eraseConfirmBody(view: ShopperPage, token: string, s: Strings): SafeHtml {
  const base = `/my/${token}`;
  return html`<h1>${s.eraseTitle}</h1>
<p>${s.eraseIntro(view.shopper.storeDomain, view.shopper.email)}</p>
<ul>${s.eraseItems.map((item) => html`<li>${item}</li>`)}</ul>
<p>${s.eraseKeep}</p>
<form method="post" action="${base}/erase"><button type="submit">${s.eraseButton}</button></form>
<p><a href="${base}">${s.eraseBack}</a></p>`;
}

export function erasedBody(s: Strings): SafeHtml {
  return html`<h1>${s.erasedTitle}</h1><p>${s.erasedBody}</p>`;
}
