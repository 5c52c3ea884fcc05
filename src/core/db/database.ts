import fs from 'node:fs';
import path from 'node:path';
import SqliteDriver from 'better-sqlite3';
import { CompiledQuery, Kysely, SqliteDialect, sql, type Compilable, type Transaction } from 'kysely';
import type pg from 'pg';
import { isTransientConflict, postgresDriver, type Dialect } from './dialect.ts';
import { parsePostgresUrl, postgresConnectionOptions } from '../service-urls.ts';
import { openPostgres, openPostgresPool } from './postgres-pool.ts';
import { GroupCommit } from './group-commit.ts';
import { InsertBatch, type InsertShape } from './insert-batch.ts';
import { countCommits, LogFlush } from './log-flush.ts';
import { migrateToLatest } from './migrate.ts';
import type { Tables } from './schema.ts';

export type Db = Kysely<Tables>;

/** How many times `writeRetrying` runs a transaction PostgreSQL aborted for a lock cycle. */
const WRITE_ATTEMPTS = 3;
export type Trx = Transaction<Tables>;

/** How to open the database: an SQLite file, or a PostgreSQL server (`DATABASE_URL`). */
export type DatabaseConfig =
  | { dialect: 'sqlite'; file: string; synchronous: 'FULL' | 'NORMAL'; busyTimeoutMs: number }
  | { dialect: 'postgres'; url: string; poolMax: number; statementTimeoutMs?: number };

/**
 * The service's one handle on storage. Stores read through `db` and write through `write`, which
 * on SQLite groups the writes of concurrent requests into one durable commit.
 */
export class Database {
  readonly db: Db;
  readonly dialect: Dialect;
  private readonly groupCommit: GroupCommit | undefined;
  /** SQLite: a read-only connection for hot point reads, outside the group commit's transaction. */
  private readonly reader: SqliteDriver.Database | undefined;
  /** PostgreSQL: where migrations open their own, unbounded connections. */
  private postgres: Extract<DatabaseConfig, { dialect: 'postgres' }> | undefined;
  /** PostgreSQL: the pool `db` draws from, for its use figures. */
  private pool: pg.Pool | undefined;

  /** SQLite: the connection every write of this process goes through. */
  private writer: SqliteDriver.Database | undefined;
  /** SQLite under FULL: what makes commits durable. */
  private logFlush: LogFlush | undefined;
  /** PostgreSQL: the hot inserts whose rows go in by the group, drained on close. */
  private readonly insertBatches: InsertBatch[] = [];

  private constructor(db: Db, dialect: Dialect, groupCommit?: GroupCommit, reader?: SqliteDriver.Database) {
    this.db = db;
    this.dialect = dialect;
    this.groupCommit = groupCommit;
    this.reader = reader;
  }

  /**
   * SQLite: a number that moves whenever another process (another connection than this
   * process's writer) commits to the file, read synchronously for a microsecond or so
   * (`PRAGMA data_version` on the writer). Undefined on PostgreSQL.
   */
  otherWritersVersion(): (() => number) | undefined {
    const writer = this.writer;
    if (!writer) return undefined;
    const statement = writer.prepare('pragma data_version').pluck();
    return () => statement.get() as number;
  }

  static open(config: DatabaseConfig): Database {
    if (config.dialect === 'postgres') {
      const { db, pool } = openPostgresPool(config);
      const database = new Database(db, 'postgres');
      database.postgres = config;
      database.pool = pool;
      return database;
    }
    // FULL is kept by flushing the log after commits, off the event loop (log-flush.ts).
    const logFlush = config.synchronous === 'FULL' && config.file !== ':memory:' ? new LogFlush(`${config.file}-wal`) : undefined;
    const driver = openSqliteDriver({ ...config, synchronous: logFlush ? 'NORMAL' : config.synchronous }, logFlush);
    const db = new Kysely<Tables>({ dialect: new SqliteDialect({ database: driver }) });
    const reader = config.file === ':memory:' ? undefined : new SqliteDriver(config.file, { readonly: true, timeout: config.busyTimeoutMs });
    const database = new Database(db, 'sqlite', new GroupCommit(db, (statement) => driver.exec(statement), logFlush && (() => logFlush.flush())), reader);
    database.logFlush = logFlush;
    database.writer = driver;
    return database;
  }

  /**
   * A query run on every request, built and compiled once; the returned function runs it with
   * new arguments. `build` receives one placeholder per argument to put where the value goes.
   * On SQLite it runs as a prepared statement on a read-only connection of its own, so it
   * neither waits behind nor joins the group commit's open transaction; it sees what is
   * committed, which is what a check such as "is this token revoked" must see.
   */
  preparedRead<Row>(arity: number, build: (db: Db, ...args: string[]) => Compilable<Row>): (...args: unknown[]) => Promise<Row | undefined> {
    const all = this.prepared(arity, build, 'get');
    return async (...args) => (await all(...args))[0];
  }

