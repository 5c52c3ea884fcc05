// Longer than most files on purpose: every sending rule of every channel in one table, so a
// reader sees the whole policy (and its tests) in one place.
import { channelNamed } from '../channels.ts';
import { ChannelDeliveryError, type ChannelName } from '../core/channels.ts';
import { addressKey } from '../core/email.ts';
import { MailDeliveryError } from '../core/mail/transport.ts';
import type { EffectiveSettings } from '../stores/schemas.ts';
import { OVER_ALLOWANCE } from './service.ts';
import type { NotificationKind } from '../core/db/schema.ts';
import type { NotificationRow } from './repository.ts';

/**
 * The dispatch rules: whether a restock gets another batch, and whether a leased alert goes out
 * now, waits or is skipped. Pure functions of what the worker read (context.ts loads it once
 * per claimed group), so every case can be tested without a database, a clock or a mail server.
 * The texts are what the ledger records and merchants read.
 */

export const WHY = {
  uninstalled: 'the store uninstalled the app',
  unpublished: 'the product is not published',
  belowMinimum: (available: number, minStock: number) => `${available} in stock, below the minimum of ${minStock}`,
  everyoneAlerted: 'every waiting subscriber was alerted',
  alreadyAlerted: 'this subscription was already alerted',
  noLongerWaits: 'the subscription no longer waits (unsubscribed, cancelled or notified)',
  suppressed: (reason: string) => `the address is suppressed for this store (${reason})`,
  alreadyMailed: 'the address already got this restock’s alert',
  soldOut: 'sold out (or unpublished) before this alert went out; the subscription keeps waiting',
  frequencyCap: 'waiting for the frequency cap',
  heldByPlan: (reason: string | undefined) => `${OVER_ALLOWANCE}${reason ?? 'the plan allows no more alerts now'}`,
  reminderUnsubscribed: 'no reminder: the shopper unsubscribed (or the subscription was cancelled) after the alert',
  reminderSoldOut: 'no reminder: sold out (or unpublished) again since the alert',
  reminderOrdered: 'no reminder: the shopper ordered it after the alert',
  emailMuted: 'the shopper turned e-mail off for this alert',
  contactPointClosed: (status: string) => `the shopper's ${status === 'removed' ? 'browser subscription is gone' : `number or browser is ${status}`}`,
  quietHours: (until: string) => `quiet hours in the shopper's time zone: waiting until ${until}`,
} as const;

// --- planning ------------------------------------------------------------------------------

export type PlanVerdict =
  | { kind: 'stop'; status: 'stopped' | 'unpublished' | 'sold_out'; reason: string }
  | { kind: 'batch'; size: number };

/** A batch of a variant sold whatever its stock (backorders, pre-order): no stock to size it by. */
const UNLIMITED_BATCH = 100;

/** Whether a restock gets a next batch, and how large: stock × multiplier, at least 1. */
export function planVerdict(
  storeSending: boolean,
  stock: { available: number; published: boolean; unlimited?: boolean },
  settings: Pick<EffectiveSettings, 'minStock' | 'batchMultiplier'>,
): PlanVerdict {
  if (!storeSending) return { kind: 'stop', status: 'stopped', reason: WHY.uninstalled };
  if (!stock.published) return { kind: 'stop', status: 'unpublished', reason: WHY.unpublished };
  if (stock.unlimited) return { kind: 'batch', size: Math.max(UNLIMITED_BATCH, Math.floor(stock.available * settings.batchMultiplier)) };
  if (stock.available < settings.minStock) return { kind: 'stop', status: 'sold_out', reason: WHY.belowMinimum(stock.available, settings.minStock) };
  return { kind: 'batch', size: Math.max(1, Math.floor(stock.available * settings.batchMultiplier)) };
}

// --- before sending ------------------------------------------------------------------------

/** The fields of a ledger row the sending rules look at. */
export type NotificationRef = Pick<NotificationRow, 'subscription_id' | 'email' | 'restock_id' | 'product_id' | 'variant_id'> & {
  /** alert when absent. */
  kind?: NotificationKind;
  /** email when absent. */
  channel?: ChannelName;
  contact_point_id?: string | null;
};

