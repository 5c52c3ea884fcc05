import { nowIso } from '../core/clock.ts';
import { normaliseEmail } from '../core/email.ts';
import { newId } from '../core/ids.ts';
import type { DetectedRestock, RestockSink } from '../inventory/service.ts';
import type { DispatchStore, NotificationRow, RestockRow, SuppressionRow } from './store.ts';

/** How the ledger marks alerts held back by the store's plan (the alert queue counts them). */
export const OVER_ALLOWANCE = 'held by the plan: ';

export type SuppressionReason = 'bounce' | 'complaint' | 'manual';

/**
 * Restocks and the alert ledger as the rest of the service sees them: inventory starts
 * restocks here, the API reads queue lengths and the "why sent" audit, and suppressions are
 * kept per store. The sending itself is the worker's (worker.ts).
 */
export class DispatchService implements RestockSink {
  private readonly listeners = new Set<() => void>();

  constructor(private readonly store: DispatchStore) {}

  async startRestock(detected: DetectedRestock): Promise<{ restockId: string; created: boolean }> {
    const now = nowIso();
    const { restock, created } = await this.store.insertRestock({
      id: newId('rst'),
      store_domain: detected.storeDomain,
      product_id: detected.productId,
      variant_id: detected.variantId,
      available: detected.available,
      source: detected.source.kind,
      source_ref: detected.source.ref,
      include_unowned: detected.source.verified ? 1 : 0,
      status: 'dispatching',
      batches: 0,
      planned: 0,
      cursor_created_at: null,
      cursor_id: null,
      next_batch_at: now,
      lease_owner: null,
      lease_until: null,
      stop_reason: null,
      detected_at: now,
      updated_at: now,
    });
    if (created) for (const listener of this.listeners) listener();
    return { restockId: restock.id, created };
  }

  /** Called when new work arrives, so an in-process worker starts at once instead of at its next poll. */
  onWork(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  async suppress(storeDomain: string, email: string, reason: SuppressionReason, detail: string | null): Promise<SuppressionRow> {
    const row: SuppressionRow = { store_domain: storeDomain, email: normaliseEmail(email), reason, detail, created_at: nowIso() };
    await this.store.suppress(row);
    return row;
  }

  unsuppress(storeDomain: string, email: string): Promise<boolean> {
    return this.store.unsuppress(storeDomain, normaliseEmail(email));
  }

  listSuppressions(storeDomain: string, limit = 500): Promise<SuppressionRow[]> {
    return this.store.listSuppressions(storeDomain, limit);
  }

  countSuppressions(storeDomain: string): Promise<number> {
    return this.store.countSuppressions(storeDomain);
  }

  listRestocks(storeDomain: string, limit = 100): Promise<RestockRow[]> {
    return this.store.listRestocks(storeDomain, limit);
  }

  listNotifications(filter: { storeDomain: string; status?: string; restockId?: string; limit?: number }): Promise<NotificationRow[]> {
    return this.store.listNotifications({ ...filter, limit: filter.limit ?? 100 });
  }

  /** One alert of the store's ledger, with the restock that caused it (the "why sent" audit). */
  async auditNotification(storeDomain: string, id: string): Promise<{ notification: NotificationRow; restock: RestockRow | undefined } | undefined> {
    const notification = await this.store.findNotification(storeDomain, id);
    if (!notification) return undefined;
    return { notification, restock: await this.store.findRestock(storeDomain, notification.restock_id) };
  }

  sentPerDay(storeDomain: string, since: string): Promise<Map<string, number>> {
    return this.store.sentPerDay(storeDomain, since);
  }

  /** Alerts per ledger status (queued, sending, sent, skipped, failed). */
  ledgerCounts(storeDomain: string): Promise<Record<string, number>> {
    return this.store.countsByStatus(storeDomain);
  }

  /** Alerts waiting because the store's plan allows no more this period (or needs its own SMTP). */
  heldByPlan(storeDomain: string): Promise<number> {
    return this.store.countQueuedWith(storeDomain, OVER_ALLOWANCE);
  }

  eraseCustomer(storeDomain: string, email: string): Promise<number> {
    return this.store.eraseCustomer(storeDomain, normaliseEmail(email));
  }

  eraseStore(storeDomain: string): Promise<void> {
    return this.store.eraseStore(storeDomain);
  }
}
