import type { Kysely } from 'kysely';
import { timestampType, type Dialect } from '../dialect.ts';
import type { DialectMigration } from './index.ts';

/**
 * Shopify's expiring offline tokens: the access token lasts an hour and comes with a refresh
 * token (sealed like the access token) that Shopify replaces at every refresh.
 *
 * - `admin_token_expires_at`: when the access token stops working; null for a non-expiring
 *   token, which stores installed before this migration hold until it is migrated.
 * - `refresh_token_sealed`, `refresh_token_expires_at`: the refresh token and its own end.
 * - `token_refresh_lease_until`: the lock one process holds while it refreshes, so that no
 *   other refreshes with a refresh token that is about to be replaced.
 * - `reauthorization_required_at`: Shopify refused the refresh token; no Admin API call is made
 *   for the store until the merchant opens the app again.
 */
export const expiringTokens: DialectMigration = {
  async up(db: Kysely<any>, dialect: Dialect) {
    const ts = timestampType(dialect);
    await db.schema.alterTable('stores').addColumn('admin_token_expires_at', ts).execute();
    await db.schema.alterTable('stores').addColumn('refresh_token_sealed', 'text').execute();
    await db.schema.alterTable('stores').addColumn('refresh_token_expires_at', ts).execute();
    await db.schema.alterTable('stores').addColumn('token_refresh_lease_until', ts).execute();
    await db.schema.alterTable('stores').addColumn('reauthorization_required_at', ts).execute();
  },
};
