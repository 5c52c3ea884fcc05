import { planRank } from './plans.ts';
import type { StorePlanRow } from './repository.ts';

/**
 * A store's plan moves none → pending → active → past_due → cancelled as its provider says. This
 * module decides, from the state as it is and one provider event, what the store's row becomes
 * and whether the event's subscription is cancelled for good; it is pure so that every order of
 * events can be tested without a provider.
 */
export type PlanStatus = 'pending' | 'active' | 'past_due' | 'cancelled';

export interface PlanEvent {
  shop: string;
  plan: string;
  status: PlanStatus;
  provider: string;
  /** The subscription at the provider the event is about. */
  externalId: string;
  /** When the provider made the event: an older event never overrides a newer one. */
  at: string;
  periodStart?: string | null;
  periodEnd?: string | null;
  checkoutSessionId?: string | null;
  /**
   * The store's owner chose this purchase: a checkout started by the owner (the dashboard, or an
   * agent they bound to the store) or a proposal they accepted. Absent: nobody vouches for it.
   */
  ownerChose?: boolean;
}

/** What an event finds. */
export interface PlanState {
  /** The store's row: the one subscription it holds, or held last. */
  row: StorePlanRow | undefined;
  /**
   * The event's subscription was cancelled before. Kept per subscription beside the row, which
   * holds one subscription while a store may have had many, each cancelled in turn.
   */
  subscriptionCancelled: boolean;
}

/** What the store's row becomes, or why it stays. */
type Change = { row: StorePlanRow } | { ignored: string };

export type Transition = Change & {
  /** The event cancels its subscription for good: to be remembered, whether or not the row shows it. */
  cancels: boolean;
};

export function nextPlanState(state: PlanState, event: PlanEvent, now: string): Transition {
  const current = state.row;
  const same = isSameSubscription(current, event);
  // A cancellation older than its subscription's state on the row is stale news like any other.
  const cancels = event.status === 'cancelled' && !(same && isOlder(current, event));
  // A cancelled subscription stays cancelled: providers do not revive one, a new one is bought.
  if (state.subscriptionCancelled) return { ignored: 'the subscription is already cancelled', cancels };
  const change = same ? sameSubscriptionEvent(current!, event, now) : otherSubscriptionEvent(current, event, now);
  return { ...change, cancels };
}

function isSameSubscription(current: StorePlanRow | undefined, event: PlanEvent): boolean {
  return current !== undefined && current.provider === event.provider && current.external_id === event.externalId;
}

function isOlder(current: StorePlanRow | undefined, event: PlanEvent): boolean {
  return current?.event_at != null && event.at < current.event_at;
}

function sameSubscriptionEvent(current: StorePlanRow, event: PlanEvent, now: string): Change {
  if (isOlder(current, event)) return { ignored: `older (${event.at}) than the state applied (${current.event_at})` };
  // Pending only ever comes first: news of the same time (providers count whole seconds) saying
  // pending after the subscription was active is stale, not a step back.
  if (event.status === 'pending' && current.status !== 'pending') return { ignored: `the subscription is already ${current.status}` };
  return { row: apply(current, event, now) };
}

function otherSubscriptionEvent(current: StorePlanRow | undefined, event: PlanEvent, now: string): Change {
  const holding = current && (current.status === 'active' || current.status === 'past_due');
  // While another plan is in force, a cancellation is about a subscription it replaced: the
  // subscription is remembered as cancelled, the row left alone. Otherwise the row shows it.
  if (event.status === 'cancelled' && holding) return { ignored: 'about a subscription the store no longer holds' };
  // A new checkout the merchant has not finished must not take away the plan they pay for.
  if (holding && event.status === 'pending') return { ignored: 'the store keeps its current plan until the new one is active' };
  // A checkout not finished has nothing in force to put in the cancelled plan's place.
  if (current?.status === 'cancelled' && event.status === 'pending') return { ignored: 'a cancelled plan stays on record until a new one is active' };
  if (holding && current.event_at && event.at < current.event_at) return { ignored: `older (${event.at}) than the plan in force (${current.event_at})` };
  // Only the owner trades a plan in force for a lower one: a lower plan bought by anyone else
  // (starter without the store's own mail server holds every alert) waits until the plan in
  // force has ended, when its subscription's next news finds nothing to replace.
  if (holding && !event.ownerChose && planRank(event.plan) < planRank(current.plan)) {
    return { ignored: `a lower plan (${event.plan}) than the ${current.plan} plan in force, not chosen by the store's owner` };
  }
  return { row: apply(current, event, now) };
}

function apply(current: StorePlanRow | undefined, event: PlanEvent, now: string): StorePlanRow {
  const same = current?.external_id === event.externalId && current?.provider === event.provider;
  const activatedBefore = same && current && current.status !== 'pending' ? current.activated_at : undefined;
  return {
    shop: event.shop,
    plan: event.plan,
    status: event.status,
    checkout_session_id: event.checkoutSessionId ?? (same ? (current?.checkout_session_id ?? null) : null),
    activated_at: activatedBefore ?? (event.status === 'pending' ? (current?.activated_at ?? now) : now),
    updated_at: now,
    provider: event.provider,
    external_id: event.externalId,
    period_start: event.periodStart ?? (same ? (current?.period_start ?? null) : null),
    period_end: event.periodEnd ?? (same ? (current?.period_end ?? null) : null),
    event_at: event.at,
  };
}