/** What the rules need of a phone or browser. */
export interface ContactFacts {
  status: string;
  /** The phone number, or the browser's endpoint as its key: what "once per address" counts for a text or a push. */
  addressKey: string;
  /** The shopper's time zone, when the browser gave it. */
  timeZone: string | null;
  /** Why its channel will not send to it now (no sender for the store, a phone that texted STOP), else undefined. */
  refusal: string | undefined;
}

/** What one claimed group's reads found about its store: all the sending rules look at. */
export interface SendFacts {
  /** When the checks are made, in ms since the epoch. */
  now: number;
  /** The store still sends (the app is installed). */
  storeSending: boolean;
  /** 0: no cap. */
  frequencyCapMs: number;
  /** Subscriptions still waiting (active). */
  waiting: ReadonlySet<string>;
  /** Subscriptions some restock has already alerted. */
  alerted: ReadonlySet<string>;
  /** Addresses the store must not mail, by `addressKey`, with the reason. */
  suppressed: ReadonlyMap<string, string>;
  /** Addresses a restock already mailed, as `restockAddressKey`. */
  mailedForRestock: ReadonlySet<string>;
  /** Each address's latest alert from this store within the cap window (ISO time), by `addressKey`. */
  lastSent: ReadonlyMap<string, string>;
  /** Products still sellable (published and at least the minimum stock), as `productKey`. */
  sellable: ReadonlySet<string>;
  /** Subscriptions alerted and not unsubscribed since (a reminder's subscription must be one). */
  notified: ReadonlySet<string>;
  /** Reminder rows whose shopper ordered the product since the alert, as `orderedKey`. */
  ordered: ReadonlySet<string>;
  /** Subscriptions (any restock) already sent an alert on a channel, as `subscriptionChannelKey`; absent: as `alerted`, e-mail only. */
  alertedOn?: ReadonlySet<string>;
  /** Subscriptions a restock's alert already reached on some channel, as `subscriptionRestockKey`: its other channels still go. */
  alertedForRestock?: ReadonlySet<string>;
  /** Subscriptions whose shopper muted e-mail. */
  emailMuted?: ReadonlySet<string>;
  /** Phones and browsers of the claim, by contact point id. */
  contacts?: ReadonlyMap<string, ContactFacts>;
  /** No alert of a channel that keeps quiet hours (texts) between these hours, local to the shopper (else the store's time zone). */
  quietHours?: { start: number; end: number; timeZone: string };
}

export type Skip = { kind: 'skipped'; why: string; notified: boolean };
/** Waiting is not dropping: the alert is queued again for `until`. */
export type Defer = { kind: 'deferred'; until: string; why: string; heldByPlan: boolean };
export type Verdict = { kind: 'send' } | Skip | Defer;

/**
 * What the alerts sent earlier in the same group add to the facts. Addresses are compared by
 * `addressKey` throughout: `Jane@` and `jane@` are one shopper.
 */
interface GroupState {
  /** As `subscriptionChannelKey`. */
  subscriptions: Set<string>;
  /** As `subscriptionRestockKey`. */
  reached: Set<string>;
  addresses: Set<string>;
  lastSent: Map<string, string>;
}

type Rule = (row: NotificationRef, facts: SendFacts, group: GroupState) => Skip | Defer | undefined;

const isReminder = (row: NotificationRef): boolean => row.kind === 'reminder';

const storeSends: Rule = (_row, facts) => (facts.storeSending ? undefined : skip(WHY.uninstalled, false));

const channelOf = (row: NotificationRef): ChannelName => row.channel ?? 'email';

/** A reminder follows an alert by design; the ledger's unique index keeps it to one per alert. One alert per channel and contact point. */
const notAlertedYet: Rule = (row, facts, group) => {
  if (isReminder(row)) return undefined;
  const key = subscriptionChannelKey(row);
  const before = facts.alertedOn ? facts.alertedOn.has(key) : facts.alerted.has(row.subscription_id);
  return before || group.subscriptions.has(key) ? skip(WHY.alreadyAlerted, true) : undefined;
};

/**
 * An alert goes to a subscription still waiting, or to one this restock's alert already reached
 * on another channel (that made it notified; its texts and pushes still go).
 */
