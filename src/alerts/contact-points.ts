import { CHANNEL_NAMES, contactChannelNamed, contactPointKind, type ContactChannel, type ContactDetails } from '../channels.ts';
import type { Database, Trx } from '../core/db/database.ts';
import type { ContactPointsTable, ContactPointStatus } from '../core/db/schema.ts';
import { chunks } from '../core/chunks.ts';

/** A contact point as the code sees it: its channel's details parsed, not the stored JSON. */
export type ContactPointRow = { [C in ContactChannel]: Omit<ContactPointsTable, 'channel' | 'details'> & { channel: C; details: ContactDetails<C> } }[ContactChannel];

/** The stored JSON, checked against the channel's schema: a row that does not fit is an error, not data. */
function fromTable(row: ContactPointsTable): ContactPointRow {
  return { ...row, details: contactPointKind(contactChannelNamed(row.channel)).details.parse(JSON.parse(row.details)) } as ContactPointRow;
}

function toTable(row: ContactPointRow): ContactPointsTable {
  return { ...row, details: JSON.stringify(contactPointKind(row.channel).details.parse(row.details)) };
}

/** A contact point nobody can be reached at any more: it no longer counts toward the bound. */
const UNREACHABLE: ContactPointStatus[] = ['removed', 'expired'];

/**
 * What a new sign-up of the same address starts again, with the new consent: an unreachable one,
 * and one turned off. A phone starts again as pending (only its own YES makes it active), and a
 * browser's endpoint is known to that browser alone, so neither hands a stranger anything.
 */
const RESTARTS: ContactPointStatus[] = [...UNREACHABLE, 'stopped'];

/**
 * Most phones (or browsers) one subscription may gather. Sign-ups are public, so without a bound
 * anyone could hang any number of numbers on a shopper's alert, each texted a confirmation request.
 */
export const CONTACT_POINTS_PER_CHANNEL = 5;

/**
 * Storage of a subscription's other channels, phones and browsers: the only code that touches
 * the `contact_points` table. One contact point per subscription and address. A sign-up proves
 * nothing about who makes it, so a new phone or browser is added beside the ones there and never
 * replaces or changes a live one; only the same address signed up again restarts one that was
 * turned off or can no longer be reached (RESTARTS).
 */
export class ContactPointRepository {
  constructor(private readonly database: Database) {}

  /**
   * Adds the contact point; the subscription's live one with that address stays as it is. Returns
   * the subscription's contact point for the address, or undefined when the subscription already
   * has CONTACT_POINTS_PER_CHANNEL live ones of the channel and this address is not among them.
   */
  async put(point: ContactPointRow): Promise<ContactPointRow | undefined> {
    const row = toTable(point);
    const found = await this.database.write(async (trx) => {
      const existing = await trx
        .selectFrom('contact_points')
        .select(['id', 'address_key', 'status'])
        .where('subscription_id', '=', row.subscription_id)
        .where('channel', '=', row.channel)
        .execute();
      const same = existing.find((point) => point.address_key === row.address_key);
      if (same && !RESTARTS.includes(same.status)) return true;
      const counted = existing.filter((point) => point !== same && !UNREACHABLE.includes(point.status)).length;
      if (counted >= CONTACT_POINTS_PER_CHANNEL) return false;
      if (same) {
        // The same address once more, after it was turned off or could no longer be reached: a fresh start under the old id.
        const { id: _id, subscription_id: _subscription, channel: _channel, address_key: _key, created_at: _created, ...fresh } = row;
        await trx.updateTable('contact_points').set({ ...fresh, status_reason: null, confirmation_sent_at: null }).where('id', '=', same.id).execute();
        return true;
      }
      // Two sign-ups of one address at once: the first is kept, as if it had come first.
      await trx
        .insertInto('contact_points')
        .values(row)
        .onConflict((oc) => oc.columns(['subscription_id', 'channel', 'address_key']).doNothing())
        .execute();
      return true;
    });
    if (!found) return undefined;
    const stored = await this.database.db
      .selectFrom('contact_points')
      .selectAll()
      .where('subscription_id', '=', row.subscription_id)
      .where('channel', '=', row.channel)
      .where('address_key', '=', row.address_key)
      .executeTakeFirst();
    return stored && fromTable(stored);
  }

