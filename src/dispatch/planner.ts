import { addressKey } from '../core/email.ts';
import { newId } from '../core/ids.ts';
import type { EffectiveSettings } from '../stores/schemas.ts';
import { leaseEnd } from './leases.ts';
import { planVerdict, WHY } from './rules.ts';
import type { NotificationRow, RestockRow } from './repository.ts';
import type { WaitingSubscriber } from '../alerts/service.ts';
import { CHANNELS } from '../channels.ts';
import type { Channel } from '../channels.ts';
import type { WorkerDeps } from './worker.ts';
import { plannedHold, type UnitHoldRow } from './holds.ts';

interface PlannedChannel {
  channel: Channel;
  contactPointId: string | null;
}

const EMAIL: PlannedChannel = { channel: 'email', contactPointId: null };

/** How the audit names a channel. */

/** How many restocks one turn starts planning at most, so sending is never starved by planning. */
const RESTOCKS_PER_TURN = 10;

/**
 * Subscribers read, written and committed at a time. A batch of 100,000 planned at once held
 * every waiting subscriber and ledger row in memory and kept the first alert waiting for all of
 * them; a page bounds both, whatever the waiting list's size. Pages are planned while alerts go
 * out, so a page is also a burst of allocation among the sends: at 2,000 (about 12 MB) the heap's
 * young generation was collected while little else but the page and the mails in flight had been
 * made since the last collection, so V8 judged the mail library's objects long-lived and, from
 * then on, made every mail's in the old generation, where they piled up as garbage.
 */
export const PLAN_PAGE_SIZE = 500;

export type PlannerDeps = Pick<WorkerDeps, 'store' | 'inventory' | 'stores' | 'alerts' | 'config' | 'log' | 'holds'>;

export interface PlannerOptions {
  /** Subscribers per page (a test seam; PLAN_PAGE_SIZE otherwise). */
  pageSize?: number;
}

/** A batch whose first pages are queued: what its next page needs, kept while its restock stays leased. */
interface BatchInProgress {
  /** The restock as the last page left it (cursors, planned, batches). */
  restock: RestockRow;
  batch: number;
  /** Subscribers the batch holds (stock × multiplier when it began) and those queued so far. */
  size: number;
  taken: number;
  available: number;
  settings: EffectiveSettings;
  exceptCountries: string[];
  nextBatchAt: string;
  /** Minutes a unit is held for each shopper of this batch; 0: no holds. */
  holdMinutes: number;
}

/**
 * Plans restocks into batches, one worker per restock at a time (by lease): the stock re-read,
 * then the next stock × multiplier waiting subscribers queued as one batch. A batch takes the
 * store's own subscribers first (the storefront's and its bound agents', in signup order), and
 * fills what is left with third-party ones (made by agents not bound to the store, in signup
 * order): each kind has its own cursor, so a shopper of the store who signs up while a restock
 * runs still goes ahead of third parties not yet planned, and third parties never take the
 * allowance the store's shoppers wait for.
 *
 * A batch is queued a page at a time, each page in the transaction that moves the restock's
 * cursors past it, so a crash between pages neither loses nor repeats a subscriber. The worker
 * keeps the restock leased from the first page to the last and queues the next page when the
 * send queue runs low (`refill`). A batch cut short (the worker died or stopped) counts as a
 * batch: the rest wait for the next one, due at the same time.
 */
export class BatchPlanner {
  private readonly inProgress = new Map<string, BatchInProgress>();
  private readonly pageSize: number;

  constructor(
    private readonly deps: PlannerDeps,
    private readonly owner: string,
    /** The worker's clock (ms since the epoch). */
    private readonly now: () => number = Date.now,
    options: PlannerOptions = {},
  ) {
    this.pageSize = Math.max(1, options.pageSize ?? PLAN_PAGE_SIZE);
  }

  /**
   * Queues the next page of every batch in progress, then starts the batches due, up to
   * RESTOCKS_PER_TURN; resolves to how many pages and stops were written.
   */
  async planDue(): Promise<number> {
    let planned = await this.continueBatches();
    for (let i = 0; i < RESTOCKS_PER_TURN; i++) {
      const now = new Date(this.now());
      const restock = await this.deps.store.claimDueRestock(this.owner, now.toISOString(), leaseEnd(this.deps.config.leaseSeconds, now));
      if (!restock) break;
      planned += await this.startBatch(restock, now);
    }
    return planned;
  }

  /**
   * The send queue ran low: the next page of each batch in progress, and the restocks that came
   * due meanwhile. A turn sends until its queue is empty, so a restock reported while a large
   * batch goes out would otherwise wait for all of it; this way it waits for one page at most.
   * Never throws (the next turn retries).
   */
  async refill(): Promise<number> {
    try {
      return await this.planDue();
    } catch (err) {
      this.deps.log.warn({ err, worker: this.owner }, 'planning the next page of a batch failed; the next turn retries');
      return 0;
    }
  }

