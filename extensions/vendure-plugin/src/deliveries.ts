import { randomUUID } from 'node:crypto';
import type { CheckedOptions } from './options';
import type { RestockMessage } from './messages';
import { signedHeaders } from './signature';

/** Waits before the second, third and fourth try; after that the message is dropped (and logged). */
const RETRY_DELAYS_MS = [1_000, 5_000, 30_000];
/** Deliveries waiting at once: past this, new ones are dropped, as a Restock that is down for long would otherwise fill the server's memory. */
const MAX_PENDING = 1_000;

export interface DeliveryLog {
  warn(message: string): void;
  error(message: string): void;
}

/**
 * Sends messages to Restock, signed, each tried up to four times over about half a minute.
 * Stock news Restock misses is caught by its reconciliation, which reads the products shoppers
 * wait for from the Admin API; order news is not, so it is logged loudly when dropped.
 */
export class Deliveries {
  private readonly inFlight = new Set<Promise<void>>();
  private readonly waits = new Map<NodeJS.Timeout, () => void>();
  private stopped = false;

  constructor(
    private readonly options: CheckedOptions,
    private readonly log: DeliveryLog,
  ) {}

  send(message: RestockMessage): void {
    if (this.stopped) return;
    if (this.inFlight.size >= MAX_PENDING) {
      this.log.error(`Restock: ${MAX_PENDING} deliveries are waiting; ${message.type} was dropped`);
      return;
    }
    const done = this.deliver(message).finally(() => this.inFlight.delete(done));
    this.inFlight.add(done);
  }

  /** Resolves once every delivery under way has succeeded or given up. */
  async settled(): Promise<void> {
    while (this.inFlight.size > 0) await Promise.all([...this.inFlight]);
  }

  /** No more tries: the server is shutting down. */
  stop(): void {
    this.stopped = true;
    for (const [timer, resolve] of this.waits) {
      clearTimeout(timer);
      resolve();
    }
    this.waits.clear();
  }

  private async deliver(message: RestockMessage): Promise<void> {
    const body = JSON.stringify(message);
    // One id for every try, signed anew with the time of each: Restock takes a message once.
    const id = `msg_${randomUUID()}`;
    for (let attempt = 0; ; attempt++) {
      const outcome = await this.post(body, { 'content-type': 'application/json', ...signedHeaders(this.options.key, body, id) });
      if (outcome === 'done') return;
      if (outcome === 'refused' || attempt >= RETRY_DELAYS_MS.length || this.stopped) {
        this.log.error(`Restock: ${message.type} was not delivered (${outcome === 'refused' ? 'refused' : 'no answer after 4 tries'})`);
        return;
      }
      await this.wait(RETRY_DELAYS_MS[attempt]!);
      if (this.stopped) {
        this.log.error(`Restock: ${message.type} was not delivered (the server stopped before it could be tried again)`);
        return;
      }
    }
  }

  private async post(body: string, headers: Record<string, string>): Promise<'done' | 'again' | 'refused'> {
    try {
      const answer = await fetch(this.options.deliveryUrl, { method: 'POST', body, headers, signal: AbortSignal.timeout(this.options.timeoutMs), redirect: 'error' });
      await answer.arrayBuffer().catch(() => undefined);
      if (answer.ok) return 'done';
      // 408, 429 and 5xx pass; any other refusal (a bad signature, an unknown store) stays one.
      if (answer.status === 408 || answer.status === 429 || answer.status >= 500) return 'again';
      this.log.warn(`Restock answered ${answer.status} to a delivery`);
      return 'refused';
    } catch {
      return 'again';
    }
  }

  private wait(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.waits.delete(timer);
        resolve();
      }, ms);
      this.waits.set(timer, resolve);
    });
  }
}
