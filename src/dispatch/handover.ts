import type { Outgoing } from './compose.ts';

/** Alerts handed to their channels and not yet answered, at most (a text or a push waits on a provider's HTTP answer). */
export const MAX_OUTSTANDING_SENDS = 50;

/**
 * E-mails handed to the transport and not yet answered, per pooled SMTP connection. A connection
 * sends one mail at a time and the pool queues the rest, each already built into its MIME tree:
 * one waiting per connection keeps every connection busy, whatever the server's latency. More
 * only wait, and a mail that waits while others are built outlives the young generation of the
 * heap: at 50 a fan-out left kilobytes of garbage per alert in the old generation, and V8 took
 * the mail library's objects for long-lived ones and made them there from then on.
 */
export const MAILS_PER_CONNECTION = 2;
/** Handed-over alerts are dropped from the front of the queue in steps this large. */
const COMPACT_EVERY = 1000;

/**
 * Composed alerts waiting for the transport, handed over a few at a time as sends finish: a
 * whole claim handed over at once keeps the event loop busy for tens of milliseconds while every
 * pooled connection waits for its reply to be read.
 */
export class Handover {
  private pending: Outgoing[] = [];
  private next = 0;
  private readonly inFlight = new Set<Promise<void>>();
  private mailsInFlight = 0;
  /** Woken when a send ends, instead of Promise.race over everything in flight. */
  private wake: (() => void) | undefined;
  private closed = false;

  constructor(
    private readonly send: (item: Outgoing) => Promise<void>,
    /** False once the worker stops: nothing more is handed over. */
    private readonly mayHandOver: () => boolean,
    /** E-mails outstanding at most: MAILS_PER_CONNECTION per connection of an SMTP pool, within MAX_OUTSTANDING_SENDS. */
    private readonly maxMails = MAX_OUTSTANDING_SENDS,
  ) {}

  add(items: Outgoing[]): void {
    this.pending.push(...items);
    this.pump();
  }

  /** Nothing is in flight, and nothing more will be handed over. */
  get done(): boolean {
    return this.inFlight.size === 0 && (this.next === this.pending.length || !this.mayHandOver());
  }

  /**
   * Resolves when the next send ends. Ask only right after `done` was false, with no await in
   * between: a send that ends before this is called wakes no one.
   */
  nextAnswer(): Promise<void> {
    return new Promise((resolve) => (this.wake = resolve));
  }

  /** Hands nothing more over, waits for the sends in flight, and returns what was never handed over. */
  async close(): Promise<Outgoing[]> {
    this.closed = true;
    await Promise.allSettled(this.inFlight);
    return this.pending.slice(this.next);
  }

  private pump(): void {
    while (!this.closed && this.mayHandOver() && this.inFlight.size < MAX_OUTSTANDING_SENDS && this.next < this.pending.length) {
      const item = this.pending[this.next]!;
      // In queue order: a mail beyond its window waits, and what is behind it with it.
      const mail = item.row.channel === 'email';
      if (mail && this.mailsInFlight >= this.maxMails) break;
      this.next++;
      if (mail) this.mailsInFlight++;
      const promise = this.send(item).finally(() => {
        this.inFlight.delete(promise);
        if (mail) this.mailsInFlight--;
        this.pump();
        this.answered();
      });
      this.inFlight.add(promise);
    }
    if (this.next >= COMPACT_EVERY || this.next === this.pending.length) {
      this.pending = this.pending.slice(this.next);
      this.next = 0;
    }
  }

  private answered(): void {
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  }
}