  /** A stopping worker lets go of the restocks it holds: their next batch is planned by whoever takes them. */
  async release(): Promise<void> {
    const held = [...this.inProgress.values()];
    this.inProgress.clear();
    for (const { restock } of held) {
      await this.deps.store.releaseRestock(this.owner, restock.id, { updated_at: new Date(this.now()).toISOString() }).catch((err) => this.deps.log.warn({ err, restock: restock.id }, 'releasing a restock failed; its lease runs out'));
    }
  }

  private async continueBatches(): Promise<number> {
    let pages = 0;
    for (const progress of [...this.inProgress.values()]) {
      await this.planPage(progress, new Date(this.now()));
      pages++;
    }
    return pages;
  }

  private async startBatch(restock: RestockRow, now: Date): Promise<number> {
    const { inventory, stores } = this.deps;
    const { sending, settings } = await stores.sendingProfile(restock.store_domain);
    // A store that stopped sending is not asked for its stock.
    const stock = sending ? await inventory.stockOf(restock.store_domain, restock.product_id, restock.variant_id) : { available: 0, published: false, unlimited: false };
    const verdict = planVerdict(sending, stock, settings);
    if (verdict.kind === 'stop') return this.stop(restock, now, verdict.status, verdict.reason);
    const exceptCountries = await inventory.unlistedCountries(restock.store_domain, restock.product_id);
    const holdMinutes = await this.holdMinutes(restock, stock, settings, exceptCountries);
    // With held units the batch is one shopper per unit, and the next waits until the holds end
    // (the worker's release of an unclaimed hold makes it due at once).
    await this.planPage(
      {
        restock,
        batch: restock.batches + 1,
        size: holdMinutes > 0 ? Math.max(1, Math.min(verdict.size, stock.available)) : verdict.size,
        taken: 0,
        available: stock.available,
        settings,
        exceptCountries,
        nextBatchAt: new Date(now.getTime() + Math.max(settings.batchIntervalSeconds, holdMinutes * 60) * 1000).toISOString(),
        holdMinutes,
      },
      now,
    );
    return 1;
  }

  /**
   * Minutes each shopper of this batch has a unit held for: the store's setting, for the first
   * batch of a restock smaller than its waiting list, on a platform that can hold stock; else 0.
   */
  private async holdMinutes(restock: RestockRow, stock: { available: number; unlimited: boolean }, settings: EffectiveSettings, exceptCountries: string[]): Promise<number> {
    const minutes = settings.reserveUnitsMinutes;
    if (!(minutes > 0) || restock.batches > 0 || stock.unlimited || stock.available < 1 || !this.deps.holds?.canHold(restock.product_id)) return 0;
    const query = {
      storeDomain: restock.store_domain,
      includeUnowned: restock.include_unowned === 1,
      productId: restock.product_id,
      variantId: restock.variant_id,
      exceptCountries,
      after: null,
    };
    // More waiting than units: one more than the stock is enough to know.
    const wanted = stock.available + 1;
    const own = await this.deps.alerts.waitingSubscribers({ ...query, thirdParty: false, limit: wanted });
    const others = own.length < wanted ? await this.deps.alerts.waitingSubscribers({ ...query, thirdParty: true, limit: wanted - own.length }) : [];
    return own.length + others.length > stock.available ? minutes : 0;
  }

