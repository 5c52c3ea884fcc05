import type { FastifyBaseLogger } from 'fastify';
import type { Database } from '../core/db/database.ts';
import type { UnitHoldsTable } from '../core/db/schema.ts';
import type { WorkerJob } from '../core/jobs.ts';
import { newId } from '../core/ids.ts';

export type UnitHoldRow = UnitHoldsTable;

/**
 * What a platform that can hold stock for one shopper offers the dispatch kernel (a platform
 * feature's optional `holds`, src/platform.ts). The kernel never names a platform: it asks the
 * one a product's id names (`gid://<platform>/…`). A platform that cannot hold stock has none,
 * and its stores' alerts go out as ordinary ones (docs/dispatch.md, "Reserved units").
 */
export interface UnitHolds {
  /**
   * Holds one unit of the variant (or product) for a shopper until `until`, and returns where
   * that unit is checked out. Throws when the platform refuses (no stock left, no access): the
   * alert then goes out without a hold.
   */
  holdUnit(request: HoldRequest): Promise<UnitHold>;
  /**
   * Ends a hold that expired. `claimed`: the shopper bought the unit meanwhile, so nothing is
   * released and no one else is alerted for it; `released`: the unit is sellable again.
   */
  releaseHold(storeDomain: string, holdRef: string): Promise<'released' | 'claimed'>;
}

export interface HoldRequest {
  storeDomain: string;
  productId: string;
  variantId: string | null;
  email: string;
  until: Date;
  /** The alert the hold belongs to, which the platform records on it so an order from it names the alert. */
  alertId: string;
}

export interface UnitHold {
  holdRef: string;
  checkoutUrl: string;
  /** When the platform lets the unit go, as it reports it. */
  until: string;
}

/** The platform a product's id names (`gid://shopify/Product/1` → shopify); undefined for other ids. */
export function platformOfProduct(productId: string): string | undefined {
  return /^gid:\/\/([a-z0-9-]+)\//i.exec(productId)?.[1]?.toLowerCase();
}

/** The unit_holds table: the only code that writes SQL for it. */
export class UnitHoldRepository {
  constructor(private readonly database: Database) {}

  byNotification(notificationId: string): Promise<UnitHoldRow | undefined> {
    return this.database.db.selectFrom('unit_holds').selectAll().where('notification_id', '=', notificationId).executeTakeFirst();
  }

  async update(id: string, changes: Partial<UnitHoldRow>): Promise<void> {
    await this.database.writeStatement((db) => db.updateTable('unit_holds').set(changes).where('id', '=', id).execute());
  }

  /** Holds still in force past their expiry, oldest first. */
  expired(now: string, limit: number): Promise<UnitHoldRow[]> {
    return this.database.db
      .selectFrom('unit_holds')
      .selectAll()
      .where('status', '=', 'held')
      .where('expires_at', '<=', now)
      .orderBy('expires_at')
      .limit(limit)
      .execute();
  }

  /** The hold ended; its restock's next batch is due now, so the next shoppers hear of the unit. */
  async release(hold: UnitHoldRow, status: 'released' | 'claimed', outcome: string, now: string): Promise<void> {
    await this.database.write(async (trx) => {
      await trx.updateTable('unit_holds').set({ status, outcome, updated_at: now }).where('id', '=', hold.id).where('status', '=', 'held').execute();
      if (status === 'released') {
        await trx.updateTable('restocks').set({ next_batch_at: now, updated_at: now }).where('id', '=', hold.restock_id).where('status', '=', 'dispatching').execute();
      }
    });
  }
}

/** The rows the planner writes with a batch whose shoppers each get a unit held. */
export function plannedHold(fields: Pick<UnitHoldRow, 'notification_id' | 'restock_id' | 'store_domain' | 'subscription_id' | 'product_id' | 'variant_id' | 'minutes'>, now: string): UnitHoldRow {
  return { id: newId('hld'), ...fields, status: 'planned', hold_ref: null, checkout_url: null, expires_at: null, outcome: null, created_at: now, updated_at: now };
}

