/**
 * The per-phase counting of bench/fanout.ts's SMS and push stand-ins (bench/fanout-twilio.ts,
 * bench/fanout-push-sink.ts), as the SMTP sink (bench/fanout-sink.ts) counts mail: each message
 * goes to one address `<prefix><n>` with 0 <= n < count; the counter keeps how many arrived,
 * distinct recipients (a bitmap), duplicates, anything unexpected, and arrivals per 100 ms.
 * It reports to the bench over the IPC channel the child was started with.
 */
import type { PhaseStats } from './fanout-sink.ts';

export type CounterCommand =
  /** `count` messages, each to one `<prefix><n>` with n below `range` (default `count`). */
  | { type: 'expect'; phase: string; prefix: string; count: number; range?: number }
  | { type: 'report' };

export type CounterEvent =
  | { type: 'progress'; phase: string; received: number; at: number }
  | ({ type: 'complete' | 'report' } & PhaseStats);

const BUCKET_MS = 100;
/** Where the push sink's endpoints are: `<origin>/wpush/v2/<prefix><n>`. */
export const PUSH_PATH = '/wpush/v2/';
export const now = () => performance.timeOrigin + performance.now();

function fresh(name: string): PhaseStats {
  return { phase: name, received: 0, expected: 0, distinct: 0, duplicates: 0, unexpected: 0, firstAt: null, lastAt: null, buckets: [], firstUnexpected: null };
}

export class PhaseCounter {
  private phase = 'idle';
  private prefix = '\u0000';
  private count = 0;
  private range = 0;
  private seen = new Uint8Array(0);
  private completeSent = false;
  stats: PhaseStats = fresh('idle');

  constructor(private readonly send: (event: CounterEvent) => void) {
    let lastReported = -1;
    setInterval(() => {
      if (this.stats.received === lastReported) return;
      lastReported = this.stats.received;
      this.send({ type: 'progress', phase: this.phase, received: this.stats.received, at: now() });
    }, 250).unref();
  }

  get phaseName(): string {
    return this.phase;
  }

  /** Handles the commands every counter takes; false for any other. */
  command(command: { type: string }): boolean {
    if (command.type === 'expect') {
      const c = command as Extract<CounterCommand, { type: 'expect' }>;
      this.phase = c.phase;
      this.prefix = c.prefix;
      this.count = c.count;
      this.range = c.range ?? c.count;
      this.seen = new Uint8Array(this.range);
      this.stats = fresh(c.phase);
      this.completeSent = false;
      return true;
    }
    if (command.type === 'report') {
      this.send({ type: 'report', ...this.stats });
      return true;
    }
    return false;
  }

  /** Which expected recipient an address is (`<prefix><digits>`), or undefined. */
  indexOf(address: string): number | undefined {
    if (!address.startsWith(this.prefix)) return undefined;
    const rest = address.slice(this.prefix.length);
    if (!/^\d{1,9}$/.test(rest)) return undefined;
    const n = Number(rest);
    return n < this.range ? n : undefined;
  }

  /** Counts one message to `address`, received at `at`. */
  record(address: string, at: number): void {
    const stats = this.stats;
    stats.received++;
    stats.firstAt ??= at;
    stats.lastAt = at;
    const bucket = Math.floor((at - stats.firstAt) / BUCKET_MS);
    while (stats.buckets.length <= bucket) stats.buckets.push(0);
    stats.buckets[bucket]!++;
    const n = this.indexOf(address);
    if (n === undefined) {
      stats.unexpected++;
      stats.firstUnexpected ??= address;
    } else {
      stats.expected++;
      if (this.seen[n]) stats.duplicates++;
      else {
        this.seen[n] = 1;
        stats.distinct++;
      }
    }
    if (!this.completeSent && stats.received >= this.count) {
      this.completeSent = true;
      this.send({ type: 'complete', ...stats });
    }
  }
}
