import type { ChangeBus } from '../core/changes/bus.ts';
import { STORE_CHANGES } from '../core/changes/topics.ts';
import type { Database } from '../core/db/database.ts';
import { lockRows } from '../core/db/locking.ts';
import type { StoresTable } from '../core/db/schema.ts';

export type StoreRow = StoresTable;

export type NewStoreRow = Pick<StoreRow, 'domain' | 'owner_email' | 'created_at' | 'updated_at'> & { platform: string };

/** The store's offline token and what goes with it, as stored (sealed). */
export type AdminTokenColumns = Pick<
  StoreRow,
  'admin_token_sealed' | 'admin_scopes' | 'admin_token_expires_at' | 'refresh_token_sealed' | 'refresh_token_expires_at'
>;

/**
 * What became of an attempt to take the token-refresh lease: taken; the token was already
 * replaced (by another process's refresh or a new install); another process holds the lease;
 * or the store has no token to refresh (uninstalled, or waiting for the merchant).
 */
export type TokenRefreshClaim = 'claimed' | 'replaced' | 'busy' | 'unavailable';

/** Storage of stores and their owners; the only code that touches the `stores` table. */
export class StoreRepository {
  /** Built once: every storefront page view asks it. */
  readonly status: (domain: string) => Promise<Pick<StoreRow, 'domain' | 'status'> | undefined>;
  /** Built once: every subscription and stock report naming a store checks its products' platform. */
  readonly platform: (domain: string) => Promise<Pick<StoreRow, 'platform'> | undefined>;
  /** Built once: every sold-out product page asks which channels its form offers. */
  readonly storefrontOffer: (domain: string) => Promise<Pick<StoreRow, 'status' | 'settings' | 'sms_sender_sealed'> | undefined>;

  constructor(
    private readonly database: Database,
    /** Every committed change to a store is announced here (the storefront keeps answers built from it). */
    private readonly changes: ChangeBus,
  ) {
    this.status = database.preparedRead<Pick<StoreRow, 'domain' | 'status'>>(1, (db, domain) =>
      db.selectFrom('stores').select(['domain', 'status']).where('domain', '=', domain!),
    );
    this.platform = database.preparedRead<Pick<StoreRow, 'platform'>>(1, (db, domain) =>
      db.selectFrom('stores').select(['platform']).where('domain', '=', domain!),
    );
    this.storefrontOffer = database.preparedRead<Pick<StoreRow, 'status' | 'settings' | 'sms_sender_sealed'>>(1, (db, domain) =>
      db.selectFrom('stores').select(['status', 'settings', 'sms_sender_sealed']).where('domain', '=', domain!),
    );
  }

  /** Creates the store, or updates its owner when it exists; returns the row as stored. */
  upsert(row: NewStoreRow): Promise<StoreRow> {
    return this.announced(row.domain, this.database.write(async (trx) => {
      await trx
        .insertInto('stores')
        // A store keeps the platform it was made on: its subscriptions name that platform's products.
        .values({ ...row, status: 'active', settings: '{}' })
        .onConflict((oc) => oc.column('domain').doUpdateSet({ owner_email: row.owner_email, updated_at: row.updated_at }))
        .execute();
      return trx.selectFrom('stores').selectAll().where('domain', '=', row.domain).executeTakeFirstOrThrow();
    }));
  }

  find(domain: string): Promise<StoreRow | undefined> {
    return this.database.db.selectFrom('stores').selectAll().where('domain', '=', domain).executeTakeFirst();
  }

  /**
   * A Shopify installation: creates the store or reconnects it, keeping its settings. A new
   * token ends any wait for the merchant and any refresh under way with the old one.
   */
  install(row: NewStoreRow & AdminTokenColumns): Promise<StoreRow> {
    const connection = {
      status: 'active' as const,
      platform: 'shopify',
      admin_token_sealed: row.admin_token_sealed,
      admin_scopes: row.admin_scopes,
      admin_token_expires_at: row.admin_token_expires_at,
      refresh_token_sealed: row.refresh_token_sealed,
      refresh_token_expires_at: row.refresh_token_expires_at,
      token_refresh_lease_until: null,
      reauthorization_required_at: null,
      installed_at: row.updated_at,
      uninstalled_at: null,
      updated_at: row.updated_at,
    };
    return this.announced(row.domain, this.database.write(async (trx) => {
      await trx
        .insertInto('stores')
        .values({ ...row, ...connection, settings: '{}' })
        .onConflict((oc) => oc.column('domain').doUpdateSet({ ...connection, owner_email: row.owner_email }))
        .execute();
      return trx.selectFrom('stores').selectAll().where('domain', '=', row.domain).executeTakeFirstOrThrow();
    }));
  }

