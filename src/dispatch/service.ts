import type { DeliveryReport } from '../core/channels.ts';
import { nowIso } from '../core/clock.ts';
import { inPages } from '../core/db/pages.ts';
import { addressKey, normaliseEmail } from '../core/email.ts';
import type { WaitingCount } from '../alerts/service.ts';
import { ownStore, type Caller } from '../core/http/caller.ts';
import { newId } from '../core/ids.ts';
import type { OutboxMessage } from '../core/mail/outbox-repository.ts';
import { NotFound } from '../core/problems.ts';
import type { DetectedRestock, RestockSink } from '../inventory/service.ts';
import type { ChangeBus } from '../core/changes/bus.ts';
import type { AlertQueue } from './schemas.ts';
import type { DispatchRepository, NotificationRow, RestockRow, SentNotificationRow, SuppressionRow } from './repository.ts';
import type { UnitHoldRepository } from './holds.ts';

// The contract a platform that can hold stock fulfils (src/platform.ts), public for the platforms' folders.
export type { HoldRequest, UnitHold, UnitHolds } from './holds.ts';

/** What other modules read of the ledger. */
export type { NotificationRow, RestockRow, SentNotificationRow, SuppressionRow } from './repository.ts';

/** How an alert's reason in the ledger begins when the store's plan holds it back. */
export const OVER_ALLOWANCE = 'held by the plan: ';

export type SuppressionReason = 'bounce' | 'complaint' | 'manual';

/** Who waits for a restock, from the alerts feature: the alert queue's first column. */
export interface WaitingDemand {
  waitingCounts(storeDomain: string): Promise<WaitingCount[]>;
}

/** The local outbox's mail per store (embedded mode), read for the store's own callers. */
export interface StoreOutbox {
  listForStore(storeDomain: string, limit: number): Promise<OutboxMessage[]>;
  findForStore(storeDomain: string, id: string): Promise<OutboxMessage | undefined>;
}

export interface DispatchServiceDeps {
  waiting: WaitingDemand;
  outbox: StoreOutbox;
  /** The units held for alerts (docs/dispatch.md, "Reserved units"). */
  holds?: UnitHoldRepository;
  /** Where a new restock is announced to the workers of other processes (`restock worker`), which otherwise find it at their next poll. */
  changes?: ChangeBus;
}

/** A restock was started; the key is its id. Heard by every process's worker, which wakes. */
const RESTOCK_WORK = 'restock-work';

export interface NotificationFilter {
  status?: string;
  restockId?: string;
  limit?: number;
}

/**
 * Restocks and the alert ledger as the rest of the service sees them: inventory starts
 * restocks here, the API reads queue lengths and the "why sent" audit, and suppressions are
 * kept per store. The sending itself is the worker's (worker.ts).
 *
 * Methods that take a `Caller` serve the API, MCP and the dashboard and decide tenancy
 * themselves; those that take a bare store domain are for the service's own work (the worker,
 * webhooks), which names the store from its own records.
 */
export class DispatchService implements RestockSink {
  private readonly listeners = new Set<() => void>();

