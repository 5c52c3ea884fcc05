/**
 * The plan state machine alone (src/billing/plan-state.ts): every order of provider events, as
 * providers really deliver them (late, twice, about an old subscription).
 */
import assert from 'node:assert/strict';
import { describe, it } from './fixtures/suites.ts';
import fc from 'fast-check';
import { nextPlanState, type PlanEvent, type PlanStatus, type Transition } from '../src/billing/plan-state.ts';
import type { StorePlanRow } from '../src/billing/repository.ts';

const NOW = '2026-11-22T12:00:00.000Z';
const at = (minute: number) => new Date(Date.UTC(2026, 10, 22, 10, minute)).toISOString();
const event = (status: PlanStatus, minute: number, externalId = 'sub_1', plan = 'starter'): PlanEvent => ({
  shop: 'a.myshopify.com',
  plan,
  status,
  provider: 'stripe',
  externalId,
  at: at(minute),
  periodStart: at(minute),
  periodEnd: '2026-12-22T10:00:00.000Z',
});

/** A store's plan state as BillingRepository keeps it: its row, and the subscriptions it knows were cancelled. */
class PlanStore {
  row: StorePlanRow | undefined;
  readonly cancelled = new Set<string>();

  /** What the event would do now. */
  next(e: PlanEvent): Transition {
    return nextPlanState({ row: this.row, subscriptionCancelled: this.cancelled.has(subscriptionKey(e.provider, e.externalId)) }, e, NOW);
  }

  apply(e: PlanEvent): Transition {
    const next = this.next(e);
    if (next.cancels) this.cancelled.add(subscriptionKey(e.provider, e.externalId));
    if ('row' in next) this.row = next.row;
    return next;
  }
}

const subscriptionKey = (provider: string, externalId: string | null) => `${provider}/${externalId}`;

/** Applies events in order, as the store would. */
function replay(events: PlanEvent[]): PlanStore {
  const store = new PlanStore();
  for (const e of events) store.apply(e);
  return store;
}

describe('plan states', () => {
  it('goes none → pending → active → past_due → active → cancelled', () => {
    const { row } = replay([event('pending', 1, 'cs_1'), event('active', 2), event('past_due', 3), event('active', 4)]);
    assert.equal(row?.status, 'active');
    assert.equal(row?.external_id, 'sub_1');
    assert.equal(replay([event('active', 2), event('cancelled', 5)]).row?.status, 'cancelled');
  });

  it('ignores an event older than the state applied', () => {
    const late = replay([event('active', 2), event('past_due', 4)]).next(event('active', 3));
    assert.ok('ignored' in late && /older/.test(late.ignored));
  });

  it('takes a cancellation older than the state applied as stale news: the subscription goes on', () => {
    const stale = replay([event('active', 2), event('cancelled', 1)]);
    assert.equal(stale.row?.status, 'active');
    stale.apply(event('past_due', 3));
    assert.equal(stale.row?.status, 'past_due');
  });

  it('keeps a cancelled subscription cancelled, whatever comes after', () => {
    const cancelled = replay([event('active', 2), event('cancelled', 3)]);
    assert.ok('ignored' in cancelled.next(event('active', 9)));
  });

  it('keeps the plan in force while another checkout is pending, and lets a late cancellation of an old subscription pass by', () => {
    assert.ok('ignored' in replay([event('active', 2)]).next(event('pending', 3, 'cs_2', 'growth')));
    const upgraded = replay([event('active', 2), event('active', 4, 'sub_2', 'growth')]);
    assert.equal(upgraded.row?.plan, 'growth');
    const late = upgraded.next(event('cancelled', 5, 'sub_1'));
    assert.ok('ignored' in late && /no longer holds/.test(late.ignored));
  });

  it('a failed payment makes the plan past_due, and a later success active again', () => {
    assert.equal(replay([event('active', 1), event('past_due', 2)]).row?.status, 'past_due');
    assert.equal(replay([event('active', 1), event('past_due', 2), event('active', 3)]).row?.status, 'active');
  });
});