const stillWaiting: Rule = (row, facts, group) => {
  if (isReminder(row)) return facts.notified.has(row.subscription_id) ? undefined : skip(WHY.reminderUnsubscribed, false);
  if (facts.waiting.has(row.subscription_id)) return undefined;
  const reached = facts.alertedForRestock?.has(subscriptionRestockKey(row)) || group.reached.has(subscriptionRestockKey(row));
  return reached && facts.notified.has(row.subscription_id) ? undefined : skip(WHY.noLongerWaits, false);
};

/** The channel is still open: e-mail not muted, the phone or browser active, and its channel willing (a sender set up, no STOP). */
const channelOpen: Rule = (row, facts) => {
  const channel = channelOf(row);
  if (channel === 'email') return facts.emailMuted?.has(row.subscription_id) ? skip(WHY.emailMuted, false) : undefined;
  const contact = row.contact_point_id ? facts.contacts?.get(row.contact_point_id) : undefined;
  if (!contact || contact.status !== 'active') return skip(WHY.contactPointClosed(contact?.status ?? 'removed'), false);
  return contact.refusal === undefined ? undefined : skip(contact.refusal, false);
};

/** No text at night where the shopper is: it waits for the morning, it is not dropped. */
const outsideQuietHours: Rule = (row, facts) => {
  if (!channelNamed(channelOf(row)).quietHours || !facts.quietHours) return undefined;
  const contact = row.contact_point_id ? facts.contacts?.get(row.contact_point_id) : undefined;
  const until = quietUntil(facts.now, facts.quietHours, contact?.timeZone ?? facts.quietHours.timeZone);
  return until === undefined ? undefined : { kind: 'deferred', until, why: WHY.quietHours(until), heldByPlan: false };
};

/** Only e-mail addresses bounce or complain; phones have STOP, browsers their own answers. */
const notSuppressed: Rule = (row, facts) => {
  if (channelOf(row) !== 'email') return undefined;
  const reason = facts.suppressed.get(addressKey(row.email));
  return reason === undefined ? undefined : skip(WHY.suppressed(reason), false);
};

/** Two subscriptions of one address (product and variant) get one mail per restock, and one text or push per phone or browser. */
const notMailedForRestock: Rule = (row, facts, group) => {
  const key = restockAddressKey(row, contactAddressOf(row, facts));
  return facts.mailedForRestock.has(key) || group.addresses.has(key) ? skip(WHY.alreadyMailed, true) : undefined;
};

/** A batch stops when the product sells out; its subscribers keep waiting for the next restock. */
const stillSellable: Rule = (row, facts) => {
  if (facts.sellable.has(productKey(row))) return undefined;
  return skip(isReminder(row) ? WHY.reminderSoldOut : WHY.soldOut, false);
};

/** A reminder is for shoppers who have not bought what they waited for. */
const notOrdered: Rule = (row, facts) => (isReminder(row) && facts.ordered.has(orderedKey(row)) ? skip(WHY.reminderOrdered, false) : undefined);

const withinFrequencyCap: Rule = (row, facts, group) => {
  const key = capKey(row, contactAddressOf(row, facts));
  const last = group.lastSent.get(key) ?? facts.lastSent.get(key);
  if (!last || facts.frequencyCapMs <= 0) return undefined;
  const until = Date.parse(last) + facts.frequencyCapMs;
  return until > facts.now ? { kind: 'deferred', until: new Date(until).toISOString(), why: WHY.frequencyCap, heldByPlan: false } : undefined;
};

/** In this order: the first that objects decides, which fixes the reason recorded. */
const SENDING_RULES: Rule[] = [storeSends, notAlertedYet, stillWaiting, channelOpen, notSuppressed, notMailedForRestock, stillSellable, notOrdered, withinFrequencyCap, outsideQuietHours];

/** The verdict on one alert, alone in its group. */
export function decide(row: NotificationRef, facts: SendFacts): Verdict {
  return verdictIn(row, facts, emptyGroup());
}

/**
 * Verdicts on a claimed group of one store, in queue order: an alert that goes out counts for
 * the ones after it (the same subscription or address again, and the frequency cap from now).
 */
