import type { Database } from '../core/db/database.ts';
import type { WooCommerceConnectionsTable } from '../core/db/schema.ts';

export type ConnectionRow = WooCommerceConnectionsTable;

/** Storage of stores' WooCommerce connections; the only code that touches `woocommerce_connections`. */
export class ConnectionRepository {
  constructor(private readonly database: Database) {}

  find(storeDomain: string): Promise<ConnectionRow | undefined> {
    return this.database.db.selectFrom('woocommerce_connections').selectAll().where('store_domain', '=', storeDomain).executeTakeFirst();
  }

  /** A new connection, or the store's connection made anew (new keys, secret and webhooks). */
  async save(row: ConnectionRow): Promise<void> {
    const { store_domain: _, ...changes } = row;
    await this.database.writeStatement((db) =>
      db.insertInto('woocommerce_connections').values(row).onConflict((oc) => oc.column('store_domain').doUpdateSet(changes)).execute(),
    );
  }

  /** Ends a connection that is still on: its keys are forgotten, its secret kept to recognise late deliveries. */
  async disconnect(storeDomain: string, reason: string, now: string): Promise<boolean> {
    const result = await this.database.writeStatement((db) =>
      db
        .updateTable('woocommerce_connections')
        .set({ status: 'disconnected', keys_sealed: null, disconnected_at: now, disconnect_reason: reason, updated_at: now })
        .where('store_domain', '=', storeDomain)
        .where('status', '=', 'connected')
        .executeTakeFirst(),
    );
    return Number(result.numUpdatedRows) > 0;
  }

  /** Connected stores not reconciled since `before`, least recently reconciled first. */
  due(before: string, limit: number): Promise<ConnectionRow[]> {
    return this.database.db
      .selectFrom('woocommerce_connections')
      .selectAll()
      .where('status', '=', 'connected')
      .where((eb) => eb.or([eb('reconciled_at', 'is', null), eb('reconciled_at', '<', before)]))
      .orderBy('reconciled_at', (ob) => ob.asc().nullsFirst())
      .orderBy('store_domain')
      .limit(limit)
      .execute();
  }

  async markReconciled(storeDomain: string, now: string): Promise<void> {
    await this.database.writeStatement((db) => db.updateTable('woocommerce_connections').set({ reconciled_at: now }).where('store_domain', '=', storeDomain).execute());
  }
}
