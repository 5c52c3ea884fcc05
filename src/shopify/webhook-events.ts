import { isoAfter, nowIso } from '../core/clock.ts';
import type { Database } from '../core/db/database.ts';
import { lockRows } from '../core/db/locking.ts';
import type { ShopifyWebhookEventsTable } from '../core/db/schema.ts';

export type WebhookEventRow = ShopifyWebhookEventsTable;

export interface NewWebhookEvent {
  eventId: string;
  storeDomain: string;
  topic: string;
  webhookId: string | null;
  payload: string;
  triggeredAt: string | null;
  /** Topics we do not act on are kept as already done, so the record says they were seen. */
  status: 'queued' | 'done';
}

/**
 * The queue of verified Shopify deliveries; the only code that touches `shopify_webhook_events`.
 * A row is keyed by the event id, so Shopify's retries of one event collapse into one row.
 */
export class WebhookEventRepository {
  constructor(private readonly database: Database) {}

  /** True when the event is new; false when an earlier delivery of it is already recorded. */
  async insert(event: NewWebhookEvent): Promise<boolean> {
    const now = nowIso();
    const result = await this.database.writeStatement((db) =>
      db
        .insertInto('shopify_webhook_events')
        .values({
          event_id: event.eventId,
          store_domain: event.storeDomain,
          topic: event.topic,
          webhook_id: event.webhookId,
          payload: event.payload,
          triggered_at: event.triggeredAt,
          status: event.status,
          attempts: 0,
          lease_until: null,
          error: null,
          received_at: now,
          processed_at: event.status === 'done' ? now : null,
        })
        .onConflict((oc) => oc.column('event_id').doNothing())
        .executeTakeFirst(),
    );
    return Number(result.numInsertedOrUpdatedRows ?? 0) > 0;
  }

  /**
   * Leases up to `limit` events for `leaseMs`: queued ones whose back-off has passed, and ones a
   * worker took but never finished (it crashed, or the lease ran out). Each claim counts as an
   * attempt, so an event that kills its worker still runs out of attempts.
   */
  claim(limit: number, leaseMs: number): Promise<WebhookEventRow[]> {
    const now = nowIso();
    const leaseUntil = isoAfter(leaseMs);
    return this.database.write(async (trx) => {
      const due = trx
        .selectFrom('shopify_webhook_events')
        .select('event_id')
        .where((eb) =>
          eb.or([
            eb.and([eb('status', '=', 'queued'), eb.or([eb('lease_until', 'is', null), eb('lease_until', '<=', now)])]),
            eb.and([eb('status', '=', 'processing'), eb('lease_until', '<=', now)]),
          ]),
        )
        .orderBy('received_at')
        .orderBy('event_id')
        .limit(limit);
      // Other workers skip the rows this one is taking instead of queueing behind them.
      const ids = (await lockRows(this.database, due, { skipLocked: true }).execute()).map((row) => row.event_id);
      if (ids.length === 0) return [];
      return trx
        .updateTable('shopify_webhook_events')
        .set((eb) => ({ status: 'processing', lease_until: leaseUntil, attempts: eb('attempts', '+', 1) }))
        .where('event_id', 'in', ids)
        .returningAll()
        .execute();
    });
  }

  /** `dropPayload`: the payload carried personal data that must not outlive its handling. */
  async markDone(claimed: WebhookEventRow, options: { dropPayload?: boolean } = {}): Promise<void> {
    await this.finish(claimed, {
      status: 'done',
      lease_until: null,
      error: null,
      processed_at: nowIso(),
      ...(options.dropPayload ? { payload: '{}' } : {}),
    });
  }

  /** Back to the queue, not to be taken again before `retryAt`. */
  async retryLater(claimed: WebhookEventRow, retryAt: string, error: string): Promise<void> {
    await this.finish(claimed, { status: 'queued', lease_until: retryAt, error });
  }

  async markFailed(claimed: WebhookEventRow, error: string): Promise<void> {
    await this.finish(claimed, { status: 'failed', lease_until: null, error, processed_at: nowIso() });
  }

  /** `shop/redact`: the store's other events go too (their payloads describe its products and customers). */
  async forgetStore(storeDomain: string, exceptEventId: string): Promise<void> {
    await this.database.writeStatement((db) =>
      db.deleteFrom('shopify_webhook_events').where('store_domain', '=', storeDomain).where('event_id', '!=', exceptEventId).execute(),
    );
  }

  /**
   * Drops settled events received before `before`, at most `limit` of them. Done events are
   * kept for a while because their ids are what recognises Shopify's late retries.
   */
  async prune(status: 'done' | 'failed', before: string, limit: number): Promise<number> {
    const result = await this.database.writeStatement((db) =>
      db
        .deleteFrom('shopify_webhook_events')
        .where(
          'event_id',
          'in',
          db.selectFrom('shopify_webhook_events').select('event_id').where('status', '=', status).where('received_at', '<', before).limit(limit),
        )
        .executeTakeFirst(),
    );
    return Number(result.numDeletedRows);
  }

  find(eventId: string): Promise<WebhookEventRow | undefined> {
    return this.database.db.selectFrom('shopify_webhook_events').selectAll().where('event_id', '=', eventId).executeTakeFirst();
  }

  private async finish(claimed: WebhookEventRow, changes: Partial<WebhookEventRow>): Promise<void> {
    await this.database.writeStatement((db) =>
      db
        .updateTable('shopify_webhook_events')
        .set(changes)
        .where('event_id', '=', claimed.event_id)
        // The lease is the claim's fence: a worker whose lease ran out and was taken over must
        // not overwrite the outcome of the one that took over.
        .where('status', '=', 'processing')
        .where('lease_until', '=', claimed.lease_until)
        .execute(),
    );
  }
}
