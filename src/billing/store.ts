import type { Database } from '../core/db/database.ts';
import type { CheckoutSessionsTable, StorePlansTable } from '../core/db/schema.ts';

export type CheckoutSessionRow = CheckoutSessionsTable;
export type StorePlanRow = StorePlansTable;

/** Storage of checkout sessions and the plan each store holds. */
export class BillingStore {
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
  completeSession(id: string, now: string): Promise<CheckoutSessionRow | undefined> {
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
        const plan: StorePlanRow = {
          shop: completed.shop,
          plan: completed.plan,
          status: 'active',
          checkout_session_id: completed.id,
          activated_at: now,
          updated_at: now,
        };
        await trx
          .insertInto('store_plans')
          .values(plan)
          .onConflict((oc) =>
            oc.column('shop').doUpdateSet({
              plan: plan.plan,
              status: plan.status,
              checkout_session_id: plan.checkout_session_id,
              activated_at: plan.activated_at,
              updated_at: plan.updated_at,
            }),
          )
          .execute();
        return completed;
      }
      return trx.selectFrom('checkout_sessions').selectAll().where('id', '=', id).executeTakeFirst();
    });
  }
}
