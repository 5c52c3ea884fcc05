import { sql, type Kysely } from 'kysely';
import { timestampType, type Dialect } from '../dialect.ts';
import type { DialectMigration } from './index.ts';

export const foundation: DialectMigration = {
  async up(db: Kysely<any>, dialect: Dialect) {
    const ts = timestampType(dialect);

    await db.schema
      .createTable('service_secrets')
      .addColumn('name', 'text', (c) => c.primaryKey())
      .addColumn('value', 'text', (c) => c.notNull())
      .addColumn('created_at', ts, (c) => c.notNull())
      .execute();

    await db.schema
      .createTable('subscriptions')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('product_id', 'text', (c) => c.notNull())
      .addColumn('variant_id', 'text')
      .addColumn('email', 'text', (c) => c.notNull())
      .addColumn('status', 'text', (c) => c.notNull())
      .addColumn('created_at', ts, (c) => c.notNull())
      .addColumn('updated_at', ts, (c) => c.notNull())
      .execute();
    // One live subscription per (product, variant, e-mail); a new one may follow once it ended.
    await sql`create unique index subscriptions_one_live
      on subscriptions (product_id, coalesce(variant_id, ''), email)
      where status = 'active'`.execute(db);
    await db.schema
      .createIndex('subscriptions_by_product')
      .on('subscriptions')
      .columns(['product_id', 'status', 'created_at'])
      .execute();

    await db.schema
      .createTable('checkout_sessions')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('plan', 'text', (c) => c.notNull())
      .addColumn('shop', 'text', (c) => c.notNull())
      .addColumn('status', 'text', (c) => c.notNull())
      .addColumn('provider', 'text', (c) => c.notNull())
      .addColumn('amount_cents', 'integer', (c) => c.notNull())
      .addColumn('currency', 'text', (c) => c.notNull())
      .addColumn('created_at', ts, (c) => c.notNull())
      .addColumn('expires_at', ts, (c) => c.notNull())
      .addColumn('completed_at', ts)
      .execute();

    await db.schema
      .createTable('store_plans')
      .addColumn('shop', 'text', (c) => c.primaryKey())
      .addColumn('plan', 'text', (c) => c.notNull())
      .addColumn('status', 'text', (c) => c.notNull())
      .addColumn('checkout_session_id', 'text')
      .addColumn('activated_at', ts, (c) => c.notNull())
      .addColumn('updated_at', ts, (c) => c.notNull())
      .execute();

    await db.schema
      .createTable('idempotency_keys')
      .addColumn('scope', 'text', (c) => c.notNull())
      .addColumn('key', 'text', (c) => c.notNull())
      .addColumn('fingerprint', 'text', (c) => c.notNull())
      .addColumn('state', 'text', (c) => c.notNull())
      .addColumn('status_code', 'integer')
      .addColumn('content_type', 'text')
      .addColumn('body', 'text')
      .addColumn('created_at', ts, (c) => c.notNull())
      .addColumn('expires_at', ts, (c) => c.notNull())
      .addPrimaryKeyConstraint('idempotency_keys_pk', ['scope', 'key'])
      .execute();
    await db.schema.createIndex('idempotency_keys_expiry').on('idempotency_keys').column('expires_at').execute();
  },
};
