import { sql } from 'kysely';
import type { Database } from '../core/db/database.ts';

export interface QueueReading {
  /** Queued alerts, due now or later (held by the plan included). */
  queued: number;
  /** Alerts a worker holds the lease of. */
  sending: number;
  /** Queued alerts whose time has come. */
  due: number;
  /** When the oldest due alert was due; null when none is. */
  oldestDueAt: string | null;
}

/**
 * The send queue's size, read when metrics are scraped. A read-only companion of the dispatch
 * repository over its own table: each query walks notifications_queue (status, next_attempt_at)
 * in the range it names, so its cost grows with the queue, never with the ledger.
 */
export class QueueReadings {
  constructor(private readonly database: Database) {}

  async read(now: Date): Promise<QueueReading> {
    const { db } = this.database;
    const byStatus = await db
      .selectFrom('notifications')
      .select(['status', (eb) => eb.fn.countAll<number>().as('n')])
      .where('status', 'in', [sql.lit('queued'), sql.lit('sending')])
      .groupBy('status')
      .execute();
    const due = await db
      .selectFrom('notifications')
      .select([(eb) => eb.fn.countAll<number>().as('n'), (eb) => eb.fn.min('next_attempt_at').as('oldest')])
      .where('status', '=', sql.lit('queued'))
      .where('next_attempt_at', '<=', now.toISOString())
      .executeTakeFirstOrThrow();
    const count = (status: string) => Number(byStatus.find((row) => row.status === status)?.n ?? 0);
    return { queued: count('queued'), sending: count('sending'), due: Number(due.n), oldestDueAt: (due.oldest as string | null) ?? null };
  }
}
