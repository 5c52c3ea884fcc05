import type { Kysely, Transaction } from 'kysely';
import type { Tables } from './schema.ts';

interface Unit {
  work: (trx: Transaction<Tables>) => Promise<unknown>;
  resolve: (value: unknown) => void;
  reject: (reason: unknown) => void;
}

/**
 * Group commit for SQLite. A durable commit costs one fsync (hundreds of microseconds to
 * milliseconds), far more than the insert itself, so the writes that arrive during one turn of
 * the event loop share one transaction and one fsync. Each unit runs inside its own savepoint: a
 * unit that fails is rolled back alone and its caller gets the error, while the others commit.
 * Every caller's promise settles only once its commit is on disk: after COMMIT under SQLite's
 * FULL, or after `sync` (LogFlush), which lets the next group commit while the disk works.
 */
export class GroupCommit {
  private queue: Unit[] = [];
  private scheduled = false;
  /** The last commit started; each one waits for the one before (one SQLite connection). */
  private tail: Promise<void> = Promise.resolve();

  /**
   * @param exec runs a statement straight on the SQLite connection the transaction holds. The
   *   savepoint around each write goes through it rather than through Kysely: three statements
   *   per write would otherwise cost more than the write itself.
   */
  constructor(
    private readonly db: Kysely<Tables>,
    private readonly exec: (statement: string) => void,
    /** Resolves once every commit so far is on disk; absent when COMMIT itself waits for the disk (or durability was waived). */
    private readonly sync?: () => Promise<void>,
  ) {}

  /** Writes queued for the next commit. */
  get waiting(): number {
    return this.queue.length;
  }

  run<T>(work: (trx: Transaction<Tables>) => Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.queue.push({ work, resolve: resolve as (value: unknown) => void, reject });
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => void this.flush());
      }
    });
  }

  /** Waits until every queued write has been committed or failed. */
  async drain(): Promise<void> {
    while (this.queue.length > 0) await this.flush();
    await this.tail;
  }

  private flush(): Promise<void> {
    this.scheduled = false;
    const batch = this.queue;
    this.queue = [];
    if (batch.length > 0) this.tail = this.tail.then(() => this.commit(batch));
    return this.tail;
  }

  /** Never rejects: each unit's caller gets its own outcome. */
  private async commit(batch: Unit[]): Promise<void> {
    const outcomes: Array<() => void> = [];
    try {
      await this.db.transaction().execute(async (trx) => {
        for (const unit of batch) outcomes.push(await this.runInSavepoint(trx, unit));
      });
    } catch (err) {
      for (const unit of batch) unit.reject(err);
      return;
    }
    if (!this.sync) {
      for (const settle of outcomes) settle();
      return;
    }
    // Not awaited: the next group commits while this one's flush runs.
    this.sync().then(
      () => {
        for (const settle of outcomes) settle();
      },
      (err: unknown) => {
        for (const unit of batch) unit.reject(err);
      },
    );
  }

  private async runInSavepoint(trx: Transaction<Tables>, unit: Unit): Promise<() => void> {
    this.exec('savepoint unit');
    try {
      const value = await unit.work(trx);
      this.exec('release savepoint unit');
      return () => unit.resolve(value);
    } catch (err) {
      this.exec('rollback to savepoint unit');
      this.exec('release savepoint unit');
      return () => unit.reject(err);
    }
  }
}
