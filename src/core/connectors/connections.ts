import type { Database } from '../db/database.ts';
import type { StoreConnectionsTable } from '../db/schema.ts';

export type ConnectionRow = StoreConnectionsTable;

/**
 * Storage of one platform's store connections: the only code that touches `store_connections`.
 * Each connector holds one for its own platform and never sees another platform's rows.
 */
export class ConnectionRepository {
  constructor(
    private readonly database: Database,
    readonly platform: string,
  ) {}

  find(storeDomain: string): Promise<ConnectionRow | undefined> {
    return this.database.db
      .selectFrom('store_connections')
      .selectAll()
      .where('store_domain', '=', storeDomain)
      .where('platform', '=', this.platform)
      .executeTakeFirst();
  }

  /** A new connection, or the store's connection made anew (new credentials, secret and webhooks). */
  async save(row: Omit<ConnectionRow, 'platform'>): Promise<ConnectionRow> {
    const full: ConnectionRow = { ...row, platform: this.platform };
    const { store_domain: _, ...changes } = full;
    await this.database.writeStatement((db) =>
      db.insertInto('store_connections').values(full).onConflict((oc) => oc.column('store_domain').doUpdateSet(changes)).execute(),
    );
    return full;
  }

  /** Ends a connection that is still on: its credentials are forgotten, its secret kept to recognise late deliveries. */
  async disconnect(storeDomain: string, reason: string, now: string): Promise<boolean> {
    const result = await this.database.writeStatement((db) =>
      db
        .updateTable('store_connections')
        .set({ status: 'disconnected', credentials_sealed: null, disconnected_at: now, disconnect_reason: reason, updated_at: now })
        .where('store_domain', '=', storeDomain)
        .where('platform', '=', this.platform)
        .where('status', '=', 'connected')
        .executeTakeFirst(),
    );
    return Number(result.numUpdatedRows) > 0;
  }

  /**
   * Uses up a one-time authorization the service issued for this platform (its random `id`, good
   * until `expiresAt`): true the first time, false ever after, whichever process asks. Kept beside
   * the identity assertions seen once, and swept with them when expired.
   */
  async spendAuthorization(id: string, expiresAt: string): Promise<boolean> {
    const result = await this.database.writeStatement((db) =>
      db
        .insertInto('used_assertions')
        .values({ issuer: `restock:${this.platform}-authorization`, jti: id, expires_at: expiresAt })
        .onConflict((oc) => oc.columns(['issuer', 'jti']).doNothing())
        .executeTakeFirst(),
    );
    return Number(result.numInsertedOrUpdatedRows ?? 0n) === 1;
  }

  /** Connected stores not reconciled since `before`, least recently reconciled first. */
  due(before: string, limit: number): Promise<ConnectionRow[]> {
    return this.database.db
      .selectFrom('store_connections')
      .selectAll()
      .where('platform', '=', this.platform)
      .where('status', '=', 'connected')
      .where((eb) => eb.or([eb('reconciled_at', 'is', null), eb('reconciled_at', '<', before)]))
      .orderBy('reconciled_at', (ob) => ob.asc().nullsFirst())
      .orderBy('store_domain')
      .limit(limit)
      .execute();
  }

  async markReconciled(storeDomain: string, now: string): Promise<void> {
    await this.database.writeStatement((db) =>
      db.updateTable('store_connections').set({ reconciled_at: now }).where('store_domain', '=', storeDomain).where('platform', '=', this.platform).execute(),
    );
  }
}

/** The webhook ids a connection recorded. */
export function webhookIdsOf(row: Pick<ConnectionRow, 'webhook_ids'>): number[] {
  const ids: unknown = JSON.parse(row.webhook_ids);
  return Array.isArray(ids) ? ids.filter((id): id is number => Number.isInteger(id)) : [];
}
