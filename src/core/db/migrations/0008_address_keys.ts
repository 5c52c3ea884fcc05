import { sql, type Kysely } from 'kysely';
import type { Dialect } from '../dialect.ts';
import type { DialectMigration } from './index.ts';

/**
 * The comparison key of an address as this migration computes it: NFC, lower-cased, local part
 * included. Spelled out here rather than imported from core/email.ts: a migration must keep
 * meaning what it meant when it shipped.
 */
function keyOf(email: string): string {
  return email.normalize('NFC').toLowerCase().normalize('NFC');
}

/** Rows read and rewritten per statement while keys are filled in. */
const PAGE = 500;

/**
 * Addresses are compared by one key (`email_key`) instead of as typed, so `Jane@` and `jane@` are
 * one person for suppression, the per-restock dedupe, the frequency cap and data requests. A
 * subscription belongs to whoever made it (the storefront, or one agent), and records whether
 * it is third-party (made by an agent not bound to its store), which dispatch plans after the
 * store's own shoppers and which is capped per agent.
 *
 * The keys are computed here in JavaScript, page by page of primary keys, because neither
 * database lower-cases beyond ASCII the same way (SQLite not at all, PostgreSQL by locale).
 */
export const addressKeys: DialectMigration = {
  async up(db: Kysely<any>, _dialect: Dialect) {
    const now = new Date().toISOString();

    // subscriptions
    await db.schema.alterTable('subscriptions').addColumn('email_key', 'text').execute();
    await db.schema.alterTable('subscriptions').addColumn('third_party', 'integer', (c) => c.notNull().defaultTo(0)).execute();
    await fillKeysById(db, 'subscriptions');
    // Who was bound to what when a subscription was made was never recorded: a subscription by
    // an agent not bound to its store today (or of no store) counts as third-party.
    await db
      .updateTable('subscriptions')
      .set({ third_party: 1 })
      .where('agent_id', 'is not', null)
      .where((eb) =>
        eb.or([
          eb('store_domain', 'is', null),
          eb.not(
            eb.exists(
              eb
                .selectFrom('agents')
                .select('agents.id')
                .whereRef('agents.id', '=', 'subscriptions.agent_id')
                .whereRef('agents.store_domain', '=', 'subscriptions.store_domain'),
            ),
          ),
        ]),
      )
      .execute();
    // The live subscription becomes one per maker and key: rows that were two under the old
    // index (two cases of one address) but are one under the new keep the earliest waiting; the
    // others end as cancelled, since the shopper gets one alert per address anyway.
    const duplicates = await db
      .selectFrom('subscriptions')
      .select(['product_id', sql<string>`coalesce(variant_id, '')`.as('variant'), 'email_key', sql<string>`coalesce(store_domain, '')`.as('store'), sql<string>`coalesce(agent_id, '')`.as('agent')])
      .where('status', '=', 'active')
      .groupBy(['product_id', sql`coalesce(variant_id, '')`, 'email_key', sql`coalesce(store_domain, '')`, sql`coalesce(agent_id, '')`])
      .having((eb) => eb.fn.countAll(), '>', 1)
      .execute();
    for (const group of duplicates) {
      const rows = await db
        .selectFrom('subscriptions')
        .select('id')
        .where('status', '=', 'active')
        .where('product_id', '=', group.product_id)
        .where(sql`coalesce(variant_id, '')`, '=', group.variant)
        .where('email_key', '=', group.email_key)
        .where(sql`coalesce(store_domain, '')`, '=', group.store)
        .where(sql`coalesce(agent_id, '')`, '=', group.agent)
        .orderBy('created_at')
        .orderBy('id')
        .execute();
      const later = rows.slice(1).map((row) => row.id as string);
      if (later.length > 0) await db.updateTable('subscriptions').set({ status: 'cancelled', updated_at: now }).where('id', 'in', later).execute();
    }
    await sql`drop index subscriptions_one_live`.execute(db);
    // The maker is part of the key: an agent's subscribe never runs into (and so never returns)
    // the storefront's row or another agent's.
    await sql`create unique index subscriptions_one_live
      on subscriptions (product_id, coalesce(variant_id, ''), email_key, coalesce(store_domain, ''), coalesce(agent_id, ''))
      where status = 'active'`.execute(db);
    // A store's subscriptions of one address: data requests, erasure, and every waiting row of
    // an address marked notified when its alert goes out.
    await db.schema.createIndex('subscriptions_by_address').on('subscriptions').columns(['store_domain', 'email_key']).execute();
    // The per-agent cap on live third-party subscriptions counts only those rows.
    await sql`create index subscriptions_third_party_live
      on subscriptions (agent_id, coalesce(store_domain, ''))
      where status = 'active' and third_party = 1`.execute(db);

    // suppressions: one per store and key; of duplicates by key the earliest stays.
    await db.schema.alterTable('suppressions').addColumn('email_key', 'text').execute();
    for (let after: { store_domain: string; email: string } | undefined; ; ) {
      let page = db.selectFrom('suppressions').select(['store_domain', 'email']).orderBy('store_domain').orderBy('email').limit(PAGE);
      if (after) {
        const { store_domain, email } = after;
        page = page.where((eb) => eb.or([eb('store_domain', '>', store_domain), eb.and([eb('store_domain', '=', store_domain), eb('email', '>', email)])]));
      }
      const rows = await page.execute();
      for (const row of rows) {
        await db.updateTable('suppressions').set({ email_key: keyOf(row.email) }).where('store_domain', '=', row.store_domain).where('email', '=', row.email).execute();
      }
      if (rows.length < PAGE) break;
      after = rows[rows.length - 1];
    }
    const suppressedTwice = await db
      .selectFrom('suppressions')
      .select(['store_domain', 'email_key'])
      .groupBy(['store_domain', 'email_key'])
      .having((eb) => eb.fn.countAll(), '>', 1)
      .execute();
    for (const group of suppressedTwice) {
      const rows = await db
        .selectFrom('suppressions')
        .select('email')
        .where('store_domain', '=', group.store_domain)
        .where('email_key', '=', group.email_key)
        .orderBy('created_at')
        .orderBy('email')
        .execute();
      const later = rows.slice(1).map((row) => row.email as string);
      await db.deleteFrom('suppressions').where('store_domain', '=', group.store_domain).where('email', 'in', later).execute();
    }
    await sql`create unique index suppressions_by_key on suppressions (store_domain, email_key)`.execute(db);

    // notifications: the ledger by address key (what a store sent to an address, for the
    // per-restock dedupe and the frequency cap), and whether the alert is third-party.
    await db.schema.alterTable('notifications').addColumn('email_key', 'text').execute();
    await db.schema.alterTable('notifications').addColumn('third_party', 'integer', (c) => c.notNull().defaultTo(0)).execute();
    await fillKeysById(db, 'notifications');
    await db
      .updateTable('notifications')
      .set({ third_party: 1 })
      .where('subscription_id', 'in', db.selectFrom('subscriptions').select('id').where('third_party', '=', 1))
      .execute();
    await sql`drop index notifications_by_address`.execute(db);
    await db.schema.createIndex('notifications_by_address_key').on('notifications').columns(['store_domain', 'email_key', 'sent_at']).execute();

    // restocks: a second signup-order cursor, for the third-party subscribers planned after the
    // store's own. A restock in progress planned both kinds in one order up to its cursor.
    await db.schema.alterTable('restocks').addColumn('third_party_cursor_created_at', 'text').execute();
    await db.schema.alterTable('restocks').addColumn('third_party_cursor_id', 'text').execute();
    await db
      .updateTable('restocks')
      .set((eb) => ({ third_party_cursor_created_at: eb.ref('cursor_created_at'), third_party_cursor_id: eb.ref('cursor_id') }))
      .execute();
  },
};

/** Fills `email_key` of a table keyed by `id`, one statement per page of rows. */
async function fillKeysById(db: Kysely<any>, table: 'subscriptions' | 'notifications'): Promise<void> {
  for (let after = ''; ; ) {
    const rows: Array<{ id: string; email: string }> = await db.selectFrom(table).select(['id', 'email']).where('id', '>', after).orderBy('id').limit(PAGE).execute();
    if (rows.length === 0) return;
    const cases = sql.join(rows.map((row) => sql`when ${row.id} then ${keyOf(row.email)}`), sql` `);
    await db
      .updateTable(table)
      .set({ email_key: sql`case id ${cases} end` })
      .where('id', 'in', rows.map((row) => row.id))
      .execute();
    if (rows.length < PAGE) return;
    after = rows[rows.length - 1]!.id;
  }
}
