import { addressKey } from '../core/email.ts';
import { eventId } from '../core/events.ts';
import { newId } from '../core/ids.ts';
import type { NotificationLeases } from './leases.ts';
import { powerOfTwoLists } from './list-sizes.ts';
import { reportSettled } from './outcome-metrics.ts';
import type { Defer, Failed, Retry, Skip } from './rules.ts';
import type { ClaimedNotification, NotificationRow } from './repository.ts';
import type { WorkerDeps } from './worker.ts';

/** What became of a leased alert, as the ledger records it. */
export type Outcome = { kind: 'sent'; reminderDelayHours?: number | null; providerRef?: string } | Skip | Defer | Retry | Failed;
type Unsent = Exclude<Outcome, { kind: 'sent' }>;

/**
 * Settled outcomes are written in groups this large, or after FLUSH_EVERY_MS, whichever first.
 * A power of two, so a full group is one list of each statement (list-sizes.ts).
 */
const FLUSH_SIZE = 256;
const FLUSH_EVERY_MS = 100;

export type SettlerDeps = Pick<WorkerDeps, 'store' | 'alerts' | 'dispatch' | 'log' | 'events' | 'metrics'>;

/**
 * Collects outcomes and writes them in groups: sent alerts in one statement per group, their
 * subscriptions moved to notified in the same commit. Until written, an alert stays leased; a
 * crash before that re-sends at most what was leased.
 */
export class Settler {
  private sent: Array<{ row: ClaimedNotification; reminderDelayHours: number | null; providerRef?: string }> = [];
  private others: Array<{ row: ClaimedNotification; outcome: Unsent }> = [];
  private timer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> = Promise.resolve();

  constructor(
    private readonly deps: SettlerDeps,
    private readonly owner: string,
    private readonly leases: NotificationLeases,
    /** The worker's clock (ms since the epoch): when outcomes are recorded. */
    private readonly now: () => number = Date.now,
  ) {}

  record(row: ClaimedNotification, outcome: Outcome): void {
    if (outcome.kind === 'sent') this.sent.push({ row, reminderDelayHours: outcome.reminderDelayHours ?? null, ...(outcome.providerRef ? { providerRef: outcome.providerRef } : {}) });
    else this.others.push({ row, outcome });
    if (this.sent.length + this.others.length >= FLUSH_SIZE) void this.flush();
    else this.timer ??= setTimeout(() => void this.flush(), FLUSH_EVERY_MS);
  }

  /** Writes what was recorded; flushes run one after another so their order holds. */
  flush(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    const sent = this.sent;
    const others = this.others;
    this.sent = [];
    this.others = [];
    this.flushing = this.flushing
      .then(() => this.write(sent, others))
      .catch((err) => {
        // The rows stay leased but are no longer renewed: when the lease runs out they are
        // retaken and sent again, rather than lost.
        this.deps.log.error({ err }, 'recording alert outcomes failed');
      })
      .finally(() => this.leases.drop([...sent.map(({ row }) => row.id), ...others.map(({ row }) => row.id)]));
    return this.flushing;
  }