  /** Queues the batch's next page: the store's own waiting subscribers first, then third parties. */
  private async planPage(progress: BatchInProgress, now: Date): Promise<void> {
    const { restock, batch, size, taken } = progress;
    const limit = Math.min(this.pageSize, size - taken);
    const query = {
      storeDomain: restock.store_domain,
      includeUnowned: restock.include_unowned === 1,
      productId: restock.product_id,
      variantId: restock.variant_id,
      exceptCountries: progress.exceptCountries,
    };
    const own = await this.deps.alerts.waitingSubscribers({ ...query, thirdParty: false, after: cursor(restock.cursor_created_at, restock.cursor_id), limit });
    const thirdParty =
      own.length < limit
        ? await this.deps.alerts.waitingSubscribers({
            ...query,
            thirdParty: true,
            after: cursor(restock.third_party_cursor_created_at, restock.third_party_cursor_id),
            limit: limit - own.length,
          })
        : [];
    const waiting = [...own, ...thirdParty];
    if (waiting.length === 0 && taken === 0) {
      this.inProgress.delete(restock.id);
      await this.stop(restock, now, 'done', WHY.everyoneAlerted);
      return;
    }

    const nowIso = now.toISOString();
    const channels = await this.channelsOf(waiting);
    const rows: NotificationRow[] = [];
    const holds: UnitHoldRow[] = [];
    waiting.forEach((subscriber, i) => {
      const position = restock.planned + i;
      const third = i >= own.length;
      for (const [c, channel] of channels(subscriber).entries()) {
        const id = newId('ntf');
        // One unit per shopper, carried by the shopper's first message (e-mail unless muted).
        if (progress.holdMinutes > 0 && c === 0) {
          holds.push(plannedHold({ notification_id: id, restock_id: restock.id, store_domain: restock.store_domain, subscription_id: subscriber.id, product_id: restock.product_id, variant_id: restock.variant_id, minutes: progress.holdMinutes }, nowIso));
        }
        rows.push({
          id,
          restock_id: restock.id,
          subscription_id: subscriber.id,
          store_domain: restock.store_domain,
          email: subscriber.email,
          email_key: addressKey(subscriber.email),
          product_id: restock.product_id,
          variant_id: restock.variant_id,
          batch,
          position,
          status: 'queued',
          reason: `${CHANNELS[channel.channel].words}: ${whySent(restock, progress.available, progress.settings, size, batch, subscriber.created_at, position, third)}${progress.holdMinutes > 0 && c === 0 ? ` One unit held for this shopper for ${progress.holdMinutes} minutes (the restock is smaller than the waiting list).` : ''}`,
          outcome: null,
          attempts: 0,
          next_attempt_at: nowIso,
          lease_owner: null,
          lease_until: null,
          created_at: nowIso,
          sent_at: null,
          locale: subscriber.locale,
          held_by_plan: 0,
          third_party: third ? 1 : 0,
          kind: 'alert',
          reminder_of: null,
          channel: channel.channel,
          contact_point_id: channel.contactPointId,
          provider_ref: null,
          delivery_status: null,
        });
      }
    });
    const lastOwn = own[own.length - 1];
    const lastThirdParty = thirdParty[thirdParty.length - 1];
    // Fewer waiting than the page asked for: everyone was reached.
    const finished = waiting.length < limit;
    const batchComplete = finished || taken + waiting.length >= size;
    const changes = {
      batches: batch,
      planned: restock.planned + waiting.length,
      cursor_created_at: lastOwn?.created_at ?? restock.cursor_created_at,
      cursor_id: lastOwn?.id ?? restock.cursor_id,
      third_party_cursor_created_at: lastThirdParty?.created_at ?? restock.third_party_cursor_created_at,
      third_party_cursor_id: lastThirdParty?.id ?? restock.third_party_cursor_id,
      status: finished ? 'done' : 'dispatching',
      stop_reason: finished ? WHY.everyoneAlerted : null,
      next_batch_at: progress.nextBatchAt,
      updated_at: nowIso,
    };
    // Between pages the restock stays this worker's, its lease renewed with each page.
    const lease = batchComplete ? {} : { lease_owner: this.owner, lease_until: leaseEnd(this.deps.config.leaseSeconds, now) };
    const queued = await this.deps.store.queueBatch(this.owner, restock, rows, { ...changes, ...lease }, holds);
    // Not queued: the lease ran out and another worker took the restock over; its plan stands.
    if (!queued || batchComplete) {
      this.inProgress.delete(restock.id);
      return;
    }
    this.inProgress.set(restock.id, { ...progress, restock: { ...restock, ...changes }, taken: taken + waiting.length });
  }

  /**
   * Each subscriber's channels: e-mail unless the shopper muted it, and every phone and browser
   * still active. A batch is sized in shoppers (the stock is what they compete for), and each
   * shopper gets one message per channel.
   */
  private async channelsOf(waiting: WaitingSubscriber[]): Promise<(subscriber: WaitingSubscriber) => PlannedChannel[]> {
    const points = await this.deps.alerts.contactPointsOf(waiting.map((subscriber) => subscriber.id));
    const bySubscription = new Map<string, PlannedChannel[]>();
    for (const point of points) {
      if (point.status !== 'active') continue;
      const list = bySubscription.get(point.subscription_id) ?? [];
      list.push({ channel: point.channel, contactPointId: point.id });
      bySubscription.set(point.subscription_id, list);
    }
    return (subscriber) => [...(subscriber.email_muted === 1 ? [] : [EMAIL]), ...(bySubscription.get(subscriber.id) ?? [])];
  }

  private async stop(restock: RestockRow, now: Date, status: string, reason: string): Promise<number> {
    await this.deps.store.releaseRestock(this.owner, restock.id, { status, stop_reason: reason, updated_at: now.toISOString() });
    return 1;
  }
}

function cursor(createdAt: string | null, id: string | null): { createdAt: string; id: string } | null {
  return createdAt && id ? { createdAt, id } : null;
}

/** The "why sent" record a merchant reads in the audit. */
export function whySent(
  restock: RestockRow,
  available: number,
  settings: EffectiveSettings,
  size: number,
  batch: number,
  signedUpAt: string,
  position: number,
  thirdParty = false,
): string {
  const what = restock.variant_id ?? restock.product_id;
  const source = restock.source_ref ? `${restock.source} ${restock.source_ref}` : restock.source;
  const place = thirdParty
    ? `subscriber #${position + 1} in line, made by an agent not bound to the store, so after the store's own subscribers (signed up ${signedUpAt}).`
    : `subscriber #${position + 1} in signup order (signed up ${signedUpAt}).`;
  return `${what} came back in stock at ${restock.store_domain} (detected ${restock.detected_at} from ${source}); batch ${batch}: ${available} in stock × ${settings.batchMultiplier} = up to ${size} alerts; ${place}`;
}
