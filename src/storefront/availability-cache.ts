import { createHash } from 'node:crypto';
import type { ChangeBus } from '../core/changes/bus.ts';
import { STOCK_CHANGES, STORE_CHANGES } from '../core/changes/topics.ts';

/** An availability answer as sent: its JSON and the ETag naming that exact JSON. */
export interface AvailabilityAnswer {
  body: string;
  etag: string;
}

/** An answer as sent: its JSON, and an ETag that changes whenever that JSON does. */
export function availabilityAnswerOf(answer: unknown): AvailabilityAnswer {
  const body = JSON.stringify(answer);
  return { body, etag: `"${createHash('sha1').update(body).digest('base64url')}"` };
}

/** Products kept at most, over every store; the oldest is dropped first. */
const MAX_PRODUCTS = 20_000;

/**
 * The storefront's availability answers, kept between changes: every product page view asks for
 * one, and stock changes far less often than pages are viewed. A stock change drops its product,
 * a store's change (uninstalled, settings) drops the store's products, here and in every other
 * process; while the bus cannot vouch for changes, every answer is built from the database.
 * Only customers' answers are kept: what a store that is not one gets costs nothing to rebuild,
 * and a flood of made-up shop names cannot push real pages out.
 */
export class AvailabilityCache {
  private readonly stores = new Map<string, Map<string, AvailabilityAnswer>>();
  private size = 0;
  private generation = 0;

  constructor(private readonly bus: ChangeBus) {
    bus.listen(STOCK_CHANGES, {
      changed: (key) => {
        const space = key.indexOf(' ');
        this.drop(key.slice(0, space), key.slice(space + 1));
      },
      reset: () => this.clear(),
    });
    bus.listen(STORE_CHANGES, { changed: (domain) => this.drop(domain), reset: () => this.clear() });
  }

  /** The kept answer, or the one `build` makes (kept when `keep` says so and nothing changed meanwhile). */
  async answer(domain: string, productId: string, build: () => Promise<{ answer: unknown; keep: boolean }>): Promise<AvailabilityAnswer> {
    if (this.bus.live) {
      const kept = this.stores.get(domain)?.get(productId);
      if (kept) return kept;
    }
    const generation = this.generation;
    const { answer, keep } = await build();
    const made = availabilityAnswerOf(answer);
    if (keep && generation === this.generation && this.bus.live) this.keep(domain, productId, made);
    return made;
  }

  private keep(domain: string, productId: string, answer: AvailabilityAnswer): void {
    if (this.size >= MAX_PRODUCTS) {
      const [oldest, products] = this.stores.entries().next().value!;
      this.size -= products.size;
      this.stores.delete(oldest);
    }
    let products = this.stores.get(domain);
    if (!products) this.stores.set(domain, (products = new Map()));
    if (!products.has(productId)) this.size++;
    products.set(productId, answer);
  }

  private drop(domain: string, productId?: string): void {
    this.generation++;
    const products = this.stores.get(domain);
    if (!products) return;
    if (productId === undefined) {
      this.size -= products.size;
      this.stores.delete(domain);
    } else if (products.delete(productId)) {
      this.size--;
    }
  }

  private clear(): void {
    this.generation++;
    this.stores.clear();
    this.size = 0;
  }
}
