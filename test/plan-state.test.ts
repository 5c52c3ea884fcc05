/**
 * The plan state machine alone (src/billing/plan-state.ts): every order of provider events, as
 * providers really deliver them (late, twice, about an old subscription).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { nextPlanState, type PlanEvent, type PlanStatus } from '../src/billing/plan-state.ts';
import type { StorePlanRow } from '../src/billing/store.ts';

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

/** Applies events in order, as the store would, and returns the row in the end. */
function replay(events: PlanEvent[]): StorePlanRow | undefined {
  let row: StorePlanRow | undefined;
  for (const e of events) {
    const next = nextPlanState(row, e, NOW);
    if ('row' in next) row = next.row;
  }
  return row;
}

describe('plan states', () => {
  it('goes none → pending → active → past_due → active → cancelled', () => {
    const row = replay([event('pending', 1, 'cs_1'), event('active', 2), event('past_due', 3), event('active', 4)]);
    assert.equal(row?.status, 'active');
    assert.equal(row?.external_id, 'sub_1');
    assert.equal(replay([event('active', 2), event('cancelled', 5)])?.status, 'cancelled');
  });

  it('ignores an event older than the state applied', () => {
    const active = replay([event('active', 2), event('past_due', 4)])!;
    const late = nextPlanState(active, event('active', 3), NOW);
    assert.ok('ignored' in late && /older/.test(late.ignored));
  });

  it('keeps a cancelled subscription cancelled, whatever comes after', () => {
    const cancelled = replay([event('active', 2), event('cancelled', 3)])!;
    assert.ok('ignored' in nextPlanState(cancelled, event('active', 9), NOW));
  });

  it('keeps the plan in force while another checkout is pending, and lets a late cancellation of an old subscription pass by', () => {
    const active = replay([event('active', 2)])!;
    assert.ok('ignored' in nextPlanState(active, event('pending', 3, 'cs_2', 'growth'), NOW));
    const upgraded = replay([event('active', 2), event('active', 4, 'sub_2', 'growth')])!;
    assert.equal(upgraded.plan, 'growth');
    const late = nextPlanState(upgraded, event('cancelled', 5, 'sub_1'), NOW);
    assert.ok('ignored' in late && /no longer holds/.test(late.ignored));
  });

  it('a failed payment makes the plan past_due, and a later success active again', () => {
    assert.equal(replay([event('active', 1), event('past_due', 2)])?.status, 'past_due');
    assert.equal(replay([event('active', 1), event('past_due', 2), event('active', 3)])?.status, 'active');
  });

  it('for one subscription, any delivery order ends in the state of the newest event', () => {
    const statuses: PlanStatus[] = ['pending', 'active', 'past_due', 'active', 'cancelled'];
    const events = statuses.map((status, i) => event(status, i + 1));
    fc.assert(
      fc.property(fc.shuffledSubarray(events, { minLength: events.length, maxLength: events.length }), fc.array(fc.nat(4), { maxLength: 3 }), (order, repeats) => {
        // Deliveries come in any order, some twice.
        const delivered = [...order, ...repeats.map((i) => events[i]!)];
        const row = replay(delivered);
        // Cancellation is final: once delivered, nothing after it revives the subscription.
        assert.equal(row?.status, 'cancelled');
      }),
    );
    const withoutCancel = events.slice(0, 4);
    fc.assert(
      fc.property(fc.shuffledSubarray(withoutCancel, { minLength: 4, maxLength: 4 }), (order) => {
        assert.equal(replay(order)?.event_at, at(4), 'the newest event wins');
        assert.equal(replay(order)?.status, 'active');
      }),
    );
  });
});
