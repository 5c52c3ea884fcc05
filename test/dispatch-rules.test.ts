/**
 * The dispatch rules alone (src/dispatch/rules.ts, and the ledger columns each outcome writes):
 * whether a restock gets another batch, and whether a leased alert goes out, waits or is
 * skipped, decided from facts given here instead of read from a database.
 */
import assert from 'node:assert/strict';
import { describe, it } from './fixtures/suites.ts';
import { MailDeliveryError } from '../src/core/mail/transport.ts';
import {
  decide,
  decideGroup,
  failureVerdict,
  planVerdict,
  orderedKey,
  productKey,
  restockAddressKey,
  capKey,
  withinAllowance,
  type NotificationRef,
  type SendFacts,
  type Verdict,
} from '../src/dispatch/rules.ts';
import { OVER_ALLOWANCE } from '../src/dispatch/service.ts';
import { ledgerChanges } from '../src/dispatch/settler.ts';

const NOW = Date.parse('2026-05-04T12:00:00.000Z');
const minutesAgo = (minutes: number) => new Date(NOW - minutes * 60_000).toISOString();
const HOUR = 3600_000;

const alert = (overrides: Partial<NotificationRef> = {}): NotificationRef => ({
  subscription_id: 'sub_1',
  email: 'shopper@example.com',
  restock_id: 'rst_1',
  product_id: 'p1',
  variant_id: 'v1',
  ...overrides,
});

/** Facts under which the default alert goes out; each case changes what it is about. */
function facts(overrides: Partial<SendFacts> = {}): SendFacts {
  return {
    now: NOW,
    storeSending: true,
    frequencyCapMs: HOUR,
    waiting: new Set(['sub_1', 'sub_2', 'sub_3']),
    alerted: new Set(),
    suppressed: new Map(),
    mailedForRestock: new Set(),
    lastSent: new Map(),
    sellable: new Set([productKey(alert()), productKey(alert({ product_id: 'p2' }))]),
    notified: new Set(),
    ordered: new Set(),
    ...overrides,
  };
}

const SEND: Verdict = { kind: 'send' };
const skipped = (why: string, notified: boolean): Verdict => ({ kind: 'skipped', why, notified });
const capped = (until: string): Verdict => ({ kind: 'deferred', until, why: 'waiting for the frequency cap', heldByPlan: false });
const SOLD_OUT = skipped('sold out (or unpublished) before this alert went out; the subscription keeps waiting', false);
const ALREADY_ALERTED = skipped('this subscription was already alerted', true);
const ALREADY_MAILED = skipped('the address already got this restock’s alert', true);
const NO_LONGER_WAITS = skipped('the subscription no longer waits (unsubscribed, cancelled or notified)', false);
const UNINSTALLED = skipped('the store uninstalled the app', false);
const REMINDER: Partial<NotificationRef> = { kind: 'reminder' };

