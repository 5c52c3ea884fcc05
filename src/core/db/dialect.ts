import { sql, type RawBuilder } from 'kysely';
import type pg from 'pg';
import { lazyPackage } from '../lazy-package.ts';

/** node-postgres, loaded by the first PostgreSQL connection: an embedded process never needs it. */
export const postgresDriver = lazyPackage<typeof pg>('pg');

/**
 * The few places where SQLite and PostgreSQL differ, kept together so that stores and
 * migrations stay dialect-free.
 */
export type Dialect = 'sqlite' | 'postgres';

/** Column type for timestamps: ISO strings on SQLite, timestamptz on PostgreSQL. */
export function timestampType(dialect: Dialect): 'text' | 'timestamptz' {
  return dialect === 'sqlite' ? 'text' : 'timestamptz';
}

/** The UTC calendar day (`YYYY-MM-DD`) of a timestamp column, for grouping by day in SQL. */
export function utcDay(dialect: Dialect, column: string): RawBuilder<string> {
  return dialect === 'sqlite'
    ? sql<string>`substr(${sql.ref(column)}, 1, 10)`
    : sql<string>`to_char(${sql.ref(column)} at time zone 'UTC', 'YYYY-MM-DD')`;
}

const PG_TIMESTAMPTZ = 1184;
const PG_TIMESTAMP = 1114;
const PG_INT8 = 20;

/**
 * Type parsers for node-postgres so rows read the same as on SQLite: timestamps as ISO-8601
 * strings, 64-bit counts as numbers (they stay far below 2^53 here).
 */
export const pgTypes = {
  getTypeParser(oid: number, format?: string): (value: string) => unknown {
    if (oid === PG_TIMESTAMPTZ) return (value) => new Date(value).toISOString();
    if (oid === PG_TIMESTAMP) return (value) => new Date(`${value}Z`).toISOString();
    if (oid === PG_INT8) return (value) => Number(value);
    return postgresDriver().types.getTypeParser(oid, format as 'text');
  },
} as pg.CustomTypesConfig;

const UNAVAILABLE_CODES = new Set([
  'EIO', 'ENOSPC', 'EDQUOT', // the disk under SQLite's log
  'ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EHOSTUNREACH', 'EAI_AGAIN',
  '57P01', '57P02', '57P03', // admin shutdown, crash shutdown, cannot connect now
  '08000', '08001', '08003', '08004', '08006', // connection exceptions
  '53300', // too many connections
  '3D000', // database does not exist (dropped or not yet created)
  '55000', // object not in prerequisite state (e.g. database not accepting connections)
  '57014', // statement cancelled: it outran PG_STATEMENT_TIMEOUT_MS
]);

/** node-postgres's error when a query outran `query_timeout`: the server did not answer at all. */
export const QUERY_READ_TIMEOUT = 'Query read timeout';

/**
 * True when an error means "the database cannot be reached or used right now" rather than a
 * bug: the answer is then 503, and the caller may retry.
 */
export function isUnavailableError(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  const code = (err as { code?: unknown }).code;
  if (typeof code === 'string') {
    if (UNAVAILABLE_CODES.has(code)) return true;
    if (/^SQLITE_(BUSY|LOCKED|IOERR|CANTOPEN|FULL|READONLY|NOTADB|CORRUPT)/.test(code)) return true;
  }
  if (err.message === QUERY_READ_TIMEOUT) return true;
  // "Client was closed": a statement queued behind one that timed out, on the connection then ended.
  return /Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error|Client was closed and is not queryable|database connection is not open|driver has already been destroyed/i
    .test(err.message);
}

/** True when PostgreSQL aborted a transaction that may simply be run again: a deadlock, or a serialization failure. */
export function isTransientConflict(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === '40P01' || code === '40001';
}

/** True when an insert lost a race against a unique constraint (both dialects). */
export function isUniqueViolation(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === '23505' || code === 'SQLITE_CONSTRAINT_UNIQUE' || code === 'SQLITE_CONSTRAINT_PRIMARYKEY';
}
