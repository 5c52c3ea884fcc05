import { CompiledQuery, type Kysely } from 'kysely';
import { isUnavailableError } from './dialect.ts';
import type { Tables } from './schema.ts';

/** What an `InsertBatch` inserts: a table, its columns in the order callers give values, and its key. */
export interface InsertShape {
  table: string;
  columns: readonly string[];
  /** A column unique per row (the primary key), returned for the rows that went in. */
  key: string;
}

interface Waiting {
  values: unknown[];
  resolve: (inserted: boolean) => void;
  reject: (reason: unknown) => void;
}

/** Rows per statement: enough for any burst of sign-ups, small enough to hold its locks briefly. */
const MAX_ROWS = 500;

/**
 * PostgreSQL's counterpart of the group commit (group-commit.ts), for one hot insert that skips
 * conflicting rows. Alone, each insert is its own transaction: its triggers lock the rows they
 * update (a store's subscription count and waitlist) from the insert until its commit has
 * flushed the log, and every other insert for the same store queues behind that lock, one commit
 * after another. Here the rows given while one group goes in wait and go in together as the
 * next, one `INSERT ... SELECT ... ON CONFLICT DO NOTHING`: one transaction, one log flush, those
 * locks taken once for all of them, in the triggers' own key order (migration 0034), so two
 * groups in two processes cannot wait on each other in a cycle. Each caller's promise settles
 * once the statement has committed: true when its row went in, false when a conflict skipped it. Should the statement fail for its
 * data (or a lock cycle), each row is tried alone, so a row that cannot go in fails its own
 * caller only; a database out of reach fails them all at once.
 */
export class InsertBatch {
  private queue: Waiting[] = [];
  private scheduled = false;
  /**
   * The groups being inserted, one after another; rows given meanwhile wait and go in together
   * as the next group, so the busier the moment, the larger the group.
   */
  private running: Promise<void> | undefined;
  private readonly keyIndex: number;
  /** One text for any number of rows: they travel as one JSON array, read as rows of the table's own type. */
  private readonly statement: string;

  constructor(
    private readonly db: Kysely<Tables>,
    private readonly shape: InsertShape,
  ) {
    this.keyIndex = indexOf(shape, shape.key);
    const table = quoted(shape.table);
    const columns = shape.columns.map(quoted).join(', ');
    this.statement = `insert into ${table} (${columns}) select ${columns} from json_populate_recordset(null::${table}, $1::json) on conflict do nothing returning ${quoted(shape.key)}`;
  }

  /** Inserts one row (`values` in the shape's column order); resolves true when it went in. */
  insert(values: unknown[]): Promise<boolean> {
    return new Promise<boolean>((resolve, reject) => {
      this.queue.push({ values, resolve, reject });
      if (this.running || this.scheduled) return;
      this.scheduled = true;
      setImmediate(() => {
        this.scheduled = false;
        this.startInserting();
      });
    });
  }

  /** Waits until every row given has been committed or failed. */
  async drain(): Promise<void> {
    while (this.running || this.queue.length > 0) {
      this.startInserting();
      await this.running;
    }
  }

  private startInserting(): void {
    if (this.running) return;
    this.running = this.insertQueued().finally(() => {
      this.running = undefined;
      // Rows given after the last group was taken and before this moment.
      if (this.queue.length > 0) this.startInserting();
    });
  }

  private async insertQueued(): Promise<void> {
    while (this.queue.length > 0) await this.insertGroup(this.queue.splice(0, MAX_ROWS));
  }

  /** Never rejects: each caller gets its own outcome. */
  private async insertGroup(group: Waiting[]): Promise<void> {
    let stored: Set<unknown>;
    try {
      stored = await this.insertRows(group.map((row) => row.values));
    } catch (err) {
      // A database that cannot be reached fails every row alike: no need to ask it row by row.
      if (group.length === 1 || isUnavailableError(err)) {
        for (const row of group) row.reject(err);
        return;
      }
      for (const row of group) await this.insertGroup([row]);
      return;
    }
    for (const row of group) row.resolve(stored.has(row.values[this.keyIndex]));
  }

  private async insertRows(rows: unknown[][]): Promise<Set<unknown>> {
    const records = rows.map((values) => Object.fromEntries(this.shape.columns.map((column, i) => [column, values[i]])));
    const result = await this.db.executeQuery<Record<string, unknown>>(CompiledQuery.raw(this.statement, [JSON.stringify(records)]));
    return new Set(result.rows.map((row) => row[this.shape.key]));
  }
}

function indexOf(shape: InsertShape, column: string): number {
  const index = shape.columns.indexOf(column);
  if (index < 0) throw new Error(`${column} is not a column of this insert into ${shape.table}`);
  return index;
}

/** The shape's names are the code's own constants; quoting keeps a reserved word a name. */
function quoted(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}
