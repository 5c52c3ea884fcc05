// Longer than most files on purpose: billing's tables (checkout sessions, plans and their events, each
// period's usage, ceilings and reports) change together in transactions, so one repository holds them.
import { sql } from 'kysely';
import type { Database, Trx } from '../core/db/database.ts';
import { lockRows } from '../core/db/locking.ts';
import { nextPlanState, type PlanEvent } from './plan-state.ts';
import type { CheckoutSessionsTable, StorePlansTable } from '../core/db/schema.ts';

export type CheckoutSessionRow = CheckoutSessionsTable;
export type StorePlanRow = StorePlansTable;

/** A period with alerts beyond the allowance its provider has not been told of, and the plan they are billed under. */
export interface UnreportedOverage {
  shop: string;
  period_start: string;
  overage: number;
  overage_reported: number;
  provider: string;
  external_id: string;
  plan: string;
}

/** Storage of checkout sessions, the plan each store holds and the subscriptions cancelled. */
export class BillingRepository {
  constructor(private readonly database: Database) {}

  createSession(row: CheckoutSessionRow): Promise<unknown> {
    return this.database.write((trx) => trx.insertInto('checkout_sessions').values(row).execute());
  }

  findSession(id: string): Promise<CheckoutSessionRow | undefined> {
    return this.database.db.selectFrom('checkout_sessions').selectAll().where('id', '=', id).executeTakeFirst();
  }

  /**
   * Completes an unexpired session whose owner key is `keyHash` (used up by it), and gives its
   * store the plan, in one transaction: an open one (the owner's own checkout), or, `accepting`,
   * a proposal already paid for (the owner's acceptance is the purchase). Returns the session as
   * it is afterwards (unchanged when it was not in that state, had expired, was refunded, or the
   * key was not its own).
   */
  completeSession(id: string, keyHash: string, now: string, periodEnd: string, accepting = false): Promise<CheckoutSessionRow | undefined> {
    return this.database.write(async (trx) => {
      const completed = await trx
        .updateTable('checkout_sessions')
        .set({ status: 'completed', completed_at: now, owner_key_hash: null, ...(accepting ? { accepted_at: now } : {}) })
        .where('id', '=', id)
        .where('status', '=', accepting ? 'awaiting_owner' : 'open')
        .where('owner_key_hash', '=', keyHash)
        .where('expires_at', '>', now)
        .where('refunded_at', 'is', null)
        .returningAll()
        .executeTakeFirst();
      if (completed) {
        const event: PlanEvent = {
          shop: completed.shop,
          plan: completed.plan,
          status: 'active',
          provider: completed.provider,
          externalId: completed.id,
          at: now,
          periodStart: now,
          periodEnd,
          checkoutSessionId: completed.id,
        };
        await this.applyWithin(trx, event, now);
        return completed;
      }
      return trx.selectFrom('checkout_sessions').selectAll().where('id', '=', id).executeTakeFirst();
    });
  }

  /**
   * The owner accepts a proposal with its key: it becomes an open session (at its provider when
   * `changes` names one), once. Undefined when it was no longer awaiting that key, or had expired.
   */
  acceptProposal(
    id: string,
    keyHash: string,
    changes: Pick<CheckoutSessionRow, 'accepted_at' | 'owner_key_hash' | 'external_id' | 'external_url'>,
    now: string,
  ): Promise<CheckoutSessionRow | undefined> {
    return this.database.write((trx) =>
      trx
        .updateTable('checkout_sessions')
        .set({ status: 'open', ...changes })
        .where('id', '=', id)
        .where('status', '=', 'awaiting_owner')
        .where('owner_key_hash', '=', keyHash)
        .where('expires_at', '>', now)
        .where('refunded_at', 'is', null)
        .returningAll()
        .executeTakeFirst(),
    );
  }

  /** The owner declines a proposal with its key; undefined when it was no longer awaiting that key. */
  declineProposal(id: string, keyHash: string): Promise<CheckoutSessionRow | undefined> {
    return this.database.write((trx) =>
      trx
        .updateTable('checkout_sessions')
        .set({ status: 'declined', owner_key_hash: null })
        .where('id', '=', id)
        .where('status', '=', 'awaiting_owner')
        .where('owner_key_hash', '=', keyHash)
        .returningAll()
        .executeTakeFirst(),
    );
  }

  /** How many proposals for the store were mailed to its owner since `since`. */
  async proposalsMailedSince(shop: string, since: string): Promise<number> {
    const row = await this.database.db
      .selectFrom('checkout_sessions')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('shop', '=', shop)
      .where('proposal_mailed_at', '>', since)
      .executeTakeFirstOrThrow();
    return Number(row.n);
  }