  /** The contact points of these subscriptions, whatever their status. */
  async ofSubscriptions(subscriptionIds: string[]): Promise<ContactPointRow[]> {
    const out: ContactPointRow[] = [];
    for (const chunk of chunks(subscriptionIds)) {
      out.push(...(await this.database.db.selectFrom('contact_points').selectAll().where('subscription_id', 'in', chunk).execute()).map(fromTable));
    }
    // One order on both databases, so the shopper's page and the export list channels alike.
    return out.sort((a, b) => a.subscription_id.localeCompare(b.subscription_id) || CHANNEL_NAMES.indexOf(a.channel) - CHANNEL_NAMES.indexOf(b.channel));
  }

  async byIds(ids: string[]): Promise<ContactPointRow[]> {
    const out: ContactPointRow[] = [];
    for (const chunk of chunks(ids)) {
      out.push(...(await this.database.db.selectFrom('contact_points').selectAll().where('id', 'in', chunk).execute()).map(fromTable));
    }
    return out;
  }

  /** Stores where this address has a contact point of `channel` waiting for its confirmation (a phone's YES). */
  async pendingStores(channel: ContactChannel, address: string): Promise<string[]> {
    const rows = await this.database.db
      .selectFrom('contact_points')
      .select('store_domain')
      .distinct()
      .where('channel', '=', channel)
      .where('address_key', '=', address)
      .where('status', '=', 'pending')
      .where('store_domain', 'is not', null)
      .execute();
    return rows.map((row) => row.store_domain!);
  }

  /** pending → active for the address's contact points of `channel` at these stores. */
  async confirm(channel: ContactChannel, address: string, storeDomains: string[], now: string): Promise<number> {
    if (storeDomains.length === 0) return 0;
    const result = await this.database.writeStatement((db) =>
      db
        .updateTable('contact_points')
        .set({ status: 'active', confirmed_at: now, updated_at: now })
        .where('channel', '=', channel)
        .where('address_key', '=', address)
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
  async removeEverywhere(id: string, reason: string, now: string): Promise<number> {
    const result = await this.database.writeStatement((db) =>
      db
        .updateTable('contact_points')
        .set({ status: 'removed', status_reason: reason, updated_at: now })
        .where('channel', '=', (eb) => eb.selectFrom('contact_points as gone').select('gone.channel').where('gone.id', '=', id))
        .where('address_key', '=', (eb) => eb.selectFrom('contact_points as gone').select('gone.address_key').where('gone.id', '=', id))
        .where('status', 'in', ['pending', 'active', 'stopped'])
        .executeTakeFirst(),
    );
    return Number(result.numUpdatedRows);
  }

  /** Contact points of `channel` never confirmed by `before` expire, like the subscriptions they belong to. */
  async expirePending(channel: ContactChannel, before: string, now: string): Promise<number> {
    const result = await this.database.writeStatement((db) =>
      db
        .updateTable('contact_points')
        .set({ status: 'expired', status_reason: 'not confirmed in time', updated_at: now })
        .where('channel', '=', channel)
        .where('status', '=', 'pending')
        .where('created_at', '<', before)
        .executeTakeFirst(),
    );
    return Number(result.numUpdatedRows);
  }

  /** Contact points of `channel` waiting for their confirmation whose request has not gone out, oldest first. */
  async awaitingConfirmationRequest(channel: ContactChannel, limit: number): Promise<ContactPointRow[]> {
    const rows = await this.database.db
      .selectFrom('contact_points')
      .selectAll()
      .where('status', '=', 'pending')
      .where('channel', '=', channel)
      .where('confirmation_sent_at', 'is', null)
      .orderBy('created_at')
      .limit(limit)
      .execute();
    return rows.map(fromTable);
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