describe('before an alert goes out', () => {
  const cases: Array<[string, Partial<SendFacts>, Partial<NotificationRef>, Verdict]> = [
    ['goes out when nothing objects', {}, {}, SEND],
    ['skipped when the store uninstalled the app', { storeSending: false }, {}, UNINSTALLED],
    ['skipped, as notified, when some restock already alerted the subscription', { alerted: new Set(['sub_1']) }, {}, ALREADY_ALERTED],
    ['skipped when the subscription no longer waits', { waiting: new Set() }, {}, NO_LONGER_WAITS],
    ['skipped when the address is suppressed, saying why', { suppressed: new Map([['shopper@example.com', 'complaint']]) }, {}, skipped('the address is suppressed for this store (complaint)', false)],
    ['a suppression of another address does not count', { suppressed: new Map([['other@example.com', 'bounce']]) }, {}, SEND],
    ['skipped, as notified, when this restock already mailed the address', { mailedForRestock: new Set([restockAddressKey(alert())]) }, {}, ALREADY_MAILED],
    ['another restock having mailed the address does not count (the cap is off)', { frequencyCapMs: 0, mailedForRestock: new Set([restockAddressKey(alert({ restock_id: 'rst_0' }))]) }, {}, SEND],
    ['skipped when the product sold out since the batch was planned', { sellable: new Set() }, {}, SOLD_OUT],
    ['another variant still sellable does not make this one so', { sellable: new Set([productKey(alert({ variant_id: 'v2' }))]) }, {}, SOLD_OUT],
    ['a subscription to the whole product looks at the product as a whole', { sellable: new Set([productKey({ product_id: 'p1', variant_id: null })]) }, { variant_id: null }, SEND],
    ['waits out the frequency cap after a recent alert', { lastSent: new Map([[capKey({ email: 'shopper@example.com' }), minutesAgo(10)]]) }, {}, capped(minutesAgo(-50))],
    ['goes out once the cap window has passed', { lastSent: new Map([[capKey({ email: 'shopper@example.com' }), minutesAgo(61)]]) }, {}, SEND],
    ['goes out at the very end of the cap window', { lastSent: new Map([[capKey({ email: 'shopper@example.com' }), minutesAgo(60)]]) }, {}, SEND],
    ['no cap: a recent alert does not hold the next', { frequencyCapMs: 0, lastSent: new Map([[capKey({ email: 'shopper@example.com' }), minutesAgo(1)]]) }, {}, SEND],
    // When several objections hold, the first in this order is recorded.
    ['an uninstalled store comes before everything else', { storeSending: false, alerted: new Set(['sub_1']), waiting: new Set(), sellable: new Set() }, {}, UNINSTALLED],
    ['already alerted comes before no longer waiting (a notified subscription)', { alerted: new Set(['sub_1']), waiting: new Set() }, {}, ALREADY_ALERTED],
    ['no longer waiting comes before a suppression', { waiting: new Set(), suppressed: new Map([['shopper@example.com', 'bounce']]) }, {}, NO_LONGER_WAITS],
    ['a suppression comes before this restock having mailed the address', { suppressed: new Map([['shopper@example.com', 'manual']]), mailedForRestock: new Set([restockAddressKey(alert())]) }, {}, skipped('the address is suppressed for this store (manual)', false)],
    ['already mailed comes before sold out', { mailedForRestock: new Set([restockAddressKey(alert())]), sellable: new Set() }, {}, ALREADY_MAILED],
    ['sold out comes before the cap (the alert is dropped, not deferred)', { sellable: new Set(), lastSent: new Map([[capKey({ email: 'shopper@example.com' }), minutesAgo(1)]]) }, {}, SOLD_OUT],

    // A reminder follows its alert: the subscription is notified, and must still be.
    ['a reminder goes to an alerted, notified shopper', { alerted: new Set(['sub_1']), waiting: new Set(), notified: new Set(['sub_1']) }, REMINDER, SEND],
    ['a reminder is skipped once the shopper unsubscribed', { alerted: new Set(['sub_1']), waiting: new Set(), notified: new Set() }, REMINDER, skipped('no reminder: the shopper unsubscribed (or the subscription was cancelled) after the alert', false)],
    ['a reminder is skipped when the product sold out again', { notified: new Set(['sub_1']), sellable: new Set() }, REMINDER, skipped('no reminder: sold out (or unpublished) again since the alert', false)],
    ['a reminder is skipped when the shopper ordered the product', { notified: new Set(['sub_1']), ordered: new Set([orderedKey(alert())]) }, REMINDER, skipped('no reminder: the shopper ordered it after the alert', false)],
    ['an order of another product does not stop a reminder', { notified: new Set(['sub_1']), ordered: new Set([orderedKey(alert({ product_id: 'p2' }))]), frequencyCapMs: 0 }, REMINDER, SEND],
    ['the alert itself does not count as this restock having mailed the reminder', { notified: new Set(['sub_1']), mailedForRestock: new Set([restockAddressKey(alert())]) }, REMINDER, SEND],
    ['a suppression stops a reminder too', { notified: new Set(['sub_1']), suppressed: new Map([['shopper@example.com', 'complaint']]) }, REMINDER, skipped('the address is suppressed for this store (complaint)', false)],
  ];
  for (const [name, given, row, expected] of cases) {
    it(name, () => assert.deepEqual(decide(alert(row), facts(given)), expected));
  }
});