export function decideGroup<R extends NotificationRef>(rows: readonly R[], facts: SendFacts): Array<{ row: R; verdict: Verdict }> {
  const group = emptyGroup();
  return rows.map((row) => {
    const verdict = verdictIn(row, facts, group);
    if (verdict.kind === 'send') admit(row, facts, group);
    return { row, verdict };
  });
}

function verdictIn(row: NotificationRef, facts: SendFacts, group: GroupState): Verdict {
  for (const rule of SENDING_RULES) {
    const objection = rule(row, facts, group);
    if (objection) return objection;
  }
  return { kind: 'send' };
}

function admit(row: NotificationRef, facts: SendFacts, group: GroupState): void {
  group.subscriptions.add(subscriptionChannelKey(row));
  group.reached.add(subscriptionRestockKey(row));
  group.addresses.add(restockAddressKey(row, contactAddressOf(row, facts)));
  const key = capKey(row, contactAddressOf(row, facts));
  if (!group.lastSent.has(key) && !facts.lastSent.has(key)) group.lastSent.set(key, new Date(facts.now).toISOString());
}

function emptyGroup(): GroupState {
  return { subscriptions: new Set(), reached: new Set(), addresses: new Set(), lastSent: new Map() };
}

function skip(why: string, notified: boolean): Skip {
  return { kind: 'skipped', why, notified };
}

// --- the plan's allowance ------------------------------------------------------------------

/** What the billing feature granted of a store's allowance for one group. */
export interface AllowanceGrant {
  granted: number;
  retryAt: string;
  reason?: string;
}

/**
 * The order in which ready alerts take the store's allowance: the store's own shoppers' first,
 * then third-party ones (made by agents not bound to the store), each in queue order. The
 * planner already queues a restock's third-party subscribers last; this keeps it so across the
 * restocks of one claimed group.
 */
export function firstPartyFirst<T extends Pick<NotificationRow, 'third_party'>>(ready: readonly T[]): T[] {
  return [...ready.filter((row) => row.third_party !== 1), ...ready.filter((row) => row.third_party === 1)];
}

/** The first `granted` alerts, in queue order, go; the rest wait for the plan, visibly, never dropped. */
export function withinAllowance<T>(ready: readonly T[], grant: AllowanceGrant): { send: T[]; held: Array<{ item: T; verdict: Defer }> } {
  const verdict: Defer = { kind: 'deferred', until: grant.retryAt, why: WHY.heldByPlan(grant.reason), heldByPlan: true };
  const granted = Math.max(0, grant.granted);
  return { send: ready.slice(0, granted), held: ready.slice(granted).map((item) => ({ item, verdict })) };
}

// --- after a failed send -------------------------------------------------------------------

export type Retry = { kind: 'retry'; why: string; at: string };
/** `suppress`: an e-mail address refused for good; `removeContact`: a browser whose push subscription is gone. */
export type Failed = { kind: 'failed'; why: string; suppress: boolean; removeContact?: boolean };

export interface RetryPolicy {
  maxAttempts: number;
  retryBaseMs: number;
}

export const MAX_RETRY_DELAY_MS = 6 * 3600_000;

/**
 * A recipient the server refuses for good (5xx to RCPT TO) fails and is suppressed; anything
 * else, a refused login included (the merchant can fix it), is retried after
 * base × 2^(attempt−1), jittered ±50% by `random` (0 ≤ random < 1), capped at 6 h, until the
 * attempts run out.
 */
export function failureVerdict(attempts: number, err: unknown, policy: RetryPolicy, now: number, random: number): Retry | Failed {
  const why = err instanceof Error ? err.message : String(err);
  if (err instanceof MailDeliveryError && err.recipientRefused) return { kind: 'failed', why: `refused by the mail server (${err.responseCode}): ${why}`, suppress: true };
  if (err instanceof ChannelDeliveryError && err.final !== undefined) return { kind: 'failed', why: err.final, suppress: false, ...(err.removeContact ? { removeContact: true } : {}) };
  if (attempts >= policy.maxAttempts) return { kind: 'failed', why: `gave up after ${attempts} attempts: ${why}`, suppress: false };
  const base = policy.retryBaseMs * 2 ** (attempts - 1);
  const delay = Math.min(MAX_RETRY_DELAY_MS, base * (0.5 + random));
  return { kind: 'retry', why, at: new Date(now + delay).toISOString() };
}

