import type { Database, Trx } from '../core/db/database.ts';
import type { Channel, ContactPointsTable, ContactPointStatus } from '../core/db/schema.ts';
import { chunks } from '../core/chunks.ts';

const CHANNEL_ORDER: Channel[] = ['email', 'sms', 'push'];

export type ContactPointRow = ContactPointsTable;

/**
 * Storage of a subscription's other channels, a phone and a browser: the only code that touches
 * the `contact_points` table. One of each channel per subscription: a second signup with a new
 * phone (or from another browser) replaces the first, consent and all.
 */
export class ContactPointRepository {
  constructor(private readonly database: Database) {}

  /** Adds the contact point, or replaces the subscription's one of that channel. */
  async put(row: ContactPointRow): Promise<ContactPointRow> {
    await this.database.write((trx) =>
      trx
        .insertInto('contact_points')
        .values(row)
        .onConflict((oc) =>
          oc.columns(['subscription_id', 'channel']).doUpdateSet({
            address: row.address,
            address_key: row.address_key,
            push_p256dh: row.push_p256dh,
            push_auth: row.push_auth,
            status: row.status,
            time_zone: row.time_zone,
            consent_method: row.consent_method,
            consent_text: row.consent_text,
            consent_page: row.consent_page,
            consent_at: row.consent_at,
            confirmed_at: row.confirmed_at,
            status_reason: null,
            updated_at: row.updated_at,
          }),
        )
        .execute(),
    );
    return (await this.database.db
      .selectFrom('contact_points')
      .selectAll()
      .where('subscription_id', '=', row.subscription_id)
      .where('channel', '=', row.channel)
      .executeTakeFirst())!;
  }

  /** The contact points of these subscriptions, whatever their status. */
  async ofSubscriptions(subscriptionIds: string[]): Promise<ContactPointRow[]> {
    const out: ContactPointRow[] = [];
    for (const chunk of chunks(subscriptionIds)) {
      out.push(...(await this.database.db.selectFrom('contact_points').selectAll().where('subscription_id', 'in', chunk).execute()));
    }
    // One order on both databases, so the shopper's page and the export list channels alike.
    return out.sort((a, b) => a.subscription_id.localeCompare(b.subscription_id) || CHANNEL_ORDER.indexOf(a.channel) - CHANNEL_ORDER.indexOf(b.channel));
  }

  async byIds(ids: string[]): Promise<ContactPointRow[]> {
    const out: ContactPointRow[] = [];
    for (const chunk of chunks(ids)) {
      out.push(...(await this.database.db.selectFrom('contact_points').selectAll().where('id', 'in', chunk).execute()));
    }
    return out;
  }

  /** Stores where this phone has an SMS contact point waiting for its YES. */
  async pendingSmsStores(phone: string): Promise<string[]> {
    const rows = await this.database.db
      .selectFrom('contact_points')
      .select('store_domain')
      .distinct()
      .where('channel', '=', 'sms')
      .where('address_key', '=', phone)
      .where('status', '=', 'pending')
      .where('store_domain', 'is not', null)
      .execute();
    return rows.map((row) => row.store_domain!);
  }

  /** pending → active for the phone's SMS contact points at these stores. */
  async confirmSms(phone: string, storeDomains: string[], now: string): Promise<number> {
    if (storeDomains.length === 0) return 0;
    const result = await this.database.writeStatement((db) =>
      db
        .updateTable('contact_points')
        .set({ status: 'active', confirmed_at: now, updated_at: now })
        .where('channel', '=', 'sms')
        .where('address_key', '=', phone)
        .where('status', '=', 'pending')
        .where('store_domain', 'in', storeDomains)
        .executeTakeFirst(),
    );
    return Number(result.numUpdatedRows);
  }

  /** Moves contact points in one of `from` to `to`, with the reason; returns how many moved. */
  async setStatus(ids: string[], from: ContactPointStatus[], to: ContactPointStatus, reason: string | null, now: string): Promise<number> {
    let moved = 0;
    for (const chunk of chunks(ids)) {
      const result = await this.database.writeStatement((db) =>
        db.updateTable('contact_points').set({ status: to, status_reason: reason, updated_at: now }).where('id', 'in', chunk).where('status', 'in', from).executeTakeFirst(),
      );
      moved += Number(result.numUpdatedRows);
    }
    return moved;
  }

  /**
   * A browser whose push service answered 404/410: its subscription is gone for every alert it
   * was given to, so every contact point with that endpoint is removed, not only the one tried.
   */
  async removeBrowser(id: string, reason: string, now: string): Promise<number> {
    const result = await this.database.writeStatement((db) =>
      db
        .updateTable('contact_points')
        .set({ status: 'removed', status_reason: reason, updated_at: now })
        .where('channel', '=', 'push')
        .where('address_key', '=', (eb) => eb.selectFrom('contact_points as gone').select('gone.address_key').where('gone.id', '=', id).where('gone.channel', '=', 'push'))
        .where('status', 'in', ['pending', 'active', 'stopped'])
        .executeTakeFirst(),
    );
    return Number(result.numUpdatedRows);
  }

  /** SMS contact points never confirmed by `before` expire, like the subscriptions they belong to. */
  async expirePendingSms(before: string, now: string): Promise<number> {
    const result = await this.database.writeStatement((db) =>
      db
        .updateTable('contact_points')
        .set({ status: 'expired', status_reason: 'not confirmed in time', updated_at: now })
        .where('channel', '=', 'sms')
        .where('status', '=', 'pending')
        .where('created_at', '<', before)
        .executeTakeFirst(),
    );
    return Number(result.numUpdatedRows);
  }

  /** SMS numbers waiting for their YES whose request has not gone out, oldest first. */
  awaitingSmsConfirmationRequest(limit: number): Promise<ContactPointRow[]> {
    return this.database.db
      .selectFrom('contact_points')
      .selectAll()
      .where('status', '=', 'pending')
      .where('channel', '=', 'sms')
      .where('confirmation_sent_at', 'is', null)
      .orderBy('created_at')
      .limit(limit)
      .execute();
  }

  async markConfirmationSent(id: string, now: string): Promise<void> {
    await this.database.writeStatement((db) => db.updateTable('contact_points').set({ confirmation_sent_at: now }).where('id', '=', id).executeTakeFirst());
  }

  /** Deletes the contact points of these subscriptions (erasure), inside the caller's transaction. */
  async eraseOf(trx: Trx, subscriptionIds: string[]): Promise<void> {
    for (const chunk of chunks(subscriptionIds)) await trx.deleteFrom('contact_points').where('subscription_id', 'in', chunk).execute();
  }

  async eraseStore(storeDomain: string): Promise<void> {
    await this.database.writeStatement((db) => db.deleteFrom('contact_points').where('store_domain', '=', storeDomain).executeTakeFirst());
  }
}
