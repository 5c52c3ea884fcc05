import type { ChangeBus } from '../core/changes/bus.ts';
import { ChangeCache } from '../core/changes/cache.ts';
import { STORE_CHANGES } from '../core/changes/topics.ts';
import type { Database } from '../core/db/database.ts';
import type { StoresTable } from '../core/db/schema.ts';

export type StoreRow = StoresTable;

/** Stores whose rows each process keeps at most. */
const CACHED_STORES = 10_000;

export type NewStoreRow = Pick<StoreRow, 'domain' | 'owner_email' | 'created_at' | 'updated_at'> & { platform: string };

/** Storage of stores and their owners; the only code that touches the `stores` table. */
export class StoreRepository {
  /** Built once: every storefront page view asks it. */
  readonly status: (domain: string) => Promise<Pick<StoreRow, 'domain' | 'status'> | undefined>;
  /** Built once: every sold-out product page asks which channels its form offers. */
  readonly storefrontOffer: (domain: string) => Promise<Pick<StoreRow, 'status' | 'settings' | 'sms_sender_sealed'> | undefined>;
  /** The row as last committed, kept in memory until a change to it is announced: every subscribe asks it. */
  private readonly rows: ChangeCache<StoreRow | undefined>;

  constructor(
    private readonly database: Database,
    /** Every committed change to a store is announced here (the storefront keeps answers built from it). */
    private readonly changes: ChangeBus,
  ) {
    this.status = database.preparedRead<Pick<StoreRow, 'domain' | 'status'>>(1, (db, domain) =>
      db.selectFrom('stores').select(['domain', 'status']).where('domain', '=', domain!),
    );
    this.rows = new ChangeCache(changes, STORE_CHANGES, (domain) => this.find(domain), CACHED_STORES);
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
   * `find` answered from memory while the change bus vouches for it. The row is shared by every
   * caller: frozen, so none can change what the next one reads. Domains are kept as stored (lower
   * case), so a domain in another case reads the table as `find` does.
   */
  async current(domain: string): Promise<Readonly<StoreRow> | undefined> {
    if (domain !== domain.toLowerCase()) return this.find(domain);
    const row = await this.rows.get(domain);
    return row && Object.freeze(row);
  }

  /**
   * An app installed on the store's platform (the Shopify app): creates the store or reconnects
   * it as `row.platform`'s, keeping its settings. Its credentials are its connection's.
   */
  install(row: NewStoreRow): Promise<StoreRow> {
    const installed = { status: 'active' as const, platform: row.platform, installed_at: row.updated_at, uninstalled_at: null, updated_at: row.updated_at };
    return this.announced(row.domain, this.database.write(async (trx) => {
      await trx
        .insertInto('stores')
        .values({ ...row, ...installed, settings: '{}' })
        .onConflict((oc) => oc.column('domain').doUpdateSet({ ...installed, owner_email: row.owner_email }))
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