// --- keys ----------------------------------------------------------------------------------

export function productKey(row: Pick<NotificationRow, 'product_id' | 'variant_id'>): string {
  return `${row.product_id}\n${row.variant_id ?? ''}`;
}

/**
 * A restock, the message's kind, its channel and an address, compared by `addressKey` (which a
 * key already is), with the phone or browser a text or push goes to: one alert and one reminder
 * per restock, channel and address, and per phone or browser of that address.
 */
export function restockAddressKey(row: Pick<NotificationRow, 'restock_id' | 'email'> & { kind?: NotificationKind; channel?: ChannelName }, contactAddress = ''): string {
  return `${row.restock_id}\n${row.kind ?? 'alert'}\n${row.channel ?? 'email'}\n${addressKey(row.email)}\n${contactAddress}`;
}

/** The phone or browser a row goes to, by its address key; '' for a mail. */
function contactAddressOf(row: NotificationRef, facts: SendFacts): string {
  if (!row.contact_point_id) return '';
  return facts.contacts?.get(row.contact_point_id)?.addressKey ?? row.contact_point_id;
}

/** The frequency cap counts per channel, and per phone or browser: a text does not hold back the e-mail, nor one browser another. */
export function capKey(row: Pick<NotificationRow, 'email'> & { channel?: ChannelName }, contactAddress = ''): string {
  return `${row.channel ?? 'email'}\n${addressKey(row.email)}\n${contactAddress}`;
}

/** One alert per subscription on each channel, and on each phone or browser of it (a subscription may have several). */
export function subscriptionChannelKey(row: Pick<NotificationRow, 'subscription_id'> & { channel?: ChannelName; contact_point_id?: string | null }): string {
  return `${row.subscription_id}\n${row.channel ?? 'email'}\n${row.contact_point_id ?? ''}`;
}

export function subscriptionRestockKey(row: Pick<NotificationRow, 'subscription_id' | 'restock_id'>): string {
  return `${row.subscription_id}\n${row.restock_id}`;
}

/**
 * When quiet hours end, if `now` falls inside them in `timeZone` (hours start ≤ h < end, across
 * midnight when start > end); undefined outside them, or when start = end (none).
 */
export function quietUntil(now: number, hours: { start: number; end: number }, timeZone: string): string | undefined {
  if (hours.start === hours.end) return undefined;
  const { hour, minute, second } = localTime(now, timeZone);
  const inside = hours.start < hours.end ? hour >= hours.start && hour < hours.end : hour >= hours.start || hour < hours.end;
  if (!inside) return undefined;
  const minutesLeft = (hours.end * 60 - (hour * 60 + minute) + 24 * 60) % (24 * 60);
  return new Date(now + minutesLeft * 60_000 - second * 1000 - (now % 1000)).toISOString();
}

function localTime(now: number, timeZone: string): { hour: number; minute: number; second: number } {
  let parts: Intl.DateTimeFormatPart[];
  try {
    parts = new Intl.DateTimeFormat('en-GB', { timeZone, hourCycle: 'h23', hour: 'numeric', minute: 'numeric', second: 'numeric' }).formatToParts(now);
  } catch {
    // A zone the runtime does not know (stored before it was checked): the store's day is UTC's.
    parts = new Intl.DateTimeFormat('en-GB', { timeZone: 'UTC', hourCycle: 'h23', hour: 'numeric', minute: 'numeric', second: 'numeric' }).formatToParts(now);
  }
  const part = (type: string) => Number(parts.find((p) => p.type === type)?.value ?? 0);
  return { hour: part('hour'), minute: part('minute'), second: part('second') };
}

/** An address and the product it was alerted about, as the conversions feature reports purchases. */
export function orderedKey(row: Pick<NotificationRow, 'email' | 'product_id' | 'variant_id'>): string {
  return `${addressKey(row.email)}\n${row.product_id}\n${row.variant_id ?? ''}`;
}
