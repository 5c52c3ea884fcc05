import { sql, type Kysely } from 'kysely';
import type { Dialect } from '../dialect.ts';
import type { DialectMigration } from './index.ts';

/**
 * What a channel keeps beyond a contact point's address goes in one JSON column, `details`,
 * read through that channel's schema, so a new channel needs no columns of its own. A browser's
 * push keys move there from `push_p256dh` and `push_auth`; a phone keeps nothing more (`{}`).
 */
export const contactPointDetails: DialectMigration = {
  async up(db: Kysely<any>, dialect: Dialect) {
    await db.schema.alterTable('contact_points').addColumn('details', 'text', (c) => c.notNull().defaultTo('{}')).execute();
    const pushKeys = dialect === 'postgres' ? sql`json_build_object('p256dh', push_p256dh, 'auth', push_auth)::text` : sql`json_object('p256dh', push_p256dh, 'auth', push_auth)`;
    await db.updateTable('contact_points').set({ details: pushKeys }).where('channel', '=', 'push').execute();
    await db.schema.alterTable('contact_points').dropColumn('push_p256dh').execute();
    await db.schema.alterTable('contact_points').dropColumn('push_auth').execute();
  },
};
