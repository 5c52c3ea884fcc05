import type { Database } from '../core/db/database.ts';
import type { StoresTable } from '../core/db/schema.ts';

export type StoreRow = StoresTable;

export type NewStoreRow = Pick<StoreRow, 'domain' | 'owner_email' | 'created_at' | 'updated_at'>;

/** Storage of stores and their owners; the only code that touches the `stores` table. */
export class StoreRepository {
  /** Built once: every storefront page view asks it. */
  readonly status: (domain: string) => Promise<Pick<StoreRow, 'domain' | 'status'> | undefined>;

  constructor(private readonly database: Database) {
    this.status = database.preparedRead<Pick<StoreRow, 'domain' | 'status'>>(1, (db, domain) =>
      db.selectFrom('stores').select(['domain', 'status']).where('domain', '=', domain!),
    );
  }

  /** Creates the store, or updates its owner when it exists; returns the row as stored. */
  upsert(row: NewStoreRow): Promise<StoreRow> {
    return this.database.write(async (trx) => {
      await trx
        .insertInto('stores')
        .values({ ...row, status: 'active', settings: '{}' })
        .onConflict((oc) => oc.column('domain').doUpdateSet({ owner_email: row.owner_email, updated_at: row.updated_at }))
        .execute();
      return trx.selectFrom('stores').selectAll().where('domain', '=', row.domain).executeTakeFirstOrThrow();
    });
  }

  find(domain: string): Promise<StoreRow | undefined> {
    return this.database.db.selectFrom('stores').selectAll().where('domain', '=', domain).executeTakeFirst();
  }

  /** A Shopify installation: creates the store or reconnects it, keeping its settings. */
  install(row: NewStoreRow & { admin_token_sealed: string; admin_scopes: string }): Promise<StoreRow> {
    const connection = {
      status: 'active' as const,
      platform: 'shopify',
      admin_token_sealed: row.admin_token_sealed,
      admin_scopes: row.admin_scopes,
      installed_at: row.updated_at,
      uninstalled_at: null,
      updated_at: row.updated_at,
    };
    return this.database.write(async (trx) => {
      await trx
        .insertInto('stores')
        .values({ ...row, ...connection, settings: '{}' })
        .onConflict((oc) => oc.column('domain').doUpdateSet({ ...connection, owner_email: row.owner_email }))
        .execute();
      return trx.selectFrom('stores').selectAll().where('domain', '=', row.domain).executeTakeFirstOrThrow();
    });
  }

  async update(domain: string, changes: Partial<Omit<StoreRow, 'domain' | 'created_at'>>): Promise<boolean> {
    const result = await this.database.writeStatement((db) =>
      db.updateTable('stores').set(changes).where('domain', '=', domain).executeTakeFirst(),
    );
    return Number(result.numUpdatedRows) > 0;
  }

  /** Stores whose Admin API the service may call, least recently reconciled first. */
  connected(limit: number): Promise<StoreRow[]> {
    return this.database.db
      .selectFrom('stores')
      .selectAll()
      .where('status', '=', 'active')
      .where('admin_token_sealed', 'is not', null)
      // Never reconciled first: PostgreSQL would otherwise sort NULLs last and starve new stores.
      .orderBy('reconciled_at', (ob) => ob.asc().nullsFirst())
      .orderBy('domain')
      .limit(limit)
      .execute();
  }

  async remove(domain: string): Promise<void> {
    await this.database.writeStatement((db) => db.deleteFrom('stores').where('domain', '=', domain).execute());
  }
}
