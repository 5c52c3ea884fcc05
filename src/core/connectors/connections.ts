import type { Database } from '../db/database.ts';
import { lockRows } from '../db/locking.ts';
import type { StoreConnectionsTable } from '../db/schema.ts';

export type ConnectionRow = StoreConnectionsTable;

/** What credentials that expire and are refreshed keep beside them; null on a platform whose credentials do not. */
export type RefreshableCredentials = Pick<
  ConnectionRow,
  'credentials_expire_at' | 'refresh_credentials_sealed' | 'refresh_credentials_expire_at' | 'refresh_lease_until' | 'reauthorization_required_at' | 'scopes'
>;

/** A connection as a platform records it: the refreshable parts only where its credentials have them. */
export type NewConnectionRow = Omit<ConnectionRow, 'platform' | keyof RefreshableCredentials> & Partial<RefreshableCredentials>;

/**
 * What became of an attempt to take the lease to refresh a connection's credentials: taken; the
 * credentials were already replaced (by another process's refresh or a new connection); another
 * process holds the lease; or there is nothing to refresh (disconnected, or waiting for the owner).
 */
export type RefreshClaim = 'claimed' | 'replaced' | 'busy' | 'unavailable';

const NOT_REFRESHABLE: RefreshableCredentials = {
  credentials_expire_at: null,
  refresh_credentials_sealed: null,
  refresh_credentials_expire_at: null,
  refresh_lease_until: null,
  reauthorization_required_at: null,
  scopes: null,
};

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

  /**
   * A new connection, or the store's connection made anew (new credentials, secret and webhooks):
   * any wait for the owner and any refresh under way with the former credentials end.
   */
  async save(row: NewConnectionRow): Promise<ConnectionRow> {
    const full: ConnectionRow = { ...NOT_REFRESHABLE, ...row, platform: this.platform };
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
        .set({
          status: 'disconnected',
          credentials_sealed: null,
          credentials_expire_at: null,
          refresh_credentials_sealed: null,
          refresh_credentials_expire_at: null,
          refresh_lease_until: null,
          disconnected_at: now,
          disconnect_reason: reason,
          updated_at: now,
        })
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

  /** Connected stores not reconciled since `before`, least recently reconciled first; not those waiting for their owner. */
  due(before: string, limit: number): Promise<ConnectionRow[]> {
    return this.database.db
      .selectFrom('store_connections')
      .selectAll()
      .where('platform', '=', this.platform)
      .where('status', '=', 'connected')
      .where('reauthorization_required_at', 'is', null)
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

  /** Whether the store's connection is on with credentials the platform has not refused. */
  async usable(storeDomain: string): Promise<boolean> {
    const row = await this.database.db
      .selectFrom('store_connections')
      .select(['status', 'credentials_sealed', 'reauthorization_required_at'])
      .where('store_domain', '=', storeDomain)
      .where('platform', '=', this.platform)
      .executeTakeFirst();
    return row?.status === 'connected' && row.credentials_sealed !== null && row.reauthorization_required_at === null;
  }

  /**
   * Takes the lease under which one process refreshes the store's credentials, if they are still
   * `sealedCredentials` and nobody else holds an unexpired lease. The row is locked while this is
   * decided, so two processes cannot both take it.
   */
  claimRefresh(storeDomain: string, sealedCredentials: string, now: string, leaseUntil: string): Promise<RefreshClaim> {
    return this.database.write(async (trx) => {
      const row = await lockRows(
        this.database,
        trx
          .selectFrom('store_connections')
          .select(['status', 'credentials_sealed', 'refresh_lease_until', 'reauthorization_required_at'])
          .where('store_domain', '=', storeDomain)
          .where('platform', '=', this.platform),
      ).executeTakeFirst();
      if (row?.status !== 'connected' || row.credentials_sealed === null || row.reauthorization_required_at !== null) return 'unavailable';
      if (row.credentials_sealed !== sealedCredentials) return 'replaced';
      if (row.refresh_lease_until !== null && Date.parse(row.refresh_lease_until) > Date.parse(now)) return 'busy';
      await trx.updateTable('store_connections').set({ refresh_lease_until: leaseUntil }).where('store_domain', '=', storeDomain).execute();
      return 'claimed';
    });
  }

  /**
   * Ends a refresh of the credentials sealed as `sealedCredentials`: `changes` (the new credentials
   * with what refreshes them, in one write; or the mark that the owner must grant access again)
   * and the lease released. Credentials replaced in the meantime (a new connection, a
   * disconnection) are left as they are.
   */
  async endRefresh(
    storeDomain: string,
    sealedCredentials: string,
    changes: Partial<Pick<ConnectionRow, 'credentials_sealed'> & Omit<RefreshableCredentials, 'refresh_lease_until'>>,
    now: string,
  ): Promise<void> {
    await this.database.writeStatement((db) =>
      db
        .updateTable('store_connections')
        .set({ ...changes, refresh_lease_until: null, updated_at: now })
        .where('store_domain', '=', storeDomain)
        .where('platform', '=', this.platform)
        .where('credentials_sealed', '=', sealedCredentials)
        .execute(),
    );
  }

  /** The store's connection forgotten, its late deliveries no longer recognised (the store's data is erased). */
  async remove(storeDomain: string): Promise<void> {
    await this.database.writeStatement((db) =>
      db.deleteFrom('store_connections').where('store_domain', '=', storeDomain).where('platform', '=', this.platform).execute(),
    );
  }
}

/** The webhook ids a connection recorded. */
export function webhookIdsOf(row: Pick<ConnectionRow, 'webhook_ids'>): number[] {
  const ids: unknown = JSON.parse(row.webhook_ids);
  return Array.isArray(ids) ? ids.filter((id): id is number => Number.isInteger(id)) : [];
}