  private async write(settled: Array<{ row: ClaimedNotification; reminderDelayHours: number | null; providerRef?: string }>, others: Array<{ row: ClaimedNotification; outcome: Unsent }>): Promise<void> {
    if (settled.length === 0 && others.length === 0) return;
    const now = new Date(this.now()).toISOString();
    const { store, alerts, dispatch } = this.deps;
    const sent = settled.map(({ row }) => row);
    // A reminder has done its work once sent: only first alerts notify subscriptions.
    const alertsSent = sent.filter((row) => row.kind === 'alert');
    const notify = alertsSent.map((row) => row.subscription_id);
    const updates = others.map(({ row, outcome }) => {
      if (outcome.kind === 'skipped' && outcome.notified) notify.push(row.subscription_id);
      return { id: row.id, changes: ledgerChanges(row, outcome) };
    });
    // One alert per address per restock: it fulfils every waiting subscription of the address
    // for the product, whoever made it, not only the one it was queued for. A text or a push
    // reaches the subscription's own shopper only (an address's other subscriptions are not hers to end by phone).
    const fulfilled = alertsSent.filter((row) => row.channel === 'email').map((row) => ({ storeDomain: row.store_domain, productId: row.product_id, variantId: row.variant_id, emailKey: addressKey(row.email) }));
    const reminders = settled.flatMap(({ row, reminderDelayHours }) => (reminderDelayHours ? [reminderOf(row, reminderDelayHours, now)] : []));
    const providerRefs = settled.flatMap(({ row, providerRef }) => (providerRef ? [{ id: row.id, ref: providerRef }] : []));
    await store.settle(this.owner, { ids: sent.map((row) => row.id), at: now, providerRefs }, updates, async (trx) => {
      for (const list of powerOfTwoLists(notify)) await alerts.markNotified(trx, list);
      for (const list of powerOfTwoLists(fulfilled)) await alerts.markAddressesNotified(trx, list);
      // Queued with the alert's record: a reminder is never lost to a crash between the two.
      await store.queueReminders(trx, reminders);
    });
    await this.announceSent(sent, now);
    // Counted once written: a group whose commit failed is retaken and counted then.
    if (this.deps.metrics?.enabled) await reportSettled(this.deps.metrics, store, [...sent.map((row) => ({ row, outcome: { kind: 'sent' } as const })), ...others], now);
    for (const { row, outcome } of others) {
      if (outcome.kind !== 'failed') continue;
      if (outcome.suppress && row.channel === 'email') await dispatch.suppress(row.store_domain, row.email, 'bounce', outcome.why);
      if (outcome.removeContact && row.contact_point_id) await alerts.removeContactPoint(row.contact_point_id, outcome.why);
    }
  }

  /**
   * `alert.sent` for the store's webhooks, after the commit, in one announcement per settled
   * group. A crash between the two loses the events, never the alerts: the ledger stays the
   * record of what was sent.
   */
  private async announceSent(sent: ClaimedNotification[], at: string): Promise<void> {
    if (sent.length === 0) return;
    const events = sent.map((row) => ({
      storeDomain: row.store_domain,
      type: 'alert.sent' as const,
      id: eventId('alert.sent', row.id),
      occurredAt: at,
      data: { alertId: row.id, kind: row.kind, channel: row.channel, restockId: row.restock_id, subscriptionId: row.subscription_id, productId: row.product_id, variantId: row.variant_id, email: row.email, sentAt: at },
    }));
    try {
      // The sinks look up each event's store and subscription: lists of a few sizes (list-sizes.ts).
      for (const list of powerOfTwoLists(events)) await this.deps.events.announce(...list);
    } catch (err) {
      this.deps.log.warn({ err, alerts: sent.length }, 'announcing alert.sent failed');
    }
  }
}

/**
 * The reminder of an alert just sent: the same subscription and restock, due `hours` later. The
 * sending rules decide then whether it goes (still sellable, not ordered, not unsubscribed).
 */
export function reminderOf(alert: ClaimedNotification, hours: number, sentAt: string): NotificationRow {
  return {
    ...alert,
    id: newId('ntf'),
    kind: 'reminder',
    reminder_of: alert.id,
    status: 'queued',
    reason: `a reminder ${hours} h after the alert of ${sentAt}, sent only if the product is still sellable, the shopper has not ordered it and has not unsubscribed`,
    outcome: null,
    attempts: 0,
    next_attempt_at: new Date(Date.parse(sentAt) + hours * 3600_000).toISOString(),
    provider_ref: null,
    delivery_status: null,
    lease_owner: null,
    lease_until: null,
    created_at: sentAt,
    sent_at: null,
    held_by_plan: 0,
  };
}

/** The ledger columns an outcome other than sent writes. */
export function ledgerChanges(row: Pick<NotificationRow, 'attempts'>, outcome: Unsent): Partial<NotificationRow> {
  switch (outcome.kind) {
    case 'skipped':
      return { status: 'skipped', outcome: outcome.why, held_by_plan: 0 };
    case 'deferred':
      // Waiting (for the frequency cap, or the plan's allowance) is not an attempt.
      return { status: 'queued', next_attempt_at: outcome.until, attempts: row.attempts - 1, outcome: outcome.why, held_by_plan: outcome.heldByPlan ? 1 : 0 };
    case 'retry':
      return { status: 'queued', next_attempt_at: outcome.at, outcome: `will retry: ${outcome.why}`, held_by_plan: 0 };
    case 'failed':
      return { status: 'failed', outcome: outcome.why, held_by_plan: 0 };
  }
}
