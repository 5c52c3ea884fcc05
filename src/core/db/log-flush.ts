import fs from 'node:fs';
import type SqliteDriver from 'better-sqlite3';

/**
 * SQLite's `synchronous = FULL`, without its stall. In WAL mode FULL differs from NORMAL by one
 * sync of the write-ahead log after each commit, made inside COMMIT: the event loop, and every
 * request on it, waits for the disk each time. Here SQLite runs NORMAL and this flushes the log
 * (fdatasync, in libuv's thread pool) after commits instead: one flush covers every commit made
 * before it started, and commits go on while it runs. A commit's writers are answered once a
 * flush covers it (GroupCommit); anything else answered meanwhile waits for the same (`durable`),
 * since readers see a commit from its COMMIT on. Checkpoints sync as they do under NORMAL.
 */
export class LogFlush {
  /** Commits made on the writer so far, counted at each COMMIT (`committed`). */
  private made = 0;
  /** Commits known to be on disk. */
  private flushed = 0;
  /** The flush under way, and how many commits it covers. */
  private running: Promise<void> | undefined;
  private handle: fs.promises.FileHandle | undefined;

  constructor(private readonly logFile: string) {}

  /** Called at once after each COMMIT on the writer, before anything can read what it made. */
  committed(): void {
    this.made++;
  }

  /** Resolves once every commit made so far is on disk; rejects when the disk said no. */
  async flush(): Promise<void> {
    const target = this.made;
    while (this.flushed < target) {
      if (!this.running) this.running = this.flushUpTo(this.made);
      await this.running;
    }
  }

  /** Undefined when every commit made so far is on disk; else when it will be. Never rejects. */
  durable(): Promise<void> | undefined {
    if (this.flushed >= this.made) return undefined;
    return this.flush().catch(() => undefined);
  }

  async close(): Promise<void> {
    await this.flush().catch(() => undefined);
    await this.handle?.close();
    this.handle = undefined;
  }

  private async flushUpTo(target: number): Promise<void> {
    try {
      await this.syncLog();
      this.flushed = Math.max(this.flushed, target);
    } finally {
      this.running = undefined;
    }
  }

  /**
   * SQLite deletes the log only when the last connection to the database closes, and this
   * process keeps its writer open until `close`: one handle on the file serves throughout.
   */
  private async syncLog(): Promise<void> {
    this.handle ??= await fs.promises.open(this.logFile, 'r');
    await this.handle.datasync();
  }
}

/**
 * Counts each run of a COMMIT statement (Kysely's), the moment it returns: from then on readers
 * see what it made, and answers must wait for its flush (LogFlush.durable).
 */
export function countCommits(statement: SqliteDriver.Statement, commits: Pick<LogFlush, 'committed'>): void {
  const run = statement.run.bind(statement);
  statement.run = ((...params: unknown[]) => {
    const result = run(...params);
    commits.committed();
    return result;
  }) as typeof statement.run;
}
