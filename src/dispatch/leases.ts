import type { FastifyBaseLogger } from 'fastify';
import type { ClaimedNotification, DispatchRepository } from './repository.ts';

/** When a lease taken now runs out. */
export function leaseEnd(leaseSeconds: number, now: Date): string {
  return new Date(now.getTime() + leaseSeconds * 1000).toISOString();
}

/**
 * The alerts one pass of sending holds leased: claimed and not yet recorded. While held, their
 * leases are renewed, so a slow or stalled mail server never lets them lapse to another worker
 * that would send them too; a worker that dies stops renewing, and they are retaken.
 */
export class NotificationLeases {
  private readonly held = new Set<string>();

  constructor(
    private readonly store: DispatchRepository,
    private readonly owner: string,
    private readonly leaseSeconds: number,
    private readonly log: FastifyBaseLogger,
    /** The worker's clock (ms since the epoch). */
    private readonly now: () => number = Date.now,
  ) {}

  get count(): number {
    return this.held.size;
  }

  /** A claim's end, for alerts leased now. */
  until(now: Date): string {
    return leaseEnd(this.leaseSeconds, now);
  }

  hold(rows: readonly ClaimedNotification[]): void {
    for (const row of rows) this.held.add(row.id);
  }

  /** Their outcome is written (or their lease given back): no longer ours to renew. */
  drop(ids: Iterable<string>): void {
    for (const id of ids) this.held.delete(id);
  }

  /** Renews every third of a lease until the returned function is called. */
  keepRenewed(): () => void {
    const timer = setInterval(() => void this.renew(), (this.leaseSeconds * 1000) / 3);
    return () => clearInterval(timer);
  }

  /** Alerts never tried go back to the queue now, for any worker, instead of when the lease runs out. */
  async giveBack(ids: string[]): Promise<void> {
    try {
      await this.store.giveBack(this.owner, ids);
    } catch (err) {
      this.log.warn({ err }, 'giving back alert leases failed; they are retaken when the leases run out');
    } finally {
      this.drop(ids);
    }
  }

  private async renew(): Promise<void> {
    try {
      await this.store.renewLeases(this.owner, [...this.held], this.until(new Date(this.now())));
    } catch (err) {
      this.log.warn({ err }, 'renewing alert leases failed; will retry');
    }
  }
}
