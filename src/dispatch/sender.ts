import { composeNotification, type NotificationLinks, type Outgoing } from './compose.ts';
import { groupBy, loadClaim, type StoreClaim } from './context.ts';
import { Handover, MAILS_PER_CONNECTION, MAX_OUTSTANDING_SENDS } from './handover.ts';
import { NotificationLeases } from './leases.ts';
import { decideGroup, failureVerdict, firstPartyFirst, withinAllowance } from './rules.ts';
import { Settler } from './settler.ts';
import type { ClaimedNotification } from './repository.ts';
import type { WorkerDeps } from './worker.ts';

const SEND_LIMIT_MS = 5 * 60_000;

/**
 * Sends the ledger's due alerts: leases them, checks each against the present (rules.ts, on
 * what context.ts read), counts those that may go against the store's plan, and streams them
 * through the transport while the settler records outcomes in groups.
 */
export class NotificationSender {
  constructor(
    private readonly deps: WorkerDeps,
    private readonly owner: string,
    /** Once true, nothing more is claimed or handed to the transport; what is in flight finishes. */
    private readonly stopping: () => boolean,
    /** The worker's clock (ms since the epoch): what is due, the rules' now, retry times. */
    private readonly now: () => number = Date.now,
    /** Queues the next page of the batches being planned; resolves to how many pages. */
    private readonly refill: () => Promise<number> = async () => 0,
  ) {}

  private readonly links: NotificationLinks = {
    click: (row) => this.deps.followUp.clickUrl(row.store_domain, row.id),
    mail: (row) => ({ unsubscribeUrl: this.deps.alerts.unsubscribeUrl(row.subscription_id), manageUrl: this.deps.alerts.shopperPageUrl(row.subscription_id) }),
    stop: (row) => this.deps.alerts.contactPointStopUrl(row.contact_point_id!),
  };

  /**
   * Sends every alert due now. Alerts stream through the transport (its pool keeps every
   * connection busy) while outcomes are written in groups; more are claimed once fewer than
   * half the lease window remain unsettled.
   */
  async sendDue(): Promise<number> {
    const { config, log, store } = this.deps;
    const leases = new NotificationLeases(store, this.owner, config.leaseSeconds, log, this.now);
    const settler = new Settler(this.deps, this.owner, leases, this.now);
    const handover = new Handover((item) => this.sendOne(item, settler), () => !this.stopping(), mailWindow(config.smtpPoolSize));
    let handled = 0;
    let exhausted = false;
    const stopRenewing = leases.keepRenewed();
    try {
      for (;;) {
        if (!this.stopping() && !exhausted && leases.count < config.claimSize / 2) {
          const wanted = config.claimSize - leases.count;
          const claimed = await this.claim(leases, wanted);
          // The queue runs low: the next page of a batch is queued while these still go out.
          const refilled = claimed.length < wanted && !this.stopping() && (await this.refill()) > 0;
          exhausted = claimed.length === 0 && !refilled;
          handled += claimed.length;
          if (claimed.length > 0) handover.add(await this.prepare(claimed, settler));
          if (!exhausted) continue;
        }
        // Checked before every wait: sends that ended during a claim woke no one.
        if (handover.done) break;
        await handover.nextAnswer();
      }
    } finally {
      // Leases stay renewed until the alerts in flight are answered and recorded.
      const unsent = await handover.close();
      await settler.flush();
      stopRenewing();
      await this.giveBack(unsent, leases);
    }
    return handled;
  }

  private async claim(leases: NotificationLeases, limit: number): Promise<ClaimedNotification[]> {
    const now = new Date(this.now());
    const claimed = await this.deps.store.claimNotifications(this.owner, now.toISOString(), leases.until(now), limit);
    leases.hold(claimed);
    return claimed;
  }

  /**
   * Decides on a claimed group before anything goes out and settles what does not go; counts
   * the rest against each store's plan and returns them written, in queue order.
   */
  private async prepare(claimed: ClaimedNotification[], settler: Settler): Promise<Outgoing[]> {
    const outgoing: Outgoing[] = [];
    for (const claim of await loadClaim(this.deps, claimed, new Date(this.now()))) {
      const ready: ClaimedNotification[] = [];
      for (const { row, verdict } of decideGroup(claim.rows, claim.facts)) {
        if (verdict.kind === 'send') ready.push(row);
        else settler.record(row, verdict);
      }
      if (ready.length > 0) outgoing.push(...(await this.countAgainstPlan(claim, ready, settler)));
    }
    return outgoing;
  }

  /** What the store's plan allows goes out, its own shoppers first; the rest waits, visibly, never dropped. */
  private async countAgainstPlan(claim: StoreClaim, ready: ClaimedNotification[], settler: Settler): Promise<Outgoing[]> {
    const grant = await this.deps.quota.reserveNotifications(claim.storeDomain, ready.length, claim.ownMailProvider);
    const { send, held } = withinAllowance(firstPartyFirst(ready), grant);
    for (const { item, verdict } of held) settler.record(item, verdict);
    return send.map((row) => composeNotification(row, claim, this.links, grant.periodStart, this.deps.holds));
  }

  private async sendOne(item: Outgoing, settler: Settler): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    // Leases of alerts in flight are renewed, so a send that never settles would hold its alert
    // forever; past this limit it counts as a transient failure and is retried.
    const limit = new Promise<never>((_, reject) => {
      const who = item.row.channel === 'email' ? 'the mail server' : 'the provider';
      timer = setTimeout(() => reject(new Error(`no answer from ${who} within ${SEND_LIMIT_MS / 1000} s`)), SEND_LIMIT_MS);
    });
    try {
      const receipt = await Promise.race([item.deliver(), limit]);
      settler.record(item.row, { kind: 'sent', reminderDelayHours: item.reminderDelayHours, ...(receipt.providerRef ? { providerRef: receipt.providerRef } : {}) });
    } catch (err) {
      settler.record(item.row, failureVerdict(item.row.attempts, err, this.deps.config, this.now(), Math.random()));
      // Not sent: its place in the allowance goes back (a retry counts it again).
      await this.release(item.row.store_domain, item.quotaPeriod, 1);
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * Alerts a stopping worker never handed to the transport: their places in the allowance go
   * back first, then their leases, so whichever worker takes them next counts them once.
   */
  private async giveBack(unsent: Outgoing[], leases: NotificationLeases): Promise<void> {
    if (unsent.length === 0) return;
    for (const items of groupBy(unsent, (item) => `${item.row.store_domain}\n${item.quotaPeriod}`).values()) {
      await this.release(items[0]!.row.store_domain, items[0]!.quotaPeriod, items.length);
    }
    await leases.giveBack(unsent.map((item) => item.row.id));
  }

  private async release(storeDomain: string, period: string, count: number): Promise<void> {
    await this.deps.quota.releaseNotifications(storeDomain, period, count).catch((err) => this.deps.log.warn({ err }, 'releasing an alert quota failed'));
  }
}

/** E-mails outstanding at once: a few per connection of a pool (every store's pool has the configured size). */
export function mailWindow(smtpPoolSize: number): number {
  return Math.min(MAX_OUTSTANDING_SENDS, MAILS_PER_CONNECTION * Math.max(1, smtpPoolSize));
}
