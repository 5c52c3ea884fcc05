import { newId } from '../core/ids.ts';
import type { EffectiveSettings } from '../stores/settings.ts';
import { leaseEnd } from './leases.ts';
import { planVerdict, WHY } from './rules.ts';
import type { NotificationRow, RestockRow } from './repository.ts';
import type { WorkerDeps } from './worker.ts';

/** How many restocks one turn plans at most, so sending is never starved by planning. */
const RESTOCKS_PER_TURN = 10;

export type PlannerDeps = Pick<WorkerDeps, 'store' | 'inventory' | 'stores' | 'alerts' | 'config'>;

/**
 * Plans restocks into batches, one worker per restock at a time (by lease): the stock re-read,
 * then the next stock × multiplier waiting subscribers in signup order queued as one batch, in
 * the same transaction that moves the restock on.
 */
export class BatchPlanner {
  constructor(
    private readonly deps: PlannerDeps,
    private readonly owner: string,
  ) {}

  /** Plans every restock whose next batch is due, up to RESTOCKS_PER_TURN; resolves to how many. */
  async planDue(): Promise<number> {
    let planned = 0;
    for (let i = 0; i < RESTOCKS_PER_TURN; i++) {
      const now = new Date();
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
    const stock = sending ? await inventory.stockOf(restock.store_domain, restock.product_id, restock.variant_id) : { available: 0, published: false };
    const verdict = planVerdict(sending, stock, settings);
    if (verdict.kind === 'stop') return this.stop(restock, now, verdict.status, verdict.reason);

    const waiting = await this.deps.alerts.waitingSubscribers({
      storeDomain: restock.store_domain,
      includeUnowned: restock.include_unowned === 1,
      productId: restock.product_id,
      variantId: restock.variant_id,
      after: restock.cursor_id && restock.cursor_created_at ? { createdAt: restock.cursor_created_at, id: restock.cursor_id } : null,
      limit: verdict.size,
    });
    if (waiting.length === 0) return this.stop(restock, now, 'done', WHY.everyoneAlerted);

    const batch = restock.batches + 1;
    const nowIso = now.toISOString();
    const rows: NotificationRow[] = waiting.map((subscriber, i) => ({
      id: newId('ntf'),
      restock_id: restock.id,
      subscription_id: subscriber.id,
      store_domain: restock.store_domain,
      email: subscriber.email,
      product_id: restock.product_id,
      variant_id: restock.variant_id,
      batch,
      position: restock.planned + i,
      status: 'queued',
      reason: whySent(restock, stock.available, settings, verdict.size, batch, subscriber.created_at, restock.planned + i),
      outcome: null,
      attempts: 0,
      next_attempt_at: nowIso,
      lease_owner: null,
      lease_until: null,
      created_at: nowIso,
      sent_at: null,
      locale: subscriber.locale,
      held_by_plan: 0,
    }));
    const last = waiting[waiting.length - 1]!;
    // Fewer waiting than the batch holds: everyone was reached.
    const finished = waiting.length < verdict.size;
    await this.deps.store.queueBatch(this.owner, restock, rows, {
      batches: batch,
      planned: restock.planned + rows.length,
      cursor_created_at: last.created_at,
      cursor_id: last.id,
      status: finished ? 'done' : 'dispatching',
      stop_reason: finished ? WHY.everyoneAlerted : null,
      next_batch_at: new Date(now.getTime() + settings.batchIntervalSeconds * 1000).toISOString(),
      updated_at: nowIso,
    });
    return 1;
  }

  private async stop(restock: RestockRow, now: Date, status: string, reason: string): Promise<number> {
    await this.deps.store.releaseRestock(this.owner, restock.id, { status, stop_reason: reason, updated_at: now.toISOString() });
    return 1;
  }
}

/** The "why sent" record a merchant reads in the audit. */
export function whySent(restock: RestockRow, available: number, settings: EffectiveSettings, size: number, batch: number, signedUpAt: string, position: number): string {
  const what = restock.variant_id ?? restock.product_id;
  const source = restock.source_ref ? `${restock.source} ${restock.source_ref}` : restock.source;
  return (
    `${what} came back in stock at ${restock.store_domain} (detected ${restock.detected_at} from ${source}); ` +
    `batch ${batch}: ${available} in stock × ${settings.batchMultiplier} = up to ${size} alerts; ` +
    `subscriber #${position + 1} in signup order (signed up ${signedUpAt}).`
  );
}
