import { sql } from 'kysely';
import type pg from 'pg';
import type { Database } from '../db/database.ts';
import type { ChangeTransport } from './bus.ts';

/** The notification channel; NOTIFY is scoped to the database, so no two deployments share it. */
export const PG_CHANNEL = 'restock_changes';
/** What the listening session is called in `pg_stat_activity`. */
export const PG_LISTENER_NAME = 'restock-changes';
/** How long a lost listener waits before connecting again. */
const RECONNECT_MS = 500;

/**
 * PostgreSQL LISTEN/NOTIFY, for PostgreSQL deployments without Redis: one session of its own
 * listens (outside the pool, which would hand it to a request), and changes are sent through the
 * pool with pg_notify. A lost session is replaced after RECONNECT_MS, for as long as it takes.
 */
export class PostgresChangeTransport implements ChangeTransport {
  /** PostgreSQL's limit is 8,000 bytes per payload. */
  readonly maxMessageBytes = 7000;
  private client: pg.Client | undefined;
  private retry: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(private readonly database: Database) {}

  start(events: { message(text: string): void; up(): void; down(err?: unknown): void }): void {
    const connect = async () => {
      this.retry = undefined;
      if (this.closed) return;
      const client = this.database.listenerConnection(PG_LISTENER_NAME)!;
      this.client = client;
      let lost = false;
      const lose = (err?: unknown) => {
        if (lost) return;
        lost = true;
        events.down(err);
        client.end().catch(() => {});
        if (!this.closed) this.retry = setTimeout(connect, RECONNECT_MS).unref();
      };
      client.on('error', lose);
      client.on('end', () => lose());
      client.on('notification', (note) => {
        if (note.channel === PG_CHANNEL && note.payload !== undefined) events.message(note.payload);
      });
      try {
        await client.connect();
        await client.query(`listen ${PG_CHANNEL}`);
        if (!lost && !this.closed) events.up();
      } catch (err) {
        lose(err);
      }
    };
    void connect();
  }

  async send(text: string): Promise<void> {
    await sql`select pg_notify(${PG_CHANNEL}, ${text})`.execute(this.database.db);
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.retry);
    await this.client?.end().catch(() => {});
  }
}
