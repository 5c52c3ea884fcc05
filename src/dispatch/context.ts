import { chunks } from '../core/chunks.ts';
import { addressKey } from '../core/email.ts';
import type { MailAddress, MailTransport } from '../core/mail/transport.ts';
import type { EffectiveSettings } from '../stores/schemas.ts';
import type { ContactPointRow } from '../alerts/service.ts';
import { type StoreSending } from '../core/channels.ts';
import { CHANNELS, type ContactChannel } from '../channels.ts';
import { capKey, orderedKey, productKey, restockAddressKey, subscriptionChannelKey, subscriptionRestockKey, type SendFacts } from './rules.ts';
import type { ClaimedNotification } from './repository.ts';
import { inListsOf, powerOfTwoLists } from './list-sizes.ts';
import type { WorkerDeps } from './worker.ts';

/** What an alert says about its product. */
export interface ProductDetails {
  title: string;
  variantTitle: string | null;
  url: string | null;
  imageUrl: string | null;
}

/** One store's share of a claim, with everything read to decide on it and to write its mail. */
export interface StoreClaim {
  storeDomain: string;
  rows: ClaimedNotification[];
  facts: SendFacts;
  settings: EffectiveSettings;
  /** The store sends through its own SMTP provider (some plans require it). */
  ownMailProvider: boolean;
  products: Map<string, ProductDetails>;
  transport: MailTransport;
  from: MailAddress | undefined;
  /** The claim's phones and browsers, by contact point id. */
  contacts: Map<string, ClaimContact>;
  /** Each contact channel of the claim, readied for this store (its sender, the phones that stopped it). */
  sending: Map<ContactChannel, StoreSending>;
}

/** A contact point, with why its channel will not send to it now (else undefined). */
export type ClaimContact = ContactPointRow & { refusal: string | undefined };

export type ContextDeps = Pick<WorkerDeps, 'store' | 'alerts' | 'stores' | 'inventory' | 'senders' | 'followUp' | 'channels'>;

/**
 * Every read a claimed group needs before anything goes out, in one place: subscriptions still
 * waiting and already alerted, then per store its sending profile, what it already sent to the
 * group's addresses, their suppressions, and the stock and description of each product. The
 * rules then decide from this alone.
 */
export async function loadClaim(deps: ContextDeps, claimed: ClaimedNotification[], now: Date): Promise<StoreClaim[]> {
  const subscriptions = [...new Set(claimed.map((row) => row.subscription_id))];
  // Other features' lookups are asked in lists of a few sizes (list-sizes.ts).
  const waiting = await inListsOf(subscriptions, (list) => deps.alerts.stillActive(list));
  const sent = await deps.store.alreadySent(subscriptions);
  const alerts = sent.filter((row) => row.kind === 'alert');
  const alerted = new Set(alerts.map((row) => row.subscription_id));
  const alertedOn = new Set(alerts.map(subscriptionChannelKey));
  const alertedForRestock = new Set(alerts.map(subscriptionRestockKey));
  // Reminders, and alerts on a second channel after the first made the subscription notified.
  const notWaiting = subscriptions.filter((id) => !waiting.has(id));
  const notified = await inListsOf(notWaiting, (list) => deps.alerts.stillNotified(list));
  const emailMuted = await inListsOf([...new Set(claimed.filter((row) => row.channel === 'email').map((row) => row.subscription_id))], (list) => deps.alerts.emailMuted(list));
  const claims: StoreClaim[] = [];
  for (const [storeDomain, rows] of groupBy(claimed, (row) => row.store_domain)) {
    claims.push(await loadStore(deps, storeDomain, rows, { waiting, alerted, alertedOn, alertedForRestock, notified, emailMuted }, now));
  }
  return claims;
}

async function loadStore(
  deps: ContextDeps,
  storeDomain: string,
  rows: ClaimedNotification[],
  subscriptions: Pick<SendFacts, 'waiting' | 'alerted' | 'alertedOn' | 'alertedForRestock' | 'notified' | 'emailMuted'>,
  now: Date,
): Promise<StoreClaim> {
  const { sending: storeSending, settings, smtpUrl } = await deps.stores.sendingProfile(storeDomain);
  const frequencyCapMs = settings.frequencyCapMinutes * 60_000;
  const addresses = await readAddresses(deps, storeDomain, rows, frequencyCapMs, now);
  const { sellable, products } = await readProducts(deps, storeDomain, rows, settings.minStock);
  const ordered = await readPurchases(deps, storeDomain, rows);
  const { contacts, sending } = await readContacts(deps, storeDomain, rows);
  return {
    storeDomain,
    rows,
    contacts,
    sending,
    facts: {
      now: now.getTime(),
      storeSending,
      frequencyCapMs,
      ...subscriptions,
      ...addresses,
      sellable,
      ordered,
      contacts: new Map([...contacts].map(([id, contact]) => [id, { status: contact.status, addressKey: contact.address_key, timeZone: contact.time_zone, refusal: contact.refusal }])),
      quietHours: { ...settings.smsQuietHours, timeZone: settings.timeZone },
    },
    settings,
    ownMailProvider: smtpUrl !== undefined && smtpUrl !== null,
    products,
    transport: deps.senders.transportFor(storeDomain, smtpUrl),
    from: deps.senders.fromFor(settings),
  };
}

/**
 * What the store's ledger and suppressions say about the group's addresses, read and kept by
 * `addressKey`, so every case of an address counts as that address.
 */
