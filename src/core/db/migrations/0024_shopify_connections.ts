import { sql, type Kysely } from 'kysely';
import { timestampType, type Dialect } from '../dialect.ts';
import type { DialectMigration } from './index.ts';

/** The columns of `stores` that held a Shopify store's connection; they now live in `store_connections`. */
const MOVED_FROM_STORES = [
  'admin_token_sealed',
  'admin_token_expires_at',
  'refresh_token_sealed',
  'refresh_token_expires_at',
  'token_refresh_lease_until',
  'reauthorization_required_at',
  'admin_scopes',
  'reconciled_at',
];

/**
 * Shopify's stores keep their connection in `store_connections`, like every other platform's.
 * Their credentials expire and are refreshed, under a lease, with a credential of their own, and
 * the platform may refuse that one until the owner grants access again: columns any platform's
 * OAuth credentials need. Shopify's webhooks prove themselves with the app's secret, not one per
 * store, so the webhook secret becomes optional; SQLite cannot drop a NOT NULL, so the table is
 * made anew with the same rows.
 *
 * Every Shopify store with a token, or installed once, gets its connection: connected while it has
 * a token (a store waiting for the merchant keeps its token and the mark), disconnected once
 * uninstalled. The sealed tokens move as they are, sealed with the same key: the access token's
 * seal is the credentials a Shopify connection keeps.
 *
 * `installed_at`, `uninstalled_at` stay on `stores`: they are the store's own history on the
 * service, set by every platform's connection (`markConnected`), and Shopify Billing asks whether
 * the store was installed as the app, whatever became of its token since.
 */
export const shopifyConnections: DialectMigration = {
  async up(db: Kysely<any>, dialect: Dialect) {
    const ts = timestampType(dialect);
    await db.schema
      .createTable('store_connections_next')
      .addColumn('store_domain', 'text', (c) => c.primaryKey())
      .addColumn('platform', 'text', (c) => c.notNull())
      .addColumn('site', 'text', (c) => c.notNull())
      .addColumn('status', 'text', (c) => c.notNull())
      .addColumn('credentials_sealed', 'text')
      // When the credentials stop working; null for credentials that never expire.
      .addColumn('credentials_expire_at', ts)
      // What trades for new credentials (an OAuth refresh token), sealed, and its own end.
      .addColumn('refresh_credentials_sealed', 'text')
      .addColumn('refresh_credentials_expire_at', ts)
      // Held by the process refreshing the credentials, so that no other refreshes at the same time.
      .addColumn('refresh_lease_until', ts)
      // The platform refused to refresh the credentials: nothing is asked of it until the owner grants access again.
      .addColumn('reauthorization_required_at', ts)
      // What the platform granted, as it lists it.
      .addColumn('scopes', 'text')
      .addColumn('webhook_secret_sealed', 'text')
      .addColumn('webhook_ids', 'text', (c) => c.notNull().defaultTo('[]'))
      .addColumn('connected_at', ts, (c) => c.notNull())
      .addColumn('disconnected_at', ts)
      .addColumn('disconnect_reason', 'text')
      .addColumn('reconciled_at', ts)
      .addColumn('updated_at', ts, (c) => c.notNull())
      .execute();
    await sql`
      insert into store_connections_next (store_domain, platform, site, status, credentials_sealed, webhook_secret_sealed, webhook_ids,
                                          connected_at, disconnected_at, disconnect_reason, reconciled_at, updated_at)
      select store_domain, platform, site, status, credentials_sealed, webhook_secret_sealed, webhook_ids,
             connected_at, disconnected_at, disconnect_reason, reconciled_at, updated_at
      from store_connections`.execute(db);
    await db.schema.dropTable('store_connections').execute();
    await db.schema.alterTable('store_connections_next').renameTo('store_connections').execute();
    await db.schema.createIndex('store_connections_due').on('store_connections').columns(['platform', 'status', 'reconciled_at']).execute();

    await sql`
      insert into store_connections (store_domain, platform, site, status, credentials_sealed, credentials_expire_at,
                                     refresh_credentials_sealed, refresh_credentials_expire_at, refresh_lease_until,
                                     reauthorization_required_at, scopes, webhook_ids, connected_at, disconnected_at,
                                     disconnect_reason, reconciled_at, updated_at)
      select domain, 'shopify', domain,
             case when status = 'active' and admin_token_sealed is not null then 'connected' else 'disconnected' end,
             admin_token_sealed, admin_token_expires_at, refresh_token_sealed, refresh_token_expires_at, token_refresh_lease_until,
             reauthorization_required_at, admin_scopes, '[]', coalesce(installed_at, created_at),
             case when status = 'active' and admin_token_sealed is not null then null else coalesce(uninstalled_at, updated_at) end,
             case when status = 'active' and admin_token_sealed is not null then null else 'uninstalled' end,
             reconciled_at, updated_at
      from stores
      where platform = 'shopify' and (admin_token_sealed is not null or installed_at is not null)
        and domain not in (select store_domain from store_connections)`.execute(db);
    for (const column of MOVED_FROM_STORES) await db.schema.alterTable('stores').dropColumn(column).execute();
  },
};
