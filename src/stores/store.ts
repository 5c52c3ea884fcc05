import type { Database } from '../core/db/database.ts';
import type { StoresTable } from '../core/db/schema.ts';

export type StoreRow = StoresTable;

/** Storage of stores and their owners; the only code that touches the `stores` table. */
export class StoreStore {
  constructor(private readonly database: Database) {}

  /** Creates the store, or updates its owner when it exists; returns the row as stored. */
  upsert(row: StoreRow): Promise<StoreRow> {
    return this.database.write(async (trx) => {
      await trx
        .insertInto('stores')
        .values(row)
        .onConflict((oc) => oc.column('domain').doUpdateSet({ owner_email: row.owner_email, updated_at: row.updated_at }))
        .execute();
      return trx.selectFrom('stores').selectAll().where('domain', '=', row.domain).executeTakeFirstOrThrow();
    });
  }

  find(domain: string): Promise<StoreRow | undefined> {
    return this.database.db.selectFrom('stores').selectAll().where('domain', '=', domain).executeTakeFirst();
  }
}
