import { Kysely, PostgresDialect } from 'kysely';
import type pg from 'pg';
import { pgTypes, postgresDriver, QUERY_READ_TIMEOUT } from './dialect.ts';
import type { DatabaseConfig, Db } from './database.ts';
import type { Tables } from './schema.ts';
import { parsePostgresUrl, postgresConnectionOptions } from '../service-urls.ts';

// node-postgres's pool as Database opens it: its timeouts, its type parsers, and a client that is
// dropped when its server falls silent.

type PostgresConfig = Extract<DatabaseConfig, { dialect: 'postgres' }>;

/**
 * Longest a PostgreSQL statement may run before the server cancels it, unless
 * PG_STATEMENT_TIMEOUT_MS says otherwise; also the bound of a database opened without the
 * settings (the test command's template, say).
 */
export const DEFAULT_PG_STATEMENT_TIMEOUT_MS = 5000;

/**
 * How long a silent connection gets beyond the server's own statement timeout: the server's
 * cancel (a clean error, the connection still usable) comes first while the network works.
 */
const SILENCE_MARGIN_MS = 1000;

/**
 * A transaction whose client vanished mid-way holds its row locks until the server ends the
 * session; this ends it. Far longer than any of our transactions stays idle between statements.
 */
const IDLE_IN_TRANSACTION_MS = 60_000;

/**
 * `bounded`: every statement is limited (see PG_STATEMENT_TIMEOUT_MS), as requests need. Migrations
 * go without: they wait for another process's migration lock and may build an index on a large table.
 */
export function openPostgres(config: PostgresConfig, bounded = true): Db {
  return openPostgresPool(config, bounded).db;
}

export function openPostgresPool(config: PostgresConfig, bounded = true): { db: Db; pool: pg.Pool } {
  const statementTimeoutMs = config.statementTimeoutMs ?? DEFAULT_PG_STATEMENT_TIMEOUT_MS;
  const pool = new (postgresDriver().Pool)({
    ...postgresConnectionOptions(parsePostgresUrl(config.url)),
    max: config.poolMax,
    types: pgTypes,
    Client: droppedWhenSilentClient(),
    // Fail fast when the server is gone, so requests get a 503 instead of hanging.
    connectionTimeoutMillis: 3000,
    idleTimeoutMillis: 30_000,
    // A server host that vanished without a reset is found out by the kernel's probes, even on
    // a connection idle in the pool.
    keepAlive: true,
    keepAliveInitialDelayMillis: 10_000,
    ...(bounded && {
      statement_timeout: statementTimeoutMs,
      query_timeout: statementTimeoutMs + SILENCE_MARGIN_MS,
      idle_in_transaction_session_timeout: Math.max(IDLE_IN_TRANSACTION_MS, 2 * statementTimeoutMs),
    }),
  });
  // A client losing its server emits 'error' (on the pool while idle, on the client while
  // checked out); unhandled, either would end the process. The query in flight is rejected
  // anyway, and the next one gets a fresh connection or a 503.
  pool.on('error', () => {});
  pool.on('connect', (client) => client.on('error', () => {}));
  return { db: new Kysely<Tables>({ dialect: new PostgresDialect({ pool }) }), pool };
}

/**
 * node-postgres answers a query that outlived `query_timeout` with an error but keeps the
 * connection, and the answer it still owes: back in the pool, it would make every later query
 * wait behind a reply that may never come, and once the network returned, a statement the caller
 * was told had failed could still run. Such a connection is ended instead, so the pool drops it
 * and opens a fresh one.
 */
function droppedWhenSilentClient(): typeof pg.Client {
  return (droppedWhenSilent ??= class DroppedWhenSilent extends postgresDriver().Client {
    override query(...args: unknown[]): any {
      const result: unknown = Reflect.apply(super.query, this, args);
      if (result instanceof Promise) {
        result.catch((err: unknown) => {
          if (err instanceof Error && err.message === QUERY_READ_TIMEOUT) void this.end();
        });
      }
      return result;
    }
  });
}

/** Made with the first pool: it extends node-postgres's client, which loads only then. */
let droppedWhenSilent: typeof pg.Client | undefined;