  /** Paid proposals the owner declined or let expire, not yet refunded. */
  undeliveredPaidProposals(providers: readonly string[], now: string, limit: number): Promise<CheckoutSessionRow[]> {
    return this.database.db
      .selectFrom('checkout_sessions')
      .selectAll()
      .where('provider', 'in', providers)
      .where('refunded_at', 'is', null)
      .where((eb) => eb.or([eb('status', '=', 'declined'), eb.and([eb('status', '=', 'awaiting_owner'), eb('expires_at', '<=', now)])]))
      .orderBy('expires_at')
      .limit(limit)
      .execute();
  }

  /**
   * Claims a paid proposal's refund: true only for the first to claim it, and only while it is
   * declined or expired, so an acceptance and a refund never both happen.
   */
  async claimRefund(id: string, now: string): Promise<boolean> {
    const claimed = await this.database.write((trx) =>
      trx
        .updateTable('checkout_sessions')
        .set({ refunded_at: now })
        .where('id', '=', id)
        .where('refunded_at', 'is', null)
        .where((eb) => eb.or([eb('status', '=', 'declined'), eb.and([eb('status', '=', 'awaiting_owner'), eb('expires_at', '<=', now)])]))
        .executeTakeFirst(),
    );
    return Number(claimed.numUpdatedRows) === 1;
  }

  /** A refund that failed: claimable again by the next sweep. */
  releaseRefund(id: string): Promise<unknown> {
    return this.database.write((trx) => trx.updateTable('checkout_sessions').set({ refunded_at: null }).where('id', '=', id).execute());
  }

  markProposalMailed(id: string, now: string): Promise<unknown> {
    return this.database.write((trx) => trx.updateTable('checkout_sessions').set({ proposal_mailed_at: now }).where('id', '=', id).execute());
  }

  /**
   * The provider says the purchase went through (its own page): the session is complete.
   * `approvedByOwner`: the provider's page was the owner's to approve (Shopify's, in the
   * merchant's admin), so the purchase counts as the owner's choice from now on.
   */
  markCompleted(id: string, now: string, { approvedByOwner = false } = {}): Promise<unknown> {
    return this.database.write((trx) =>
      trx
        .updateTable('checkout_sessions')
        .set((eb) => ({ status: 'completed', completed_at: now, ...(approvedByOwner ? { accepted_at: eb.fn.coalesce('accepted_at', eb.val(now)) } : {}) }))
        .where('id', '=', id)
        .where('status', '=', 'open')
        .execute(),
    );
  }

  findSessionByExternal(externalId: string): Promise<CheckoutSessionRow | undefined> {
    return this.database.db.selectFrom('checkout_sessions').selectAll().where('external_id', '=', externalId).executeTakeFirst();
  }

  planOf(shop: string): Promise<StorePlanRow | undefined> {
    return this.database.db.selectFrom('store_plans').selectAll().where('shop', '=', shop).executeTakeFirst();
  }

  planByExternal(provider: string, externalId: string): Promise<StorePlanRow | undefined> {
    return this.database.db.selectFrom('store_plans').selectAll().where('provider', '=', provider).where('external_id', '=', externalId).executeTakeFirst();
  }

  /**
   * Applies one provider event once: the event id is recorded in the same transaction as the
   * plan change, so a redelivery finds it and changes nothing. `event` undefined records an
   * event that concerns no store of ours.
   */
  applyEvent(provider: string, eventId: string, type: string, event: PlanEvent | undefined, now: string, unresolved = 'concerns no store'): Promise<string> {
    return this.database.write(async (trx) => {
      const inserted = await trx
        .insertInto('billing_events')
        .values({ provider, event_id: eventId, type, shop: event?.shop ?? null, outcome: 'applying', received_at: now })
        .onConflict((oc) => oc.doNothing())
        .executeTakeFirst();
      if (Number(inserted.numInsertedOrUpdatedRows ?? 0n) === 0) return 'duplicate';
      const outcome = event ? await this.applyWithin(trx, event, now) : `ignored: ${unresolved}`;
      await trx.updateTable('billing_events').set({ outcome }).where('provider', '=', provider).where('event_id', '=', eventId).execute();
      return outcome;
    });
  }

