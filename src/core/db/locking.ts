import type { SelectQueryBuilder } from 'kysely';
import type { Dialect } from './dialect.ts';

export interface LockOptions {
  /**
   * Rows another transaction holds are passed over instead of waited for: workers sharing a
   * queue each take different rows rather than queueing behind one another.
   */
  skipLocked?: boolean;
}

/**
 * Locks the rows a SELECT reads until its transaction ends, so a read-then-write inside one
 * transaction cannot interleave with another's. PostgreSQL needs `FOR UPDATE` (and `SKIP LOCKED`
 * for queues); SQLite has one writer, and a write transaction already excludes every other, so
 * the query runs there as written.
 */
export function lockRows<DB, TB extends keyof DB, O>(
  database: { readonly dialect: Dialect },
  query: SelectQueryBuilder<DB, TB, O>,
  options: LockOptions = {},
): SelectQueryBuilder<DB, TB, O> {
  if (database.dialect !== 'postgres') return query;
  const locked = query.forUpdate();
  return options.skipLocked ? locked.skipLocked() : locked;
}