// ---------------------------------------------------------------------------------------------
// Generated histories: subscriptions at Stripe and at Shopify, each living a lifecycle its
// provider really reports, with equal provider times, our own "checkout started" dated at the
// epoch, delivered in any order and some events twice. They go through a ledger of event ids,
// as BillingRepository.applyEvent records them (billing_events), and each step and each end state is
// checked against the rules in docs/plans.md.
// ---------------------------------------------------------------------------------------------

const RUNS = Number(process.env.RESTOCK_PROPERTY_RUNS ?? 400);
const SEED = process.env.RESTOCK_PROPERTY_SEED === undefined ? undefined : Number(process.env.RESTOCK_PROPERTY_SEED);
const params = { numRuns: RUNS, ...(SEED === undefined ? {} : { seed: SEED }) };
const EPOCH = new Date(0).toISOString();

/** One delivery: the event id the ledger keys on (provider included) and what the event says. */
interface Delivery {
  id: string;
  event: PlanEvent;
}

interface Subscription {
  provider: 'stripe' | 'shopify';
  externalId: string;
  /** Our "checkout started", when the purchase began with us. */
  checkout?: Delivery;
  /** The provider's news of it, oldest first; equal times are ties. */
  news: Delivery[];
}

/**
 * What a provider reports of one subscription, in its order: maybe a first pending (Stripe's
 * incomplete, Shopify's PENDING), the activation, failed and recovered payments, maybe a
 * cancellation last; or a checkout declined before it was ever active.
 */
const lifecycle = (cancelled: fc.Arbitrary<boolean> = fc.boolean()): fc.Arbitrary<PlanStatus[]> =>
  fc.oneof(
    {
      weight: 4,
      arbitrary: fc
        .tuple(fc.boolean(), fc.array(fc.constantFrom<PlanStatus>('past_due', 'active'), { maxLength: 3 }), cancelled)
        .map(([pendingFirst, payments, ends]): PlanStatus[] => [...(pendingFirst ? ['pending' as const] : []), 'active', ...payments, ...(ends ? ['cancelled' as const] : [])]),
    },
    { weight: 1, arbitrary: cancelled.map((ends): PlanStatus[] => (ends ? ['pending', 'cancelled'] : ['pending'])) },
  );

interface SubscriptionShape {
  statuses?: fc.Arbitrary<PlanStatus[]>;
  /** Minute of its first news. */
  start?: fc.Arbitrary<number>;
}

/** Subscription number `n`; a gap of 0 minutes between two news of it is a tie. */
function subscriptionArb(n: number, shape: SubscriptionShape = {}): fc.Arbitrary<Subscription> {
  return fc
    .record({
      provider: fc.constantFrom<'stripe' | 'shopify'>('stripe', 'shopify'),
      plan: fc.constantFrom('starter', 'growth'),
      start: shape.start ?? fc.integer({ min: 0, max: 20 }),
      gaps: fc.array(fc.constantFrom(0, 1, 1, 2), { minLength: 8, maxLength: 8 }),
      statuses: shape.statuses ?? lifecycle(),
      throughUs: fc.boolean(),
    })
    .map(({ provider, plan, start, gaps, statuses, throughUs }) => {
      // Shopify names the subscription when the checkout starts; Stripe's checkout session and
      // the subscription it later creates have ids of their own.
      const externalId = provider === 'stripe' ? `sub_${n}` : `gid://shopify/AppSubscription/${n}`;
      // Purchases the store's owner chose; a lower plan nobody vouches for is test/security/plans.test.ts's.
      const about = { shop: 'a.myshopify.com', plan, provider, ownerChose: true };
      let minute = start;
      const news = statuses.map((status, k) => {
        if (k > 0) minute += gaps[k]!;
        return { id: `${provider}:evt_${n}_${k}`, event: { ...about, status, externalId, at: at(minute), periodStart: at(minute), periodEnd: '2026-12-22T10:00:00.000Z' } };
      });
      const checkout = throughUs
        ? { id: `${provider}:checkout:cs_${n}`, event: { ...about, status: 'pending' as const, externalId: provider === 'stripe' ? `cs_${n}` : externalId, at: EPOCH, checkoutSessionId: `cs_${n}` } }
        : undefined;
      return { provider, externalId, news, ...(checkout ? { checkout } : {}) };
    });
}