  /**
   * Takes up to `wanted` alerts for a period, atomically, up to `room` (the allowance and what the
   * overage ceiling pays for): concurrent workers together never take more. Those beyond `quota`
   * are the period's overage. Returns how many were granted, and the period's count after it.
   */
  reserveUsage(shop: string, periodStart: string, quota: number, room: number, wanted: number): Promise<{ granted: number; used: number }> {
    return this.database.write(async (trx) => {
      await this.ensureUsage(trx, shop, periodStart);
      const query = trx.selectFrom('plan_usage').select('used').where('shop', '=', shop).where('period_start', '=', periodStart);
      const { used } = await lockRows(this.database, query).executeTakeFirstOrThrow();
      const granted = Math.max(0, Math.min(wanted, room - used));
      if (granted > 0) {
        const overage = Math.max(0, used + granted - Math.max(quota, used));
        await trx
          .updateTable('plan_usage')
          .set((eb) => ({ used: used + granted, overage: eb('overage', '+', overage) }))
          .where('shop', '=', shop)
          .where('period_start', '=', periodStart)
          .execute();
      }
      return { granted, used: used + granted };
    });
  }

  /** Marks the period's warning to the merchant as sent; true only for the first to mark it. */
  markWarned(shop: string, periodStart: string, now: string): Promise<boolean> {
    return this.database.write(async (trx) => {
      const marked = await trx.updateTable('plan_usage').set({ warned_at: now }).where('shop', '=', shop).where('period_start', '=', periodStart).where('warned_at', 'is', null).executeTakeFirst();
      return Number(marked.numUpdatedRows) === 1;
    });
  }

  /** The owner's overage ceiling in cents; undefined when they set none (the plan's default applies). */
  async overageCeiling(shop: string): Promise<number | undefined> {
    const row = await this.database.db.selectFrom('overage_ceilings').select('ceiling_cents').where('shop', '=', shop).executeTakeFirst();
    return row?.ceiling_cents;
  }

  setOverageCeiling(shop: string, ceilingCents: number, now: string): Promise<unknown> {
    return this.database.write((trx) =>
      trx
        .insertInto('overage_ceilings')
        .values({ shop, ceiling_cents: ceilingCents, updated_at: now })
        .onConflict((oc) => oc.column('shop').doUpdateSet({ ceiling_cents: ceilingCents, updated_at: now }))
        .execute(),
    );
  }

  /** The capped amount `provider` holds for the store's subscription `externalId` (undefined: none known). */
  async overageCap(shop: string, provider: string, externalId: string | null): Promise<number | undefined> {
    if (externalId === null) return undefined;
    const row = await this.database.db
      .selectFrom('overage_caps')
      .select('cap_cents')
      .where('shop', '=', shop)
      .where('provider', '=', provider)
      .where('external_id', '=', externalId)
      .executeTakeFirst();
    return row?.cap_cents;
  }

  setOverageCap(shop: string, provider: string, externalId: string, capCents: number, now: string): Promise<unknown> {
    const values = { provider, external_id: externalId, cap_cents: capCents, updated_at: now };
    return this.database.write((trx) =>
      trx.insertInto('overage_caps').values({ shop, ...values }).onConflict((oc) => oc.column('shop').doUpdateSet(values)).execute(),
    );
  }

  /**
   * Periods whose alerts beyond the allowance the store's provider was not yet told of all, for
   * stores whose plan is held at one of `providers`: what to report next.
   */
  unreportedOverage(providers: readonly string[], limit: number): Promise<UnreportedOverage[]> {
    if (providers.length === 0) return Promise.resolve([]);
    return this.database.db
      .selectFrom('plan_usage')
      .innerJoin('store_plans', 'store_plans.shop', 'plan_usage.shop')
      .select(['plan_usage.shop', 'plan_usage.period_start', 'plan_usage.overage', 'plan_usage.overage_reported', 'store_plans.provider', 'store_plans.external_id', 'store_plans.plan'])
      .where('store_plans.provider', 'in', providers)
      .where('store_plans.external_id', 'is not', null)
      .whereRef('plan_usage.overage', '>', 'plan_usage.overage_reported')
      .orderBy('plan_usage.period_start')
      .limit(limit)
      .execute() as Promise<UnreportedOverage[]>;
  }

  /**
   * Claims the alerts from `from` to `to` of a period's overage for one report: true for the one
   * claimant that moved the mark. Claimed before the provider is told, so two workers never bill
   * the same alerts; a report that fails gives its claim back (`unclaimOverage`).
   */
  claimOverage(shop: string, periodStart: string, from: number, to: number): Promise<boolean> {
    return this.moveReportedMark(shop, periodStart, from, to);
  }