describe('a claimed group, in queue order', () => {
  const verdicts = (rows: NotificationRef[], given: Partial<SendFacts> = {}) => decideGroup(rows, facts(given)).map(({ verdict }) => verdict);
  const cases: Array<[string, NotificationRef[], Partial<SendFacts>, Verdict[]]> = [
    ['one subscription twice (two restocks): mailed once', [alert(), alert({ restock_id: 'rst_2', product_id: 'p2' })], {}, [SEND, ALREADY_ALERTED]],
    ['one address subscribed to the product and to the variant: one mail for the restock', [alert(), alert({ subscription_id: 'sub_2', variant_id: null })], { sellable: new Set([productKey(alert()), productKey(alert({ variant_id: null }))]) }, [SEND, ALREADY_MAILED]],
    ['one address waiting for two restocks: the second waits out the cap from now', [alert(), alert({ subscription_id: 'sub_2', restock_id: 'rst_2', product_id: 'p2' })], {}, [SEND, capped(new Date(NOW + HOUR).toISOString())]],
    ['one address waiting for two restocks with no cap: both go', [alert(), alert({ subscription_id: 'sub_2', restock_id: 'rst_2', product_id: 'p2' })], { frequencyCapMs: 0 }, [SEND, SEND]],
    ['an alert skipped does not count for the next to the same address', [alert({ subscription_id: 'sub_9' }), alert({ subscription_id: 'sub_2' })], {}, [NO_LONGER_WAITS, SEND]],
    [
      'a recent alert found in the ledger holds the whole group, from its own time',
      [alert(), alert({ subscription_id: 'sub_2', restock_id: 'rst_2', product_id: 'p2' })],
      { lastSent: new Map([[capKey({ email: 'shopper@example.com' }), minutesAgo(30)]]) },
      [capped(minutesAgo(-30)), capped(minutesAgo(-30))],
    ],
    ['different addresses do not hold each other', [alert(), alert({ subscription_id: 'sub_2', email: 'other@example.com' })], {}, [SEND, SEND]],
  ];
  for (const [name, rows, given, expected] of cases) {
    it(name, () => assert.deepEqual(verdicts(rows, given), expected));
  }

  it('keeps each row with its verdict', () => {
    const rows = [alert(), alert({ subscription_id: 'sub_2', email: 'b@example.com' })];
    assert.deepEqual(decideGroup(rows, facts()).map(({ row }) => row), rows);
  });
});

describe('planning the next batch', () => {
  const settings = (minStock: number, batchMultiplier: number) => ({ minStock, batchMultiplier });
  const cases: Array<[string, boolean, { available: number; published: boolean }, { minStock: number; batchMultiplier: number }, ReturnType<typeof planVerdict>]> = [
    ['stock × multiplier subscribers', true, { available: 3, published: true }, settings(1, 2), { kind: 'batch', size: 6 }],
    ['rounded down', true, { available: 5, published: true }, settings(1, 1.5), { kind: 'batch', size: 7 }],
    ['at least one', true, { available: 1, published: true }, settings(1, 0.5), { kind: 'batch', size: 1 }],
    ['exactly the minimum stock is enough', true, { available: 3, published: true }, settings(3, 1), { kind: 'batch', size: 3 }],
    ['stops when the store uninstalled the app', false, { available: 9, published: true }, settings(1, 1), { kind: 'stop', status: 'stopped', reason: 'the store uninstalled the app' }],
    ['stops when the product is unpublished', true, { available: 9, published: false }, settings(1, 1), { kind: 'stop', status: 'unpublished', reason: 'the product is not published' }],
    ['stops below the minimum stock, saying both', true, { available: 2, published: true }, settings(3, 1), { kind: 'stop', status: 'sold_out', reason: '2 in stock, below the minimum of 3' }],
    ['sold out', true, { available: 0, published: true }, settings(1, 2), { kind: 'stop', status: 'sold_out', reason: '0 in stock, below the minimum of 1' }],
    ['unpublished comes before sold out', true, { available: 0, published: false }, settings(1, 1), { kind: 'stop', status: 'unpublished', reason: 'the product is not published' }],
  ];
  for (const [name, sending, stock, policy, expected] of cases) {
    it(name, () => assert.deepEqual(planVerdict(sending, stock, policy), expected));
  }
});

describe("the store's plan allowance", () => {
  const ready = ['a', 'b', 'c', 'd'];
  const retryAt = '2026-05-04T12:15:00.000Z';
  const held = (why: string) => ({ kind: 'deferred' as const, until: retryAt, why, heldByPlan: true });
  const reason = 'waiting: the free allowance of 3 alerts is used up until 2026-06-01T00:00:00.000Z';
  const cases: Array<[string, { granted: number; reason?: string }, string[], Array<[string, string]>]> = [
    ['everything granted: everything goes', { granted: 4 }, ['a', 'b', 'c', 'd'], []],
    ['part granted: the first in queue order go, the rest are held saying why', { granted: 2, reason }, ['a', 'b'], [['c', `held by the plan: ${reason}`], ['d', `held by the plan: ${reason}`]]],
    ['nothing granted, no reason given', { granted: 0 }, [], ready.map((item) => [item, 'held by the plan: the plan allows no more alerts now'])],
  ];
  for (const [name, grant, send, expectedHeld] of cases) {
    it(name, () => {
      const split = withinAllowance(ready, { ...grant, retryAt });
      assert.deepEqual(split.send, send);
      assert.deepEqual(split.held, expectedHeld.map(([item, why]) => ({ item, verdict: held(why) })));
    });
  }

  it('marks held alerts with the prefix the queue has always shown', () => {
    const [first] = withinAllowance(['a'], { granted: 0, retryAt, reason }).held;
    assert.ok(first!.verdict.why.startsWith(OVER_ALLOWANCE));
  });
});