/**
 * Every event of the subscriptions in any order, some delivered again anywhere. Our own
 * "checkout started" is recorded before the merchant can pay, so at Stripe it precedes the
 * subscription's news; Shopify may report PENDING before we record it.
 */
function deliveriesArb(subscriptions: Subscription[]): fc.Arbitrary<Delivery[]> {
  const all = subscriptions.flatMap((s) => [...(s.checkout ? [s.checkout] : []), ...s.news]);
  return fc
    .tuple(fc.shuffledSubarray(all, { minLength: all.length, maxLength: all.length }), fc.array(fc.tuple(fc.nat(all.length - 1), fc.nat()), { maxLength: 4 }))
    .map(([order, again]) => {
      let out = [...order];
      for (const s of subscriptions) {
        if (s.provider !== 'stripe' || !s.checkout) continue;
        out = out.filter((d) => d !== s.checkout);
        const firstNews = out.findIndex((d) => s.news.includes(d));
        out.splice(firstNews === -1 ? out.length : firstNews, 0, s.checkout);
      }
      // A redelivery comes after the first delivery, anywhere later.
      for (const [which, where] of again) {
        const first = out.indexOf(all[which]!);
        out.splice(first + 1 + (where % (out.length - first)), 0, all[which]!);
      }
      return out;
    });
}

const historyArb = (subscriptions: fc.Arbitrary<Subscription[]>) =>
  subscriptions.chain((subs) => fc.record({ subs: fc.constant(subs), deliveries: deliveriesArb(subs) }));

interface Step {
  delivery: Delivery;
  before: StorePlanRow | undefined;
  after: StorePlanRow | undefined;
  redelivered: boolean;
  /** What the same event would do again at once, had it slipped past the ledger. */
  again: Transition;
}

/** Delivers through a ledger of event ids: a redelivery is answered `duplicate` and not applied. */
function deliver(deliveries: Delivery[]): { row: StorePlanRow | undefined; steps: Step[]; applied: string[] } {
  const ledger = new Set<string>();
  const applied: string[] = [];
  const steps: Step[] = [];
  const store = new PlanStore();
  for (const delivery of deliveries) {
    const before = store.row;
    const redelivered = ledger.has(delivery.id);
    if (!redelivered) {
      ledger.add(delivery.id);
      if ('row' in store.apply(delivery.event)) applied.push(delivery.id);
    }
    steps.push({ delivery, before, after: store.row, redelivered, again: store.next(delivery.event) });
  }
  return { row: store.row, steps, applied };
}

/** What the rules speak of: which subscription, in which state, since when. */
function stateOf(row: StorePlanRow | undefined) {
  return row && { plan: row.plan, status: row.status, provider: row.provider, externalId: row.external_id, at: row.event_at };
}
function stateOfEvent(event: PlanEvent) {
  return { plan: event.plan, status: event.status, provider: event.provider, externalId: event.externalId, at: event.at };
}

const inForce = (row: StorePlanRow | undefined) => row?.status === 'active' || row?.status === 'past_due';
const sameSubscription = (row: StorePlanRow | undefined, event: PlanEvent) => row?.provider === event.provider && row.external_id === event.externalId;

function describeDeliveries(deliveries: Delivery[]): string {
  return deliveries.map(({ id, event }) => `${id} ${event.externalId} ${event.status} ${event.at}`).join('\n');
}

/** The subscription's newest news: its time, and the states news of that time say (ties give several). */
function newestNews(subscription: Subscription): { at: string; statuses: Set<PlanStatus> } | undefined {
  if (subscription.news.length === 0) return undefined;
  const newest = subscription.news.map((d) => d.event.at).sort().at(-1)!;
  return { at: newest, statuses: new Set(subscription.news.filter((d) => d.event.at === newest).map((d) => d.event.status)) };
}

