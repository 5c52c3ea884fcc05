import { sql, type Kysely } from 'kysely';
import type { DialectMigration } from './index.ts';

/**
 * A subscription may have several phones and browsers, one contact point per address. A sign-up
 * proves nothing about who makes it, so a second phone or browser no longer replaces the one
 * already there (a stranger's sign-up once took over a shopper's confirmed number); it is added
 * beside it. The once-per-restock index counts per contact point, so each of them is alerted
 * once (e-mail, with no contact point, stays once per channel).
 */
export const contactPointsPerAddress: DialectMigration = {
  async up(db: Kysely<any>) {
    await sql`drop index contact_points_one_per_channel`.execute(db);
    await db.schema.createIndex('contact_points_one_per_address').unique().on('contact_points').columns(['subscription_id', 'channel', 'address_key']).execute();
    await sql`drop index notifications_once_per_restock`.execute(db);
    await sql`create unique index notifications_once_per_restock on notifications (restock_id, subscription_id, kind, channel, (coalesce(contact_point_id, '')))`.execute(db);
  },
};
