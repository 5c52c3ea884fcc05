import type { ChangeBus } from '../core/changes/bus.ts';
import { ChangeCache } from '../core/changes/cache.ts';
import type { Database } from '../core/db/database.ts';
import { lockRows } from '../core/db/locking.ts';
import type { KlaviyoConnectionsTable, KlaviyoEventsTable } from '../core/db/schema.ts';

export type KlaviyoConnectionRow = KlaviyoConnectionsTable;
export type KlaviyoEventRow = KlaviyoEventsTable;

/** A store's connection was made, replaced or ended; the key is the store's domain. */
const CONNECTION_CHANGES = 'klaviyo-connection';
/** Stores whose connection state each process keeps at most. */
const CACHED_STORES = 10_000;

/** The Klaviyo feature's tables: stores' connections and the queue of their events. */
export class KlaviyoRepository {
  /** Whether each store is connected, kept in memory between changes: every event a store announces asks it. */
  private readonly connected: ChangeCache<boolean>;

  constructor(
    private readonly database: Database,
    changes: ChangeBus,
  ) {
    this.connected = new ChangeCache(changes, CONNECTION_CHANGES, (storeDomain) => this.readConnected(storeDomain), CACHED_STORES);
  }

  find(storeDomain: string): Promise<KlaviyoConnectionRow | undefined> {
    return this.database.db.selectFrom('klaviyo_connections').selectAll().where('store_domain', '=', storeDomain).executeTakeFirst();
  }

  /** Of these stores, those connected now. */
  async connectedAmong(storeDomains: string[]): Promise<Set<string>> {
    const connected = new Set<string>();
    for (const storeDomain of storeDomains) if (await this.connected.get(storeDomain)) connected.add(storeDomain);
    return connected;
  }

  private async readConnected(storeDomain: string): Promise<boolean> {
    const row = await this.database.db.selectFrom('klaviyo_connections').select('store_domain').where('store_domain', '=', storeDomain).where('status', '=', 'connected').executeTakeFirst();
    return row !== undefined;
  }

  async save(row: KlaviyoConnectionRow): Promise<void> {
    const { store_domain: _, ...changes } = row;
    await this.database.writeStatement((db) => db.insertInto('klaviyo_connections').values(row).onConflict((oc) => oc.column('store_domain').doUpdateSet(changes)).execute());
    await this.connected.changed(row.store_domain);
  }

  /** The key is forgotten and what was still queued is cancelled, in one write. */
  async disconnect(storeDomain: string, reason: string, now: string): Promise<boolean> {
    const ended = await this.database.write(async (trx) => {
      const result = await trx
        .updateTable('klaviyo_connections')
        .set({ status: 'disconnected', key_sealed: null, disconnected_at: now, disconnect_reason: reason, updated_at: now })
        .where('store_domain', '=', storeDomain)
        .where('status', '=', 'connected')
        .executeTakeFirst();
      await trx
        .updateTable('klaviyo_events')
        .set({ status: 'cancelled', next_attempt_at: null, finished_at: now, last_error: reason })
        .where('store_domain', '=', storeDomain)
        .where('status', '=', 'pending')
        .execute();
      return Number(result.numUpdatedRows) > 0;
    });
    await this.connected.changed(storeDomain);
    return ended;
  }

  /** The profile each of the store's alerts went to, as its queued `alert.sent` recorded it. */
  async addressesOfAlerts(storeDomain: string, alertIds: string[]): Promise<Map<string, string>> {
    if (alertIds.length === 0) return new Map();
    const rows = await this.database.db
      .selectFrom('klaviyo_events')
      .select(['alert_id', 'email'])
      .where('store_domain', '=', storeDomain)
      .where('alert_id', 'in', alertIds)
      .where('event_type', '=', 'alert.sent')
      .execute();
    return new Map(rows.flatMap((row) => (row.alert_id !== null && row.email !== null ? [[row.alert_id, row.email] as const] : [])));
  }

  /** Queues the events; one already queued for its store (the same event id) is left as it is. */
  async enqueue(rows: KlaviyoEventRow[]): Promise<void> {
    if (rows.length === 0) return;
    await this.database.writeStatement((db) => db.insertInto('klaviyo_events').values(rows).onConflict((oc) => oc.columns(['store_domain', 'event_id']).doNothing()).execute());
  }

  /** Due events, each moved to the end of a lease so that no other worker takes it meanwhile. */
  claimDue(now: string, leaseUntil: string, limit: number): Promise<KlaviyoEventRow[]> {
    return this.database.write(async (trx) => {
      const due = trx.selectFrom('klaviyo_events').select('id').where('status', '=', 'pending').where('next_attempt_at', '<=', now).orderBy('next_attempt_at').limit(limit);
      const ids = (await lockRows(this.database, due, { skipLocked: true }).execute()).map((row) => row.id);
      if (ids.length === 0) return [];
      return trx
        .updateTable('klaviyo_events')
        .set((eb) => ({ next_attempt_at: leaseUntil, attempts: eb('attempts', '+', 1) }))
        .where('id', 'in', ids)
        .returningAll()
        .execute();
    });
  }

  /** The key of a store's live connection, sealed; undefined once disconnected. */
  async sealedKey(storeDomain: string): Promise<string | undefined> {
    const row = await this.database.db.selectFrom('klaviyo_connections').select('key_sealed').where('store_domain', '=', storeDomain).where('status', '=', 'connected').executeTakeFirst();
    return row?.key_sealed ?? undefined;
  }

  /** What an attempt came to; only while the claim is still this attempt's (its attempts count unchanged, still pending). */
  async settle(claimed: KlaviyoEventRow, next: Pick<KlaviyoEventRow, 'status' | 'next_attempt_at' | 'last_status_code' | 'last_error' | 'finished_at'>): Promise<void> {
    await this.database.writeStatement((db) =>
      db.updateTable('klaviyo_events').set(next).where('id', '=', claimed.id).where('attempts', '=', claimed.attempts).where('status', '=', 'pending').execute(),
    );
  }

  /** The store's newest event queued since `since` that Klaviyo did not take: still being retried, or given up. */
  latestTrouble(storeDomain: string, since: string): Promise<KlaviyoEventRow | undefined> {
    return this.database.db
      .selectFrom('klaviyo_events')
      .selectAll()
      .where('store_domain', '=', storeDomain)
      .where('created_at', '>=', since)
      .where('status', 'in', ['pending', 'failed'])
      .where('last_error', 'is not', null)
      .orderBy('created_at', 'desc')
      .orderBy('id', 'desc')
      .limit(1)
      .executeTakeFirst();
  }

  /** The store's queued events, newest first (for the connection's view and the tests' assertions). */
  recent(storeDomain: string, limit: number): Promise<KlaviyoEventRow[]> {
    return this.database.db.selectFrom('klaviyo_events').selectAll().where('store_domain', '=', storeDomain).orderBy('created_at', 'desc').orderBy('id', 'desc').limit(limit).execute();
  }
}