async function readAddresses(deps: ContextDeps, storeDomain: string, rows: ClaimedNotification[], frequencyCapMs: number, now: Date) {
  const lastSent = new Map<string, string>();
  const mailedForRestock = new Set<string>();
  const suppressed = new Map<string, string>();
  // With no cap, when an address was last mailed does not matter.
  const since = frequencyCapMs > 0 ? new Date(now.getTime() - frequencyCapMs).toISOString() : undefined;
  for (const keys of chunks([...new Set(rows.map((row) => addressKey(row.email)))])) {
    const sentNotifications = await deps.store.sentTo(storeDomain, keys);
    const phonesAndBrowsers = await contactAddresses(deps, sentNotifications);
    for (const sent of sentNotifications) {
      const contactAddress = sent.contact_point_id ? (phonesAndBrowsers.get(sent.contact_point_id) ?? sent.contact_point_id) : '';
      mailedForRestock.add(restockAddressKey({ restock_id: sent.restock_id, email: sent.email_key, kind: sent.kind, channel: sent.channel }, contactAddress));
      if (since && sent.sent_at && sent.sent_at >= since) keepLatest(lastSent, capKey({ email: sent.email_key, channel: sent.channel }, contactAddress), sent.sent_at);
    }
    for (const [key, reason] of await deps.store.suppressed(storeDomain, keys)) suppressed.set(key, reason);
  }
  return { lastSent, mailedForRestock, suppressed };
}

/** Whether each reminder's shopper bought the product since its alert (the reminder row is written when the alert is sent). */
async function readPurchases(deps: ContextDeps, storeDomain: string, rows: ClaimedNotification[]): Promise<Set<string>> {
  const reminders = rows.filter((row) => row.kind === 'reminder');
  if (reminders.length === 0) return new Set();
  return deps.followUp.orderedSince(
    storeDomain,
    reminders.map((row) => ({ key: orderedKey(row), email: row.email, productId: row.product_id, variantId: row.variant_id, since: row.created_at })),
  );
}

/** The address keys of the phones and browsers sent alerts went to, by contact point id. */
async function contactAddresses(deps: ContextDeps, sent: Array<{ contact_point_id: string | null }>): Promise<Map<string, string>> {
  const ids = [...new Set(sent.flatMap((row) => (row.contact_point_id ? [row.contact_point_id] : [])))];
  const keys = new Map<string, string>();
  for (const list of powerOfTwoLists(ids)) for (const point of await deps.alerts.contactPointsByIds(list)) keys.set(point.id, point.address_key);
  return keys;
}

/**
 * The claim's phones and browsers, and each of their channels readied for the store: what it
 * needs of the store and these addresses (an SMS sender, the phones that texted STOP to it) is
 * the channel's to read.
 */
async function readContacts(deps: ContextDeps, storeDomain: string, rows: ClaimedNotification[]): Promise<Pick<StoreClaim, 'contacts' | 'sending'>> {
  const ids = [...new Set(rows.flatMap((row) => (row.contact_point_id ? [row.contact_point_id] : [])))];
  if (ids.length === 0) return { contacts: new Map(), sending: new Map() };
  const points: ContactPointRow[] = [];
  for (const list of powerOfTwoLists(ids)) points.push(...(await deps.alerts.contactPointsByIds(list)));
  const sending = new Map<ContactChannel, StoreSending>();
  for (const channel of new Set(points.map((point) => point.channel))) {
    const channelSending = deps.channels?.[channel];
    const addresses = points.filter((point) => point.channel === channel).map((point) => point.address);
    if (channelSending) sending.set(channel, await channelSending.forStore(storeDomain, addresses));
  }
  const refusalOf = (point: ContactPointRow) => {
    const ready = sending.get(point.channel);
    return ready ? ready.refusal(point.address) : CHANNELS[point.channel].notSetUp;
  };
  return { contacts: new Map(points.map((point) => [point.id, { ...point, refusal: refusalOf(point) }])), sending };
}

function keepLatest(latest: Map<string, string>, email: string, at: string): void {
  const known = latest.get(email);
  if (!known || at > known) latest.set(email, at);
}

/** The stock (re-read: a batch stops when the product sells out) and description of each product. */
async function readProducts(deps: ContextDeps, storeDomain: string, rows: ClaimedNotification[], minStock: number) {
  const sellable = new Set<string>();
  const products = new Map<string, ProductDetails>();
  for (const row of rows) {
    const key = productKey(row);
    if (products.has(key)) continue;
    const stock = await deps.inventory.stockOf(storeDomain, row.product_id, row.variant_id);
    const details = await deps.inventory.describeProduct(storeDomain, row.product_id, row.variant_id);
    if (stock.published && stock.available >= minStock) sellable.add(key);
    products.set(key, {
      title: details?.productTitle ?? 'The product you asked about',
      variantTitle: details?.variantTitle ?? null,
      url: details?.productUrl ?? null,
      imageUrl: details?.imageUrl ?? null,
    });
  }
  return { sellable, products };
}

export function groupBy<T>(items: readonly T[], key: (item: T) => string): Map<string, T[]> {
  const groups = new Map<string, T[]>();
  for (const item of items) {
    const k = key(item);
    const group = groups.get(k);
    if (group) group.push(item);
    else groups.set(k, [item]);
  }
  return groups;
}