  async update(domain: string, changes: Partial<Omit<StoreRow, 'domain' | 'created_at'>>): Promise<boolean> {
    const result = await this.announced(domain, this.database.writeStatement((db) =>
      db.updateTable('stores').set(changes).where('domain', '=', domain).executeTakeFirst(),
    ));
    return Number(result.numUpdatedRows) > 0;
  }

  /** Stores whose Admin API the service may call, least recently reconciled first. */
  connected(limit: number): Promise<StoreRow[]> {
    return this.database.db
      .selectFrom('stores')
      .selectAll()
      .where('status', '=', 'active')
      .where('admin_token_sealed', 'is not', null)
      .where('reauthorization_required_at', 'is', null)
      // Never reconciled first: PostgreSQL would otherwise sort NULLs last and starve new stores.
      .orderBy('reconciled_at', (ob) => ob.asc().nullsFirst())
      .orderBy('domain')
      .limit(limit)
      .execute();
  }

  /**
   * Active stores whose own settings name `setting`, in domain order after `after`. The match
   * is on the JSON text as the service writes it (`"name":`); the service confirms each by parsing.
   */
  withOwnSetting(setting: string, after: string | null, limit: number): Promise<StoreRow[]> {
    let query = this.database.db
      .selectFrom('stores')
      .selectAll()
      .where('status', '=', 'active')
      .where('settings', 'like', `%"${setting}":%`);
    if (after !== null) query = query.where('domain', '>', after);
    return query.orderBy('domain').limit(limit).execute();
  }

  /**
   * Takes the lease under which one process refreshes the store's token, if the token is still
   * `sealedToken` and nobody else holds an unexpired lease. The row is locked while this is
   * decided, so two processes cannot both take it.
   */
  claimTokenRefresh(domain: string, sealedToken: string, now: string, leaseUntil: string): Promise<TokenRefreshClaim> {
    return this.database.write(async (trx) => {
      const row = await lockRows(
        this.database,
        trx
          .selectFrom('stores')
          .select(['status', 'admin_token_sealed', 'token_refresh_lease_until', 'reauthorization_required_at'])
          .where('domain', '=', domain),
      ).executeTakeFirst();
      if (row?.status !== 'active' || row.admin_token_sealed === null || row.reauthorization_required_at !== null) return 'unavailable';
      if (row.admin_token_sealed !== sealedToken) return 'replaced';
      if (row.token_refresh_lease_until !== null && Date.parse(row.token_refresh_lease_until) > Date.parse(now)) return 'busy';
      await trx.updateTable('stores').set({ token_refresh_lease_until: leaseUntil }).where('domain', '=', domain).execute();
      return 'claimed';
    });
  }

  /**
   * Ends a refresh of the token sealed as `sealedToken`: `changes` (the new token with its
   * refresh token, in one write as Shopify asks; or the mark that the merchant must open the
   * app again) and the lease released. A token replaced in the meantime (a new install,
   * an uninstall) is left as it is.
   */
  async endTokenRefresh(domain: string, sealedToken: string, changes: Partial<AdminTokenColumns & Pick<StoreRow, 'reauthorization_required_at'>>, now: string): Promise<void> {
    await this.database.writeStatement((db) =>
      db
        .updateTable('stores')
        .set({ ...changes, token_refresh_lease_until: null, updated_at: now })
        .where('domain', '=', domain)
        .where('admin_token_sealed', '=', sealedToken)
        .execute(),
    );
  }

  async remove(domain: string): Promise<void> {
    await this.announced(domain, this.database.writeStatement((db) => db.deleteFrom('stores').where('domain', '=', domain).execute()));
  }

  /** The write's result, once the change it made is announced. */
  private async announced<T>(domain: string, write: Promise<T>): Promise<T> {
    const result = await write;
    await this.changes.publish(STORE_CHANGES, [domain]);
    return result;
  }
}
