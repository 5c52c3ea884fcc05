import type { Kysely } from 'kysely';
import type { DialectMigration } from './index.ts';

/**
 * What each channel won back: a click and an order line credited to an alert keep the channel
 * the alert went by, so the performance report can split clicks, orders and revenue by channel
 * without reading the ledger. Rows from before channels existed were e-mail.
 */
export const channelFigures: DialectMigration = {
  async up(db: Kysely<any>) {
    await db.schema.alterTable('alert_clicks').addColumn('channel', 'text', (c) => c.notNull().defaultTo('email')).execute();
    await db.schema.alterTable('order_attributions').addColumn('channel', 'text', (c) => c.notNull().defaultTo('email')).execute();
  },
};