  constructor(
    private readonly store: DispatchRepository,
    private readonly deps: DispatchServiceDeps,
  ) {
    // A lost channel may have lost an announcement: waking costs one look for work.
    const wake = () => this.announceWork();
    deps.changes?.listen(RESTOCK_WORK, { changed: wake, reset: wake });
  }

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
      third_party_cursor_created_at: null,
      third_party_cursor_id: null,
      next_batch_at: now,
      lease_owner: null,
      lease_until: null,
      stop_reason: null,
      detected_at: now,
      updated_at: now,
    });
    if (created) this.announceRestock(restock.id);
    return { restockId: restock.id, created };
  }

  /**
   * Wakes the workers: this process's at once (the bus's own listeners hear a publication before
   * it is sent), every other process's when the bus carries it. A publication that fails leaves
   * those to their next poll.
   */
  private announceRestock(id: string): void {
    if (!this.deps.changes) return this.announceWork();
    this.deps.changes.publish(RESTOCK_WORK, [id]).catch(() => undefined);
  }

  private announceWork(): void {
    for (const listener of this.listeners) listener();
  }

  /** Called when new work arrives, so an in-process worker starts at once instead of at its next poll. */
  onWork(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** getAlertQueue: who waits for what, the ledger per status, restocks in progress. */
  async readAlertQueue(caller: Caller, domain: string): Promise<AlertQueue> {
    const store = ownStore(caller, domain);
    const [waiting, counts, heldByPlan, restocks] = await Promise.all([
      this.deps.waiting.waitingCounts(store),
      this.store.countsByStatus(store),
      this.store.countHeldByPlan(store),
      this.store.listRestocks(store, 50),
    ]);
    return {
      waiting,
      totalWaiting: waiting.reduce((sum, entry) => sum + entry.waiting, 0),
      alerts: { queued: 0, sending: 0, sent: 0, skipped: 0, failed: 0, ...counts },
      heldByPlan,
      restocks: restocks.map(presentRestock),
    };
  }

  /** suppressAddress: the store's agent (or owner) stops mail to an address. */
  async suppressAddress(caller: Caller, domain: string, email: string, reason: SuppressionReason, detail: string | null): Promise<SuppressionRow> {
    return this.suppress(ownStore(caller, domain), email, reason, detail);
  }

  /**
   * A bounce or complaint the service learned of itself (the worker, a webhook). It holds for
   * every case of the address (`addressKey`); the address is kept as reported.
   */
  async suppress(storeDomain: string, email: string, reason: SuppressionReason, detail: string | null): Promise<SuppressionRow> {
    const row: SuppressionRow = { store_domain: storeDomain, email: normaliseEmail(email), email_key: addressKey(email), reason, detail, created_at: nowIso() };
    await this.store.suppress(row);
    return row;
  }

  /** unsuppressAddress: false when the address was not suppressed. */
  async unsuppressAddress(caller: Caller, domain: string, email: string): Promise<boolean> {
    return this.store.unsuppress(ownStore(caller, domain), addressKey(email));
  }

  /** listSuppressions, for a caller bound to the store. */
  async suppressionsOf(caller: Caller, domain: string, limit = 500): Promise<SuppressionRow[]> {
    return this.listSuppressions(ownStore(caller, domain), limit);
  }

  listSuppressions(storeDomain: string, limit = 500): Promise<SuppressionRow[]> {
    return this.store.listSuppressions(storeDomain, limit);
  }

  async countSuppressions(caller: Caller, domain: string): Promise<number> {
    return this.store.countSuppressions(ownStore(caller, domain));
  }

  async listRestocks(caller: Caller, domain: string, limit = 100): Promise<RestockRow[]> {
    return this.store.listRestocks(ownStore(caller, domain), limit);
  }

  /** listNotifications: the store's alert ledger, newest first. */
  async listNotifications(caller: Caller, domain: string, filter: NotificationFilter = {}): Promise<NotificationRow[]> {
    return this.store.listNotifications({ ...filter, storeDomain: ownStore(caller, domain), limit: filter.limit ?? 100 });
  }

  /** One alert of the store's ledger, with the restock that caused it (the "why sent" audit). */
  async auditNotification(caller: Caller, domain: string, id: string): Promise<{ notification: NotificationRow; restock: RestockRow | undefined } | undefined> {
    const store = ownStore(caller, domain);
    const notification = await this.store.findNotification(store, id);
    if (!notification) return undefined;
    return { notification, restock: await this.store.findRestock(store, notification.restock_id) };
  }

  /** An alert (or reminder) that went out, by id: what its click link leads to. */
  /** Where a click on an alert lands while a unit is held for it: that unit's checkout; undefined when none is held now. */
  async heldCheckoutUrl(alertId: string): Promise<string | undefined> {
    const hold = await this.deps.holds?.byNotification(alertId);
    if (hold?.status !== 'held' || !hold.checkout_url || !hold.expires_at) return undefined;
    return Date.parse(hold.expires_at) > Date.now() ? hold.checkout_url : undefined;
  }

  async sentNotification(id: string): Promise<NotificationRow | undefined> {
    const row = await this.store.notificationById(id);
    return row?.status === 'sent' ? row : undefined;
  }

  /** What the store sent one address about these products: the alerts an order of theirs may be credited to. */
  sentToAddressFor(storeDomain: string, email: string, productIds: string[]): Promise<SentNotificationRow[]> {
    return productIds.length === 0 ? Promise.resolve([]) : this.store.sentToAddressFor(storeDomain, addressKey(email), productIds);
  }

  /** What was sent for one subscription, oldest first, at most `limit`: its news, read once its reader was found to see it. */
  sentForSubscription(subscriptionId: string, limit: number): Promise<Array<SentNotificationRow & Pick<NotificationRow, 'restock_id'>>> {
    return this.store.sentForSubscription(subscriptionId, limit);
  }

  /** Alerts sent by the store in [from, to). */
  sentBetween(storeDomain: string, from: string, to: string): Promise<number> {
    return this.store.countSent(storeDomain, from, to);
  }

  /** Alerts and reminders sent from the UTC day `fromDay` on, per day, channel and kind. */
  async sentDaily(caller: Caller, domain: string, fromDay: string) {
    return this.store.sentDaily(ownStore(caller, domain), fromDay);
  }

  /** Alerts and reminders sent from `fromDay` on for these products. */
  async sentForProducts(caller: Caller, domain: string, fromDay: string, productIds: string[]) {
    return this.store.sentForProducts(ownStore(caller, domain), fromDay, productIds);
  }

  /** The first `limit` products (id order) alerts went out for from `fromDay` on. */
  async productsSentSince(caller: Caller, domain: string, fromDay: string, limit: number) {
    return this.store.productsSentSince(ownStore(caller, domain), fromDay, limit);
  }

  /** The store's whole ledger, oldest first, read a page at a time (exports). Tenancy is decided at the call, before anything streams. */
  ledgerRows(caller: Caller, domain: string): AsyncGenerator<NotificationRow> {
    const store = ownStore(caller, domain);
    return inPages<NotificationRow, string>((after, limit) => this.store.ledgerPage(store, after, limit), (row) => row.id);
  }

  /** Alerts per ledger status (queued, sending, sent, skipped, failed). */
  async ledgerCounts(caller: Caller, domain: string): Promise<Record<string, number>> {
    return this.store.countsByStatus(ownStore(caller, domain));
  }

  /** Alerts waiting because the store's plan allows no more this period (or needs its own SMTP). */
  async heldByPlan(caller: Caller, domain: string): Promise<number> {
    return this.store.countHeldByPlan(ownStore(caller, domain));
  }

  /** listOutbox: the store's mail kept in the local outbox, newest first. */
  async listOutbox(caller: Caller, domain: string, limit: number): Promise<OutboxMessage[]> {
    return this.deps.outbox.listForStore(ownStore(caller, domain), limit);
  }

  async outboxMessage(caller: Caller, domain: string, id: string): Promise<OutboxMessage> {
    const store = ownStore(caller, domain);
    const message = await this.deps.outbox.findForStore(store, id);
    if (!message) throw new NotFound(`No message ${id} in the outbox of ${store}.`);
    return message;
  }

  /**
   * A contact channel's delivery report (for SMS, Twilio's status callback, verified by the SMS
   * feature): the ledger keeps the last one beside `sent`, which means only that the provider
   * accepted it.
   */
  recordDelivery(report: DeliveryReport): Promise<boolean> {
    return this.store.recordDelivery(report);
  }

  eraseCustomer(storeDomain: string, email: string): Promise<number> {
    return this.store.eraseCustomer(storeDomain, addressKey(email));
  }

  eraseStore(storeDomain: string): Promise<void> {
    return this.store.eraseStore(storeDomain);
  }
}

function presentRestock(row: RestockRow): AlertQueue['restocks'][number] {
  return {
    restockId: row.id,
    productId: row.product_id,
    variantId: row.variant_id,
    status: row.status as 'dispatching',
    availableAtDetection: row.available,
    batches: row.batches,
    planned: row.planned,
    detectedAt: row.detected_at,
    nextBatchAt: row.status === 'dispatching' ? row.next_batch_at : null,
    stopReason: row.stop_reason,
    source: row.source,
  };
}