  unclaimOverage(shop: string, periodStart: string, from: number, to: number): Promise<boolean> {
    return this.moveReportedMark(shop, periodStart, to, from);
  }

  private moveReportedMark(shop: string, periodStart: string, from: number, to: number): Promise<boolean> {
    return this.database.write(async (trx) => {
      const moved = await trx
        .updateTable('plan_usage')
        .set({ overage_reported: to })
        .where('shop', '=', shop)
        .where('period_start', '=', periodStart)
        .where('overage_reported', '=', from)
        .executeTakeFirst();
      return Number(moved.numUpdatedRows) === 1;
    });
  }

  /** Marks the period's notice to the merchant as sent; true only for the first to mark it. */
  markNoticeSent(shop: string, periodStart: string, now: string): Promise<boolean> {
    return this.database.write(async (trx) => {
      await this.ensureUsage(trx, shop, periodStart);
      const marked = await trx
        .updateTable('plan_usage')
        .set({ notified_at: now })
        .where('shop', '=', shop)
        .where('period_start', '=', periodStart)
        .where('notified_at', 'is', null)
        .executeTakeFirst();
      return Number(marked.numUpdatedRows) === 1;
    });
  }

  private async ensureUsage(trx: Trx, shop: string, periodStart: string): Promise<void> {
    await trx.insertInto('plan_usage').values({ shop, period_start: periodStart, used: 0, notified_at: null, overage: 0, warned_at: null, overage_reported: 0 }).onConflict((oc) => oc.doNothing()).execute();
  }

  /** Gives back alerts reserved but not sent (a failure that will be retried, or given up): the last taken, so the overage first. */
  releaseUsage(shop: string, periodStart: string, count: number): Promise<unknown> {
    return this.database.write((trx) =>
      trx
        .updateTable('plan_usage')
        .set((eb) => ({ used: eb('used', '-', count), overage: sql<number>`case when overage > ${count} then overage - ${count} else 0 end` }))
        .where('shop', '=', shop)
        .where('period_start', '=', periodStart)
        .where('used', '>=', count)
        .execute(),
    );
  }

  /** The period's count, and how many of it went beyond the allowance. */
  async usage(shop: string, periodStart: string): Promise<{ used: number; overage: number }> {
    const row = await this.database.db.selectFrom('plan_usage').select(['used', 'overage']).where('shop', '=', shop).where('period_start', '=', periodStart).executeTakeFirst();
    return { used: row?.used ?? 0, overage: row?.overage ?? 0 };
  }

  private async applyWithin(trx: Trx, event: PlanEvent, now: string): Promise<string> {
    const query = trx.selectFrom('store_plans').selectAll().where('shop', '=', event.shop);
    const current = await lockRows(this.database, query).executeTakeFirst();
    // Whether the owner chose the purchase is read here, from the session it came through, so
    // that no caller can vouch for an event by saying so.
    const session = event.checkoutSessionId
      ? await trx.selectFrom('checkout_sessions').select(['accepted_at', 'shop']).where('id', '=', event.checkoutSessionId).executeTakeFirst()
      : undefined;
    const ownerChose = session !== undefined && session.accepted_at !== null && session.shop === event.shop;
    const subscriptionCancelled = await this.isCancelled(trx, event.provider, event.externalId);
    const next = nextPlanState({ row: current, subscriptionCancelled }, { ...event, ownerChose }, now);
    if (next.cancels && !subscriptionCancelled) await this.rememberCancellation(trx, event);
    if ('ignored' in next) return `ignored: ${next.ignored}`;
    const { shop: _shop, ...changes } = next.row;
    await trx.insertInto('store_plans').values(next.row).onConflict((oc) => oc.column('shop').doUpdateSet(changes)).execute();
    return `${current?.status ?? 'none'} → ${next.row.status}`;
  }

  private async isCancelled(trx: Trx, provider: string, externalId: string): Promise<boolean> {
    const row = await trx.selectFrom('cancelled_subscriptions').select('provider').where('provider', '=', provider).where('external_id', '=', externalId).executeTakeFirst();
    return row !== undefined;
  }

  private async rememberCancellation(trx: Trx, event: PlanEvent): Promise<void> {
    await trx
      .insertInto('cancelled_subscriptions')
      .values({ provider: event.provider, external_id: event.externalId, shop: event.shop, cancelled_at: event.at })
      // A concurrent delivery of the same subscription's cancellation already remembered it.
      .onConflict((oc) => oc.doNothing())
      .execute();
  }
}
