import type { Database, Trx } from '../core/db/database.ts';
import { lockRows } from '../core/db/locking.ts';
import { nextPlanState, type PlanEvent } from './plan-state.ts';
import type { CheckoutSessionsTable, StorePlansTable } from '../core/db/schema.ts';

export type CheckoutSessionRow = CheckoutSessionsTable;
export type StorePlanRow = StorePlansTable;

/** Storage of checkout sessions and the plan each store holds. */
export class BillingRepository {
  constructor(private readonly database: Database) {}

  createSession(row: CheckoutSessionRow): Promise<unknown> {
    return this.database.write((trx) => trx.insertInto('checkout_sessions').values(row).execute());
  }

  findSession(id: string): Promise<CheckoutSessionRow | undefined> {
    return this.database.db.selectFrom('checkout_sessions').selectAll().where('id', '=', id).executeTakeFirst();
  }

  /**
   * Completes an open, unexpired session and gives its store the plan, in one transaction.
   * Returns the session as it is afterwards (unchanged when it was not open or had expired).
   */
  completeSession(id: string, now: string, periodEnd: string): Promise<CheckoutSessionRow | undefined> {
    return this.database.write(async (trx) => {
      const completed = await trx
        .updateTable('checkout_sessions')
        .set({ status: 'completed', completed_at: now })
        .where('id', '=', id)
        .where('status', '=', 'open')
        .where('expires_at', '>', now)
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

  /** The provider says the purchase went through (its own page): the session is complete. */
  markCompleted(id: string, now: string): Promise<unknown> {
    return this.database.write((trx) =>
      trx.updateTable('checkout_sessions').set({ status: 'completed', completed_at: now }).where('id', '=', id).where('status', '=', 'open').execute(),
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
   * Takes up to `wanted` alerts from a store's allowance for a period, atomically: concurrent
   * workers together never take more than `quota`. Returns how many were granted.
   */
  reserveUsage(shop: string, periodStart: string, quota: number, wanted: number): Promise<number> {
    return this.database.write(async (trx) => {
      await this.ensureUsage(trx, shop, periodStart);
      const query = trx.selectFrom('plan_usage').select('used').where('shop', '=', shop).where('period_start', '=', periodStart);
      const { used } = await lockRows(this.database, query).executeTakeFirstOrThrow();
      const granted = Math.max(0, Math.min(wanted, quota - used));
      if (granted > 0) {
        await trx.updateTable('plan_usage').set({ used: used + granted }).where('shop', '=', shop).where('period_start', '=', periodStart).execute();
      }
      return granted;
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
    await trx.insertInto('plan_usage').values({ shop, period_start: periodStart, used: 0, notified_at: null }).onConflict((oc) => oc.doNothing()).execute();
  }

  /** Gives back alerts reserved but not sent (a failure that will be retried, or given up). */
  releaseUsage(shop: string, periodStart: string, count: number): Promise<unknown> {
    return this.database.write((trx) =>
      trx
        .updateTable('plan_usage')
        .set((eb) => ({ used: eb('used', '-', count) }))
        .where('shop', '=', shop)
        .where('period_start', '=', periodStart)
        .where('used', '>=', count)
        .execute(),
    );
  }

  usage(shop: string, periodStart: string): Promise<number> {
    return this.database.db
      .selectFrom('plan_usage')
      .select('used')
      .where('shop', '=', shop)
      .where('period_start', '=', periodStart)
      .executeTakeFirst()
      .then((row) => row?.used ?? 0);
  }

  private async applyWithin(trx: Trx, event: PlanEvent, now: string): Promise<string> {
    const query = trx.selectFrom('store_plans').selectAll().where('shop', '=', event.shop);
    const current = await lockRows(this.database, query).executeTakeFirst();
    const next = nextPlanState(current, event, now);
    if ('ignored' in next) return `ignored: ${next.ignored}`;
    const { shop: _shop, ...changes } = next.row;
    await trx.insertInto('store_plans').values(next.row).onConflict((oc) => oc.column('shop').doUpdateSet(changes)).execute();
    return `${current?.status ?? 'none'} → ${next.row.status}`;
  }
}