  /** As `preparedRead`, for every row the query returns. */
  preparedReadAll<Row>(arity: number, build: (db: Db, ...args: string[]) => Compilable<Row>): (...args: unknown[]) => Promise<Row[]> {
    return this.prepared(arity, build, 'all');
  }

  /**
   * A write run on every request, built and compiled once: the returned function runs it with
   * new arguments on the connection or transaction given (inside `writeStatement` or `write`).
   * Building and compiling a query costs more than SQLite takes to insert the row.
   */
  preparedWrite(arity: number, build: (db: Db, ...args: string[]) => Compilable<unknown>): (db: Db | Trx, ...args: unknown[]) => Promise<{ numAffectedRows?: bigint }> {
    const { sql: text, bind } = this.compileWithPlaceholders(arity, build);
    return (db, ...args) => db.executeQuery(CompiledQuery.raw(text, bind(args)));
  }

  private compileWithPlaceholders(arity: number, build: (db: Db, ...args: string[]) => Compilable<unknown>): { sql: string; bind: (args: unknown[]) => unknown[] } {
    const placeholders = Array.from({ length: arity }, (_, i) => `\u0000arg${i}`);
    const compiled = build(this.db, ...placeholders).compile();
    // Each compiled parameter is either an argument's placeholder or a constant of the query.
    const slots = compiled.parameters.map((value) => ({ arg: placeholders.indexOf(value as string), value }));
    return { sql: compiled.sql, bind: (args) => slots.map((slot) => (slot.arg >= 0 ? args[slot.arg] : slot.value)) };
  }

  private prepared<Row>(arity: number, build: (db: Db, ...args: string[]) => Compilable<Row>, rows: 'get' | 'all'): (...args: unknown[]) => Promise<Row[]> {
    const compiled = this.compileWithPlaceholders(arity, build);
    const bind = compiled.bind;
    if (this.reader) {
      const statement = this.reader.prepare(compiled.sql);
      return (...args) => {
        try {
          if (rows === 'all') return Promise.resolve(statement.all(...bind(args)) as Row[]);
          const row = statement.get(...bind(args)) as Row | undefined;
          return Promise.resolve(row === undefined ? [] : [row]);
        } catch (err) {
          return Promise.reject(err);
        }
      };
    }
    return async (...args) => (await this.db.executeQuery<Row>(CompiledQuery.raw(compiled.sql, bind(args)))).rows;
  }

  /**
   * An insert run on every request that skips a row conflicting with a unique index: the returned
   * function stores one row (values in `shape.columns`' order) and resolves, once committed, true
   * when the row went in and false when a conflict skipped it. On SQLite each row joins the group
   * commit; on PostgreSQL the rows given while one group goes in share the next one's statement
   * and commit (InsertBatch), which is what lets concurrent sign-ups of one store past each other.
   */
  insertSkippingConflicts(shape: InsertShape): (values: unknown[]) => Promise<boolean> {
    if (this.dialect === 'postgres') {
      const batch = new InsertBatch(this.db, shape);
      this.insertBatches.push(batch);
      return (values) => batch.insert(values);
    }
    const insert = this.preparedWrite(shape.columns.length, (db, ...args) =>
      db
        .insertInto(shape.table as keyof Tables)
        .values(Object.fromEntries(shape.columns.map((column, i) => [column, args[i]])) as never)
        .onConflict((oc) => oc.doNothing()),
    );
    return async (values) => Number((await this.writeStatement((db) => insert(db, ...values))).numAffectedRows ?? 0n) === 1;
  }

  /**
   * Runs `work` in a transaction and resolves once it is committed. The promise settles only
   * after the commit, so an answer given after it describes stored data.
   */
  write<T>(work: (trx: Trx) => Promise<T>): Promise<T> {
    if (this.groupCommit) return this.groupCommit.run(work);
    return this.db.transaction().execute(work);
  }

