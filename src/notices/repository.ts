import type { Database } from '../core/db/database.ts';
import { lockRows } from '../core/db/locking.ts';
import type { WaitlistCrossingsTable } from '../core/db/schema.ts';

export type CrossingRow = WaitlistCrossingsTable;

/** A waitlist of a store: a product, and its variant or '' for the whole product. */
export interface WaitlistKey {
  productId: string;
  variantKey: string;
}

export interface NewCrossing extends WaitlistKey {
  waiting: number;
  threshold: number;
}

/** What one look at a store's waitlists changes, written together. */
export interface CrossingChanges {
  crossed: NewCrossing[];
  /** Waitlists now below the threshold: their crossings end, so the next rise is a new one. */
  dropped: WaitlistKey[];
  /** When the waiting counts were read: a crossing recorded since (by another worker) is newer than what was read, and stays. */
  readAt: string;
  now: string;
  /** The claim on the unnoticed crossings lasts until then. */
  leaseUntil: string;
}

/** Storage of the owner notices; the only code that touches `waitlist_crossings` and `notice_digests`. */
export class NoticeRepository {
  constructor(private readonly database: Database) {}

  crossingsOf(storeDomain: string): Promise<CrossingRow[]> {
    return this.database.db.selectFrom('waitlist_crossings').selectAll().where('store_domain', '=', storeDomain).execute();
  }

  /**
   * Records new crossings, ends dropped ones, and claims every crossing of the store not yet
   * noticed (new ones, and older ones whose notice failed or whose worker died), in one commit:
   * the claimed rows come back for the caller to notice after the commit. A claim held by
   * another worker is left to it until its lease runs out.
   */
  recordCrossings(storeDomain: string, changes: CrossingChanges): Promise<CrossingRow[]> {
    return this.database.write(async (trx) => {
      for (const crossing of changes.crossed) {
        await trx
          .insertInto('waitlist_crossings')
          .values({
            store_domain: storeDomain,
            product_id: crossing.productId,
            variant_key: crossing.variantKey,
            crossed_at: changes.now,
            waiting: crossing.waiting,
            threshold: crossing.threshold,
            noticed_at: null,
            notice_lease_until: null,
          })
          .onConflict((oc) => oc.doNothing())
          .execute();
      }
      for (const key of changes.dropped) {
        await trx
          .deleteFrom('waitlist_crossings')
          .where('store_domain', '=', storeDomain)
          .where('product_id', '=', key.productId)
          .where('variant_key', '=', key.variantKey)
          .where('crossed_at', '<', changes.readAt)
          .execute();
      }
      return trx
        .updateTable('waitlist_crossings')
        .set({ notice_lease_until: changes.leaseUntil })
        .where('store_domain', '=', storeDomain)
        .where('noticed_at', 'is', null)
        .where((eb) => eb.or([eb('notice_lease_until', 'is', null), eb('notice_lease_until', '<', changes.now)]))
        .returningAll()
        .execute();
    });
  }

  /** The owner was told of these crossings. */
  async markNoticed(storeDomain: string, crossings: CrossingRow[], now: string): Promise<void> {
    await this.settleClaim(storeDomain, crossings, { noticed_at: now, notice_lease_until: null });
  }

  /** Telling the owner failed: the next look at the store tries again. */
  async releaseNotice(storeDomain: string, crossings: CrossingRow[]): Promise<void> {
    await this.settleClaim(storeDomain, crossings, { notice_lease_until: null });
  }

  /**
   * Claims the store's weekly digest when one is due (never sent, or the last covered a week
   * ending at least `weekMs` before `now`) and no other worker holds it. Returns the end of the
   * week last covered (null before the first digest), or undefined when none is due now.
   */
  claimDigest(storeDomain: string, now: string, weekMs: number, leaseUntil: string): Promise<{ lastDigestAt: string | null } | undefined> {
    return this.database.write(async (trx) => {
      await trx
        .insertInto('notice_digests')
        .values({ store_domain: storeDomain, last_digest_at: null, lease_until: null })
        .onConflict((oc) => oc.doNothing())
        .execute();
      const row = await lockRows(this.database, trx.selectFrom('notice_digests').selectAll().where('store_domain', '=', storeDomain)).executeTakeFirstOrThrow();
      if (row.lease_until !== null && Date.parse(row.lease_until) > Date.parse(now)) return undefined;
      if (row.last_digest_at !== null && Date.parse(now) - Date.parse(row.last_digest_at) < weekMs) return undefined;
      await trx.updateTable('notice_digests').set({ lease_until: leaseUntil }).where('store_domain', '=', storeDomain).execute();
      return { lastDigestAt: row.last_digest_at };
    });
  }

  /** The digest for the week ending `weekEnd` went out. */
  async digestSent(storeDomain: string, weekEnd: string): Promise<void> {
    await this.database.writeStatement((db) =>
      db.updateTable('notice_digests').set({ last_digest_at: weekEnd, lease_until: null }).where('store_domain', '=', storeDomain).execute(),
    );
  }

  /** Sending the digest failed: the next look at the store tries again. */
  async releaseDigest(storeDomain: string): Promise<void> {
    await this.database.writeStatement((db) => db.updateTable('notice_digests').set({ lease_until: null }).where('store_domain', '=', storeDomain).execute());
  }

  /** `shop/redact`: the store's notice records go. */
  async eraseStore(storeDomain: string): Promise<void> {
    await this.database.write(async (trx) => {
      await trx.deleteFrom('waitlist_crossings').where('store_domain', '=', storeDomain).execute();
      await trx.deleteFrom('notice_digests').where('store_domain', '=', storeDomain).execute();
    });
  }

  private async settleClaim(storeDomain: string, crossings: CrossingRow[], changes: Partial<Pick<CrossingRow, 'noticed_at' | 'notice_lease_until'>>): Promise<void> {
    await this.database.write(async (trx) => {
      for (const crossing of crossings) {
        await trx
          .updateTable('waitlist_crossings')
          .set(changes)
          .where('store_domain', '=', storeDomain)
          .where('product_id', '=', crossing.product_id)
          .where('variant_key', '=', crossing.variant_key)
          // A crossing ended and crossed again meanwhile is another crossing, told on its own.
          .where('crossed_at', '=', crossing.crossed_at)
          .execute();
      }
    });
  }
}