/**
 * Holds the unit an alert announces, just before the alert goes out: after the sending rules
 * (consent, the frequency cap, the plan) let it go, so no unit is held for a shopper who is not
 * told. A retried send reuses the hold it made; a refused hold is recorded and the alert goes
 * out as an ordinary one.
 */
export class HoldKeeper {
  constructor(
    private readonly holds: UnitHoldRepository,
    private readonly platforms: Readonly<Record<string, UnitHolds>>,
    private readonly log: FastifyBaseLogger,
    private readonly now: () => number = Date.now,
  ) {}

  /** Whether a product's platform can hold stock. */
  canHold(productId: string): boolean {
    const platform = platformOfProduct(productId);
    return platform !== undefined && this.platforms[platform] !== undefined;
  }

  /** The held unit the alert carries, holding it now when the batch planned one; undefined: none. */
  async holdFor(alert: { id: string; email: string }): Promise<{ checkoutUrl: string; until: string } | undefined> {
    const hold = await this.holds.byNotification(alert.id);
    if (!hold) return undefined;
    if (hold.status === 'held' && hold.checkout_url && hold.expires_at) return { checkoutUrl: hold.checkout_url, until: hold.expires_at };
    if (hold.status !== 'planned') return undefined;
    const platform = this.platforms[platformOfProduct(hold.product_id) ?? ''];
    const nowIso = new Date(this.now()).toISOString();
    if (!platform) {
      await this.holds.update(hold.id, { status: 'failed', outcome: 'the platform cannot hold stock', updated_at: nowIso });
      return undefined;
    }
    try {
      const held = await platform.holdUnit({
        storeDomain: hold.store_domain,
        productId: hold.product_id,
        variantId: hold.variant_id,
        email: alert.email,
        until: new Date(this.now() + hold.minutes * 60_000),
        alertId: alert.id,
      });
      await this.holds.update(hold.id, { status: 'held', hold_ref: held.holdRef, checkout_url: held.checkoutUrl, expires_at: new Date(held.until).toISOString(), updated_at: nowIso });
      return { checkoutUrl: held.checkoutUrl, until: new Date(held.until).toISOString() };
    } catch (err) {
      this.log.warn({ err, alertId: alert.id }, 'holding a unit failed; the alert goes out without one');
      await this.holds.update(hold.id, { status: 'failed', outcome: `the platform refused the hold: ${err instanceof Error ? err.message : String(err)}`.slice(0, 500), updated_at: nowIso });
      return undefined;
    }
  }
}

/** Holds released per turn at most, so one turn never waits on the platform for long. */
const RELEASES_PER_TURN = 20;

/**
 * The worker's job: each hold past its expiry is ended at its platform; a unit the shopper did
 * not buy is sellable again and the restock's next batch is due at once, so the next shoppers in
 * line hear of it. A platform that fails is asked again on a later turn.
 */
export function releaseExpiredHoldsJob(holds: UnitHoldRepository, platforms: Readonly<Record<string, UnitHolds>>, log: FastifyBaseLogger): WorkerJob {
  return {
    name: 'release-expired-holds',
    async run(now = new Date()) {
      const due = await holds.expired(now.toISOString(), RELEASES_PER_TURN);
      let ended = 0;
      for (const hold of due) {
        const platform = platforms[platformOfProduct(hold.product_id) ?? ''];
        if (!platform || !hold.hold_ref) {
          await holds.release(hold, 'released', 'the platform no longer holds stock', now.toISOString());
          ended++;
          continue;
        }
        try {
          const status = await platform.releaseHold(hold.store_domain, hold.hold_ref);
          await holds.release(hold, status, status === 'claimed' ? 'the shopper bought the held unit' : 'expired unclaimed; the unit went back on sale and the next shoppers were told', now.toISOString());
          ended++;
        } catch (err) {
          log.warn({ err, hold: hold.id }, 'releasing an expired hold failed; the next turn retries');
        }
      }
      return ended;
    },
  };
}