  /**
   * `write`, run again when PostgreSQL aborted it for a deadlock or a serialization failure (at
   * most three attempts). Transactions that record outcomes move kept counts, rows other
   * transactions move too, and PostgreSQL breaks a lock cycle by aborting one of them: recording
   * an alert sent must not fail for that, or it would be sent again. `work` must touch nothing
   * but the database: it runs once per attempt.
   */
  async writeRetrying<T>(work: (trx: Trx) => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.write(work);
      } catch (err) {
        if (attempt >= WRITE_ATTEMPTS || !isTransientConflict(err)) throw err;
      }
    }
  }

  /**
   * One statement, atomic by itself, resolving once committed. On PostgreSQL it runs without
   * BEGIN/COMMIT (one round trip instead of three); on SQLite it joins the group commit.
   */
  writeStatement<T>(statement: (db: Db) => Promise<T>): Promise<T> {
    if (this.groupCommit) return this.groupCommit.run(statement);
    return statement(this.db);
  }

  /**
   * Resolves once everything readers can see is on disk; undefined when it already is. An answer
   * (any answer: it may describe what it read) waits for it before it leaves (src/app.ts).
   */
  durable(): Promise<void> | undefined {
    return this.logFlush?.durable();
  }

  /**
   * Connections in use, for metrics. PostgreSQL: the pool's open, idle and waiting counts and its
   * size. SQLite keeps its connections open (the writer, and the reader of prepared reads):
   * `waiting` is then the writes queued for the next group commit.
   */
  poolUse(): { total: number; idle: number | undefined; waiting: number; max: number } {
    if (this.pool) return { total: this.pool.totalCount, idle: this.pool.idleCount, waiting: this.pool.waitingCount, max: this.postgres!.poolMax };
    const open = this.reader ? 2 : 1;
    return { total: open, idle: undefined, waiting: this.groupCommit?.waiting ?? 0, max: open };
  }

  async migrate(): Promise<string[]> {
    if (!this.postgres) return migrateToLatest(this.db, this.dialect);
    const db = openPostgres({ ...this.postgres, poolMax: 2 }, false);
    try {
      return await migrateToLatest(db, this.dialect);
    } finally {
      await db.destroy();
    }
  }

  /**
   * Proves the database can take a write right now: a no-op UPDATE still needs the write lock
   * (SQLite) or a working connection and transaction (PostgreSQL), so a locked, full or
   * unreachable database fails here rather than on the next customer's request.
   */
  async ping(): Promise<void> {
    await this.write((trx) => sql`update service_secrets set name = name where name = ''`.execute(trx));
  }

  /**
   * PostgreSQL: a connection of its own, outside the pool, for LISTEN (a listening session must
   * stay open and idle); undefined on SQLite.
   */
  listenerConnection(applicationName: string): pg.Client | undefined {
    if (!this.postgres) return undefined;
    return new (postgresDriver().Client)({ ...postgresConnectionOptions(parsePostgresUrl(this.postgres.url)), application_name: applicationName, keepAlive: true, connectionTimeoutMillis: 3000 });
  }

  async close(): Promise<void> {
    await this.groupCommit?.drain();
    for (const batch of this.insertBatches) await batch.drain();
    await this.logFlush?.close();
    await this.db.destroy();
    this.reader?.close();
  }
}

/**
 * Pages of log (4 KiB each) after which a COMMIT copies the log into the database file and syncs
 * it, on the event loop; SQLite's default is 1,000. Sign-ups dirty the same few pages over and
 * over, and a copy writes each page once: ten times fewer copies took a tenth off the CPU of a
 * subscribe and more off its time, for a log of up to 40 MB (docs/architecture.md).
 */
const WAL_CHECKPOINT_PAGES = 10_000;

function openSqliteDriver(config: Extract<DatabaseConfig, { dialect: 'sqlite' }>, commits?: Pick<LogFlush, 'committed'>): SqliteDriver.Database {
  if (config.file !== ':memory:') fs.mkdirSync(path.dirname(config.file), { recursive: true });
  const driver = new SqliteDriver(config.file, { timeout: config.busyTimeoutMs });
  driver.pragma('journal_mode = WAL');
  driver.pragma(`synchronous = ${config.synchronous}`);
  driver.pragma(`wal_autocheckpoint = ${WAL_CHECKPOINT_PAGES}`);
  driver.pragma('foreign_keys = ON');
  cachePreparedStatements(driver, commits);
  return driver;
}

/**
 * Kysely prepares every query anew; preparing costs more than running a simple insert. Our SQL
 * is parameterised, so the set of texts is small and each statement is prepared once.
 * better-sqlite3 runs a statement to completion synchronously, so sharing one is safe.
 */
function cachePreparedStatements(driver: SqliteDriver.Database, commits?: Pick<LogFlush, 'committed'>, limit = 500): void {
  const prepare = driver.prepare.bind(driver);
  const cache = new Map<string, SqliteDriver.Statement>();
  driver.prepare = ((source: string) => {
    let statement = cache.get(source);
    if (!statement) {
      if (cache.size >= limit) cache.clear();
      statement = prepare(source);
      if (commits && source.trim().toLowerCase() === 'commit') countCommits(statement, commits);
      cache.set(source, statement);
    }
    return statement;
  }) as typeof driver.prepare;
}
