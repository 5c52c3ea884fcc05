import { addressKey } from '../core/email.ts';
import { newId } from '../core/ids.ts';
import type { EffectiveSettings } from '../stores/settings.ts';
import { leaseEnd } from './leases.ts';
import { planVerdict, WHY } from './rules.ts';
import type { NotificationRow, RestockRow } from './repository.ts';
import type { WaitingSubscriber } from '../alerts/repository.ts';
import type { Channel } from '../core/db/schema.ts';
import type { WorkerDeps } from './worker.ts';

interface PlannedChannel {
  channel: Channel;
  contactPointId: string | null;
}

const EMAIL: PlannedChannel = { channel: 'email', contactPointId: null };

/** How the audit names a channel. */
export const CHANNEL_WORDS: Record<Channel, string> = { email: 'by e-mail', sms: 'by SMS', push: 'by browser push' };

/** How many restocks one turn plans at most, so sending is never starved by planning. */
const RESTOCKS_PER_TURN = 10;

export type PlannerDeps = Pick<WorkerDeps, 'store' | 'inventory' | 'stores' | 'alerts' | 'config'>;

/**
 * Plans restocks into batches, one worker per restock at a time (by lease): the stock re-read,
 * then the next stock × multiplier waiting subscribers queued as one batch, in the same
 * transaction that moves the restock on. A batch takes the store's own subscribers first (the
 * storefront's and its bound agents', in signup order), and fills what is left with third-party
 * ones (made by agents not bound to the store, in signup order): each kind has its own cursor,
 * so a shopper of the store who signs up while a restock runs still goes ahead of third parties
 * not yet planned, and third parties never take the allowance the store's shoppers wait for.
 */
export class BatchPlanner {
  constructor(
    private readonly deps: PlannerDeps,
    private readonly owner: string,
    /** The worker's clock (ms since the epoch). */
    private readonly now: () => number = Date.now,
  ) {}

  /** Plans every restock whose next batch is due, up to RESTOCKS_PER_TURN; resolves to how many. */
  async planDue(): Promise<number> {
    let planned = 0;
    for (let i = 0; i < RESTOCKS_PER_TURN; i++) {
      const now = new Date(this.now());
      const restock = await this.deps.store.claimDueRestock(this.owner, now.toISOString(), leaseEnd(this.deps.config.leaseSeconds, now));
      if (!restock) break;
      planned += await this.planBatch(restock, now);
    }
    return planned;
  }

  private async planBatch(restock: RestockRow, now: Date): Promise<number> {
    const { inventory, stores } = this.deps;
    const { sending, settings } = await stores.sendingProfile(restock.store_domain);
    // A store that stopped sending is not asked for its stock.
    const stock = sending ? await inventory.stockOf(restock.store_domain, restock.product_id, restock.variant_id) : { available: 0, published: false, unlimited: false };
    const verdict = planVerdict(sending, stock, settings);
    if (verdict.kind === 'stop') return this.stop(restock, now, verdict.status, verdict.reason);

    const query = {
      storeDomain: restock.store_domain,
      includeUnowned: restock.include_unowned === 1,
      productId: restock.product_id,
      variantId: restock.variant_id,
      exceptCountries: await inventory.unlistedCountries(restock.store_domain, restock.product_id),
    };
    const own = await this.deps.alerts.waitingSubscribers({
      ...query,
      thirdParty: false,
      after: cursor(restock.cursor_created_at, restock.cursor_id),
      limit: verdict.size,
    });
    const thirdParty =
      own.length < verdict.size
        ? await this.deps.alerts.waitingSubscribers({
            ...query,
            thirdParty: true,
            after: cursor(restock.third_party_cursor_created_at, restock.third_party_cursor_id),
            limit: verdict.size - own.length,
          })
        : [];
    const waiting = [...own, ...thirdParty];
    if (waiting.length === 0) return this.stop(restock, now, 'done', WHY.everyoneAlerted);

    const batch = restock.batches + 1;
    const nowIso = now.toISOString();
    const channels = await this.channelsOf(waiting);
    const rows: NotificationRow[] = waiting.flatMap((subscriber, i) =>
      channels(subscriber).map((channel) => ({
        id: newId('ntf'),
        restock_id: restock.id,
        subscription_id: subscriber.id,
        store_domain: restock.store_domain,
        email: subscriber.email,
        email_key: addressKey(subscriber.email),
        product_id: restock.product_id,
        variant_id: restock.variant_id,
        batch,
        position: restock.planned + i,
        status: 'queued',
        reason: `${CHANNEL_WORDS[channel.channel]}: ${whySent(restock, stock.available, settings, verdict.size, batch, subscriber.created_at, restock.planned + i, i >= own.length)}`,
        outcome: null,
        attempts: 0,
        next_attempt_at: nowIso,
        lease_owner: null,
        lease_until: null,
        created_at: nowIso,
        sent_at: null,
        locale: subscriber.locale,
        held_by_plan: 0,
        third_party: i >= own.length ? 1 : 0,
        kind: 'alert',
        reminder_of: null,
        channel: channel.channel,
        contact_point_id: channel.contactPointId,
        provider_ref: null,
        delivery_status: null,
      })),
    );
    const lastOwn = own[own.length - 1];
    const lastThirdParty = thirdParty[thirdParty.length - 1];
    // Fewer waiting than the batch holds: everyone was reached.
    const finished = waiting.length < verdict.size;
    await this.deps.store.queueBatch(this.owner, restock, rows, {
      batches: batch,
      planned: restock.planned + waiting.length,
      cursor_created_at: lastOwn?.created_at ?? restock.cursor_created_at,
      cursor_id: lastOwn?.id ?? restock.cursor_id,
      third_party_cursor_created_at: lastThirdParty?.created_at ?? restock.third_party_cursor_created_at,
      third_party_cursor_id: lastThirdParty?.id ?? restock.third_party_cursor_id,
      status: finished ? 'done' : 'dispatching',
      stop_reason: finished ? WHY.everyoneAlerted : null,
      next_batch_at: new Date(now.getTime() + settings.batchIntervalSeconds * 1000).toISOString(),
      updated_at: nowIso,
    });
    return 1;
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