/** The rules each single step must keep, whatever came before it. */
function assertStepRules(step: Step, label: string) {
  const { delivery, before, after, redelivered, again } = step;
  const event = delivery.event;
  const ignored = JSON.stringify(after) === JSON.stringify(before);
  if (redelivered) {
    assert.deepEqual(after, before, `an event id is applied once: ${label}`);
    return;
  }
  // The row is either left alone or says what this one event says.
  if (!ignored) assert.deepEqual(stateOf(after), stateOfEvent(event), `a row no event said: ${label}`);
  const older = before?.event_at != null && event.at < before.event_at;
  if (sameSubscription(before, event) && older) assert.deepEqual(after, before, `older news of the subscription changed it: ${label}`);
  if (sameSubscription(before, event) && before?.status === 'cancelled') assert.deepEqual(after, before, `a cancelled subscription changed: ${label}`);
  if (inForce(before)) {
    if (event.status === 'pending') assert.deepEqual(after, before, `a checkout not finished took away the plan in force: ${label}`);
    if (event.status === 'cancelled' && !sameSubscription(before, event)) assert.deepEqual(after, before, `a replaced subscription's cancellation ended the plan in force: ${label}`);
    if (older) assert.deepEqual(after, before, `older news replaced the plan in force: ${label}`);
  }
  // A checkout not finished has nothing in force to put in a cancelled plan's place.
  if (before?.status === 'cancelled' && event.status === 'pending') assert.deepEqual(after, before, `a pending checkout erased a cancellation: ${label}`);
  // The same event again at once, had it slipped past the ledger, changes nothing that counts.
  if ('row' in again) assert.deepEqual(stateOf(again.row), stateOf(after), `the same event twice moved the plan: ${label}`);
}

/**
 * Once a subscription's cancellation has arrived (here always its newest news, as providers
 * send it), no later row shows it in another state: whether or not the row ever showed the
 * cancellation, and however many other subscriptions came and were cancelled since.
 */
function assertCancellationsFinal(steps: Step[], label: string) {
  const cancelled = new Set<string>();
  for (const { delivery, after } of steps) {
    if (delivery.event.status === 'cancelled') cancelled.add(subscriptionKey(delivery.event.provider, delivery.event.externalId));
    if (!after) continue;
    const key = subscriptionKey(after.provider, after.external_id);
    assert.ok(after.status === 'cancelled' || !cancelled.has(key), `${key} came back as ${after.status} after its cancellation:\n${label}`);
  }
}

function checkSteps(deliveries: Delivery[]) {
  const label = describeDeliveries(deliveries);
  const result = deliver(deliveries);
  for (const [i, step] of result.steps.entries()) assertStepRules(step, `step ${i}: ${step.delivery.id}\n${label}`);
  assertCancellationsFinal(result.steps, label);
  assert.equal(new Set(result.applied).size, result.applied.length, `an event applied twice:\n${label}`);
  return { ...result, label };
}

