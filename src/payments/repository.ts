import type { Database } from '../core/db/database.ts';
import { isUniqueViolation } from '../core/db/dialect.ts';
import type { PaymentsTable } from '../core/db/schema.ts';

export type PaymentRow = PaymentsTable;
export type PaymentStatus =
  /** claimed, being verified */
  | 'verifying'
  /** verified (for MPP stripe: charged); the handler is running */
  | 'verified'
  | 'settled'
  /** the settlement's outcome is unknown (a timeout); reconciliation decides */
  | 'pending'
  /** refused at verification or settlement: nothing was charged */
  | 'failed'
  /** the handler failed: x402 was never settled */
  | 'cancelled'
  /** the handler failed after an MPP charge: the money went back */
  | 'refunded';

/** The payment ledger; the only code that touches the payments table. */
export class PaymentRepository {
  constructor(private readonly database: Database) {}

  /**
   * Records an attempt and claims its proof in one insert: the unique `proof_key` makes one
   * proof pay for one request, across requests and processes. False when it was already claimed.
   */
  async claim(row: PaymentRow): Promise<boolean> {
    try {
      await this.database.writeStatement((db) => db.insertInto('payments').values(row).execute());
      return true;
    } catch (err) {
      if (isUniqueViolation(err)) return false;
      throw err;
    }
  }

  async update(id: string, changes: Partial<Pick<PaymentRow, 'status' | 'error' | 'reference' | 'payer' | 'result_ref' | 'proof' | 'attempts'>>, now: string): Promise<void> {
    await this.database.writeStatement((db) => db.updateTable('payments').set({ ...changes, updated_at: now }).where('id', '=', id).execute());
  }

  /**
   * Keeps the attempt in the ledger but frees its proof for another try: the proof paid for
   * nothing (the network was unreachable, or the handler failed before an x402 settlement).
   */
  async release(id: string, changes: Pick<PaymentRow, 'status' | 'error'>, now: string): Promise<void> {
    await this.database.writeStatement((db) =>
      db
        .updateTable('payments')
        .set((eb) => ({ ...changes, proof_key: eb('proof_key', '||', `#released:${id}`), updated_at: now }))
        .where('id', '=', id)
        .execute(),
    );
  }

  find(id: string): Promise<PaymentRow | undefined> {
    return this.database.db.selectFrom('payments').selectAll().where('id', '=', id).executeTakeFirst();
  }

  listForStore(storeDomain: string, limit: number): Promise<PaymentRow[]> {
    return this.database.db
      .selectFrom('payments')
      .selectAll()
      .where('store_domain', '=', storeDomain)
      .orderBy('created_at', 'desc')
      .orderBy('id', 'desc')
      .limit(limit)
      .execute();
  }

  /** The settled payments that bought `resultRef` through `operation`. */
  settledFor(operation: string, resultRef: string): Promise<PaymentRow[]> {
    return this.database.db
      .selectFrom('payments')
      .selectAll()
      .where('operation', '=', operation)
      .where('result_ref', '=', resultRef)
      .where('status', '=', 'settled')
      .execute();
  }

  /** Settlements whose outcome is unknown and that nobody has looked at since `before`. */
  pending(before: string, limit: number): Promise<PaymentRow[]> {
    return this.database.db
      .selectFrom('payments')
      .selectAll()
      .where('status', '=', 'pending')
      .where('updated_at', '<=', before)
      .orderBy('updated_at')
      .limit(limit)
      .execute();
  }
}
