import type { Kysely } from 'kysely';
import { timestampType, type Dialect } from '../dialect.ts';
import type { DialectMigration } from './index.ts';

/**
 * The payment ledger: one row per attempt to pay for a request (x402 or MPP). `proof_key` is
 * unique, so one payment proof can be claimed by one request only, whatever the concurrency.
 */
export const payments: DialectMigration = {
  async up(db: Kysely<any>, dialect: Dialect) {
    const ts = timestampType(dialect);
    await db.schema
      .createTable('payments')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('proof_key', 'text', (c) => c.notNull().unique())
      .addColumn('protocol', 'text', (c) => c.notNull())
      .addColumn('method', 'text', (c) => c.notNull())
      .addColumn('intent', 'text', (c) => c.notNull())
      .addColumn('operation', 'text', (c) => c.notNull())
      .addColumn('amount', 'text', (c) => c.notNull())
      .addColumn('currency', 'text', (c) => c.notNull())
      .addColumn('payer', 'text')
      .addColumn('reference', 'text')
      .addColumn('status', 'text', (c) => c.notNull())
      .addColumn('error', 'text')
      .addColumn('request_method', 'text', (c) => c.notNull())
      .addColumn('request_path', 'text', (c) => c.notNull())
      .addColumn('request_id', 'text', (c) => c.notNull())
      .addColumn('store_domain', 'text')
      .addColumn('result_ref', 'text')
      .addColumn('proof', 'text')
      .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
      .addColumn('created_at', ts, (c) => c.notNull())
      .addColumn('updated_at', ts, (c) => c.notNull())
      .execute();
    await db.schema.createIndex('payments_store').on('payments').columns(['store_domain', 'created_at']).execute();
    await db.schema.createIndex('payments_status').on('payments').columns(['status', 'updated_at']).execute();
  },
};