describe('plan states over generated histories', () => {
  it('one subscription, in any order and with redeliveries, ends in the state of its newest news; its cancellation is final', (ctx) => {
    const seen = { cancelled: 0, inForce: 0, ties: 0 };
    fc.assert(
      fc.property(historyArb(subscriptionArb(1).map((s) => [s])), ({ subs: [subscription], deliveries }) => {
        const { row, label } = checkSteps(deliveries);
        const newest = newestNews(subscription!);
        if (!newest) {
          assert.deepEqual(stateOf(row), stateOfEvent(subscription!.checkout!.event), label);
          return;
        }
        assert.equal(row?.external_id, subscription!.externalId, label);
        assert.equal(row?.event_at, newest.at, `the newest news wins:\n${label}`);
        // Cancellation is final and wins a tie; otherwise a tie of equal times may end in either state.
        const cancelled = subscription!.news.some((d) => d.event.status === 'cancelled');
        if (cancelled) assert.equal(row?.status, 'cancelled', label);
        else assert.ok(newest.statuses.has(row!.status as PlanStatus), `${row?.status} is none of the newest news ${[...newest.statuses]}:\n${label}`);
        if (cancelled) seen.cancelled++;
        if (inForce(row)) seen.inForce++;
        if (newest.statuses.size > 1) seen.ties++;
      }),
      params,
    );
    // Histories that never end cancelled, in force, or in a tie would test little of the rules.
    ctx.diagnostic(`over ${RUNS} histories: ${JSON.stringify(seen)}`);
    const floor = Math.floor(RUNS / 20);
    assert.ok(seen.cancelled >= floor && seen.inForce >= floor && seen.ties >= 1, JSON.stringify(seen));
  });

  it('several subscriptions at both providers: every step keeps the rules, and the newest activation or failed payment wins', (ctx) => {
    const seen = { newestWins: 0, replaced: 0, keptInForce: 0 };
    const subscriptions = fc.integer({ min: 2, max: 4 }).chain((n) => fc.tuple(...Array.from({ length: n }, (_, i) => subscriptionArb(i + 1))));
    fc.assert(
      fc.property(historyArb(subscriptions), ({ subs, deliveries }) => {
        const { row, steps, label } = checkSteps(deliveries);
        for (const step of steps) {
          if (inForce(step.before) && !sameSubscription(step.before, step.delivery.event)) {
            if (JSON.stringify(step.after) === JSON.stringify(step.before)) seen.keptInForce++;
            else seen.replaced++;
          }
        }
        // When the newest news of all (no tie) activates or fails a payment of a subscription
        // never cancelled, it is the plan in force, whatever the order.
        const news = subs.flatMap((s) => s.news);
        const newest = news.map((d) => d.event.at).sort().at(-1)!;
        const last = news.filter((d) => d.event.at === newest);
        const about = last[0]!.event;
        const neverCancelled = !news.some((d) => d.event.status === 'cancelled' && d.event.externalId === about.externalId);
        if (last.length === 1 && (about.status === 'active' || about.status === 'past_due') && neverCancelled) {
          assert.deepEqual(stateOf(row), stateOfEvent(about), `the newest news is not in force:\n${label}`);
          seen.newestWins++;
        }
      }),
      params,
    );
    ctx.diagnostic(`over ${RUNS} histories: ${JSON.stringify(seen)}`);
    assert.ok(seen.newestWins >= RUNS / 10 && seen.replaced >= 1 && seen.keptInForce >= 1, JSON.stringify(seen));
  });

  it('an upgrade: whenever the old subscription\'s cancellation arrives, even first, the new one\'s newest news is in force', (ctx) => {
    const upgrade = fc
      .tuple(subscriptionArb(1, { statuses: lifecycle(fc.constant(false)).filter((s) => s.includes('active')) }), fc.integer({ min: 1, max: 5 }), fc.integer({ min: 0, max: 12 }))
      .chain(([old, after, cancelDelay]) => {
        const lastOld = old.news.at(-1)!.event.at;
        const start = new Date(lastOld).getUTCMinutes() + after;
        return subscriptionArb(2, { statuses: lifecycle(fc.constant(false)).filter((s) => s.includes('active')), start: fc.constant(start) }).map((replacement) => {
          // The old subscription is cancelled once the new one is active: at that minute or later.
          const activation = replacement.news.find((d) => d.event.status === 'active')!.event.at;
          const cancelAt = new Date(new Date(activation).getTime() + cancelDelay * 60_000).toISOString();
          const cancellation = { id: `${old.provider}:evt_1_cancel`, event: { ...old.news[0]!.event, status: 'cancelled' as const, at: cancelAt } };
          return [{ ...old, news: [...old.news, cancellation] }, replacement];
        });
      });
    let cancellationFirst = 0;
    fc.assert(
      fc.property(historyArb(upgrade), ({ subs: [old, replacement], deliveries }) => {
        const { row, label } = checkSteps(deliveries);
        const newest = newestNews(replacement!)!;
        assert.equal(row?.external_id, replacement!.externalId, `the upgrade is not in force:\n${label}`);
        assert.equal(row?.event_at, newest.at, label);
        assert.ok(newest.statuses.has(row!.status as PlanStatus), label);
        if (deliveries[0]?.event.status === 'cancelled' || deliveries.findIndex((d) => d === old!.news.at(-1)) < deliveries.findIndex((d) => replacement!.news.includes(d))) cancellationFirst++;
      }),
      params,
    );
    ctx.diagnostic(`the old cancellation came first in ${cancellationFirst} of ${RUNS} histories`);
    assert.ok(cancellationFirst >= RUNS / 10, `the old cancellation came before the new subscription's news ${cancellationFirst} times`);
  });

  it('a store that cancelled has no plan in force, however an unfinished new checkout and the old subscription\'s late news interleave', (ctx) => {
    const cancelledThenUnfinished = fc
      .tuple(subscriptionArb(1, { statuses: lifecycle(fc.constant(true)) }), fc.array(fc.constant(null), { minLength: 1, maxLength: 2 }))
      .chain(([cancelled, extra]) =>
        fc
          .tuple(...extra.map((_, i) => subscriptionArb(i + 2, { statuses: fc.constantFrom<PlanStatus[]>([], ['pending']), start: fc.integer({ min: 0, max: 40 }) })))
          .map((unfinished) => [cancelled, ...unfinished.map((s) => ({ ...s, checkout: s.checkout ?? { id: `${s.provider}:checkout:${s.externalId}`, event: { ...cancelled.news[0]!.event, status: 'pending' as const, provider: s.provider, externalId: s.provider === 'stripe' ? `cs_${s.externalId}` : s.externalId, at: EPOCH } } }))]),
      );
    let revivable = 0;
    fc.assert(
      fc.property(historyArb(cancelledThenUnfinished), ({ subs: [cancelled], deliveries }) => {
        const { row, label } = checkSteps(deliveries);
        assert.ok(!inForce(row), `a cancelled plan came back as ${row?.status} (${row?.external_id}):\n${label}`);
        // The case that matters: the cancellation, then a new checkout, then news older than both.
        const cancelAt = deliveries.findIndex((d) => d.event.status === 'cancelled');
        const checkoutAt = deliveries.findIndex((d, i) => i > cancelAt && d.event.status === 'pending' && d.event.externalId !== cancelled!.externalId);
        if (checkoutAt !== -1 && deliveries.slice(checkoutAt).some((d) => d.event.externalId === cancelled!.externalId && d.event.status !== 'cancelled')) revivable++;
      }),
      params,
    );
    ctx.diagnostic(`late news after the cancellation and a new checkout in ${revivable} of ${RUNS} histories`);
    assert.ok(revivable >= RUNS / 20, `late news after a cancellation and a new checkout ${revivable} times`);
  });

  // The row shows one subscription: once a second one's cancellation replaced the first's there,
  // only the cancellation remembered per subscription stops the first one's late news.
  it('a cancelled subscription stays cancelled after a second subscription is cancelled too', () => {
    const row = deliver([
      { id: 'e4', event: event('cancelled', 5, 'sub_1') },
      { id: 'e2', event: event('active', 3, 'sub_2') },
      { id: 'e3', event: event('cancelled', 4, 'sub_2') },
      { id: 'e1', event: event('active', 2, 'sub_1') },
    ]).row;
    assert.equal(row?.status, 'cancelled', `${row?.external_id} is ${row?.status}`);
  });

  it('several subscriptions, each cancelled, in any order: none comes back, and the store ends with no plan in force', (ctx) => {
    const subscriptions = fc.integer({ min: 2, max: 4 }).chain((n) => fc.tuple(...Array.from({ length: n }, (_, i) => subscriptionArb(i + 1, { statuses: lifecycle(fc.constant(true)) }))));
    let revivable = 0;
    fc.assert(
      fc.property(historyArb(subscriptions), ({ deliveries }) => {
        const { row, label } = checkSteps(deliveries);
        assert.equal(row?.status, 'cancelled', `the store ends with ${row?.external_id} ${row?.status}:\n${label}`);
        // The case that matters: a subscription's news after its own cancellation and another's since.
        const isCancellation = (d: Delivery) => d.event.status === 'cancelled';
        const late = deliveries.some((d, i) => {
          const own = deliveries.findIndex((c) => isCancellation(c) && c.event.externalId === d.event.externalId);
          return !isCancellation(d) && own !== -1 && own < i && deliveries.slice(own + 1, i).some((c) => isCancellation(c) && c.event.externalId !== d.event.externalId);
        });
        if (late) revivable++;
      }),
      params,
    );
    ctx.diagnostic(`news after its own cancellation and another's in ${revivable} of ${RUNS} histories`);
    assert.ok(revivable >= RUNS / 10, `news after its own cancellation and another's ${revivable} times`);
  });
});
