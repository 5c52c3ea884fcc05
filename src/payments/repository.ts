import { sql } from 'kysely';
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

/** Statuses of a payment that may still take the payer's money: being verified, served, or settling. */
const IN_FLIGHT: PaymentStatus[] = ['verifying', 'verified', 'pending'];
/**
 * How many of a payer's payments in flight a claim reads, the newest first. A payer has one at a
 * time; the others can no longer settle (a process stopped mid-request, or a settlement whose
 * authorisation expired) and stay in their status: only `pending` rows are reconciled, and the
 * claim passes over the rest once their authorisation's `validBefore` is behind.
 */
const IN_FLIGHT_READ = 20;

/** Thrown to undo a claim inside its transaction: the payer already has a payment in flight. */
class Held extends Error {
  constructor(readonly by: PaymentRow) {
    super('the payer has a payment in flight');
  }
}

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

  /**
   * As `claim`, for a payer that may have one payment in flight at a time: the row is inserted,
   * then the payer's other payments of the same protocol, method and currency that are
   * `verifying`, `verified` or `pending` are read (the newest `IN_FLIGHT_READ`); if `holds` finds
   * one of them still able to take the payer's money, the insert is undone. The two are one
   * transaction, serialised per payer (SQLite has one writer, taken by the insert; PostgreSQL
   * takes an advisory lock on the payer), so claims in parallel, from any process, see each other.
   */
  async claimAlone(row: PaymentRow & { payer: string }, holds: (inFlight: PaymentRow) => boolean): Promise<{ kind: 'claimed' } | { kind: 'used' } | { kind: 'held'; by: PaymentRow }> {
    try {
      await this.database.write(async (trx) => {
        if (this.database.dialect === 'postgres') {
          await sql`select pg_advisory_xact_lock(hashtext(${`payments-in-flight\n${row.protocol}\n${row.method}\n${row.currency}\n${row.payer}`}))`.execute(trx);
        }
        await trx.insertInto('payments').values(row).execute();
        const inFlight = await trx
          .selectFrom('payments')
          .selectAll()
          .where('status', 'in', IN_FLIGHT)
          .where('payer', '=', row.payer)
          .where('protocol', '=', row.protocol)
          .where('method', '=', row.method)
          .where('currency', '=', row.currency)
          .where('id', '!=', row.id)
          .orderBy('created_at', 'desc')
          .limit(IN_FLIGHT_READ)
          .execute();
        const holding = inFlight.find(holds);
        if (holding) throw new Held(holding);
      });
      return { kind: 'claimed' };
    } catch (err) {
      if (err instanceof Held) return { kind: 'held', by: err.by };
      if (isUniqueViolation(err)) return { kind: 'used' };
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