describe('after a failed send', () => {
  const policy = { maxAttempts: 5, retryBaseMs: 1000 };
  const at = (ms: number) => new Date(NOW + ms).toISOString();
  const refused = new MailDeliveryError('550 no such user', { responseCode: 550, recipientRefused: true });
  const login = new MailDeliveryError('535 authentication failed', { responseCode: 535 });
  const cases: Array<[string, number, unknown, number, ReturnType<typeof failureVerdict>]> = [
    ['a recipient refused for good fails and is suppressed', 1, refused, 0.5, { kind: 'failed', why: 'refused by the mail server (550): 550 no such user', suppress: true }],
    ['a refused login is retried: the merchant can fix it', 1, login, 0.5, { kind: 'retry', why: '535 authentication failed', at: at(1000) }],
    ['the first retry waits the base, jittered down by half', 1, new Error('timeout'), 0, { kind: 'retry', why: 'timeout', at: at(500) }],
    ['and up by half', 1, new Error('timeout'), 0.999, { kind: 'retry', why: 'timeout', at: at(1499) }],
    ['each attempt doubles the wait', 3, new Error('timeout'), 0.5, { kind: 'retry', why: 'timeout', at: at(4000) }],
    ['the fourth attempt waits eight times the base', 4, new Error('timeout'), 0.5, { kind: 'retry', why: 'timeout', at: at(8000) }],
    ['gives up when the attempts run out', 5, new Error('timeout'), 0.5, { kind: 'failed', why: 'gave up after 5 attempts: timeout', suppress: false }],
    ['a refusal of the recipient fails even on the last attempt, suppressing', 5, refused, 0.5, { kind: 'failed', why: 'refused by the mail server (550): 550 no such user', suppress: true }],
    ['anything thrown is described', 1, 'socket hang up', 0.5, { kind: 'retry', why: 'socket hang up', at: at(1000) }],
  ];
  for (const [name, attempts, err, random, expected] of cases) {
    it(name, () => assert.deepEqual(failureVerdict(attempts, err, policy, NOW, random), expected));
  }

  it('never waits more than six hours between attempts', () => {
    const verdict = failureVerdict(20, new Error('down'), { maxAttempts: 100, retryBaseMs: 60_000 }, NOW, 0.999);
    assert.deepEqual(verdict, { kind: 'retry', why: 'down', at: at(6 * HOUR) });
  });
});

describe('what each outcome writes to the ledger', () => {
  const row = { attempts: 3 };
  const cases: Array<[string, Parameters<typeof ledgerChanges>[1], Record<string, unknown>]> = [
    ['a skip, with its reason', { kind: 'skipped', why: 'the store uninstalled the app', notified: false }, { status: 'skipped', outcome: 'the store uninstalled the app', held_by_plan: 0 }],
    [
      'a wait for the cap: queued again, the attempt uncounted',
      { kind: 'deferred', until: '2026-05-04T13:00:00.000Z', why: 'waiting for the frequency cap', heldByPlan: false },
      { status: 'queued', next_attempt_at: '2026-05-04T13:00:00.000Z', attempts: 2, outcome: 'waiting for the frequency cap', held_by_plan: 0 },
    ],
    [
      'a hold by the plan: queued again, marked held',
      { kind: 'deferred', until: '2026-05-04T12:15:00.000Z', why: 'held by the plan: the plan allows no more alerts now', heldByPlan: true },
      { status: 'queued', next_attempt_at: '2026-05-04T12:15:00.000Z', attempts: 2, outcome: 'held by the plan: the plan allows no more alerts now', held_by_plan: 1 },
    ],
    ['a retry: queued again, the attempt counted', { kind: 'retry', why: 'timeout', at: '2026-05-04T12:00:01.000Z' }, { status: 'queued', next_attempt_at: '2026-05-04T12:00:01.000Z', outcome: 'will retry: timeout', held_by_plan: 0 }],
    ['a failure', { kind: 'failed', why: 'gave up after 5 attempts: timeout', suppress: false }, { status: 'failed', outcome: 'gave up after 5 attempts: timeout', held_by_plan: 0 }],
  ];
  for (const [name, outcome, expected] of cases) {
    it(name, () => assert.deepEqual(ledgerChanges(row, outcome), expected));
  }
});
