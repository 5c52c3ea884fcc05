import type { RankedWaitlist, RankedWaitlistKey, SubscriptionService } from '../alerts/service.ts';
import { inPages } from '../core/db/pages.ts';
import { ownStore, type Caller } from '../core/http/caller.ts';
import type { InventoryService } from '../inventory/service.ts';
import { decodeCursor, encodeCursor } from './cursor.ts';

/** What the purchasing view asks of the alerts: the store's waitlists, ranked. */
export type PurchasingWaitlists = Pick<SubscriptionService, 'rankedWaitlists'>;
/** What it asks of the inventory: the products' titles and current prices. */
export type PurchasingCatalog = Pick<InventoryService, 'catalogEntries'>;

export interface Money {
  minor: number;
  currency: string;
}

/** One waitlist as the purchasing view shows it. */
export interface PurchasingRow {
  productId: string;
  variantId: string | null;
  productTitle: string | null;
  variantTitle: string | null;
  waiting: number;
  totalWaitSeconds: number;
  meanWaitSeconds: number;
  price: Money | null;
  potentialRevenue: Money | null;
}

export interface PurchasingPage {
  items: PurchasingRow[];
  next: string | null;
}

export interface PurchasingDeps {
  waitlists: PurchasingWaitlists;
  catalog: PurchasingCatalog;
  /** Epoch milliseconds; a test's clock moves the time waited. */
  now?: () => number;
}

/** Rows per page of the CSV: one page of waitlists and one read of their products at a time. */
const CSV_PAGE = 500;

/**
 * What a store's buyer reorders first: the waitlists ranked by shoppers waiting, then by time
 * waited, with what they would bring at the current price. It owns no table: the alerts rank the
 * waitlists, the inventory names and prices them, and each decides who may read them.
 */
export class PurchasingService {
  constructor(private readonly deps: PurchasingDeps) {}

  /** getPurchasingView: a page, after `cursor` (the `next` of the page before). */
  async page(caller: Caller, domain: string, query: { limit: number; cursor?: string | undefined }): Promise<PurchasingPage> {
    const after = query.cursor === undefined ? null : decodeCursor(query.cursor);
    const ranked = await this.deps.waitlists.rankedWaitlists(caller, domain, after, query.limit);
    const items = await this.rowsOf(caller, domain, ranked, this.nowSeconds());
    const last = ranked.at(-1);
    return { items, next: ranked.length === query.limit && last ? encodeCursor(keyOf(last)) : null };
  }

  /** The whole view, a page at a time (the CSV); tenancy is decided at the call, before anything streams. */
  rows(caller: Caller, domain: string): AsyncGenerator<PurchasingRow> {
    const shop = ownStore(caller, domain);
    const now = this.nowSeconds();
    const rowsOf = (ranked: RankedWaitlist[]) => this.rowsOf(caller, shop, ranked, now);
    const pages = inPages<{ row: PurchasingRow; key: RankedWaitlistKey }, RankedWaitlistKey>(
      async (after, limit) => {
        const ranked = await this.deps.waitlists.rankedWaitlists(caller, shop, after ?? null, limit);
        return (await rowsOf(ranked)).map((row, i) => ({ row, key: keyOf(ranked[i]!) }));
      },
      (keyed) => keyed.key,
      CSV_PAGE,
    );
    return (async function* () {
      for await (const keyed of pages) yield keyed.row;
    })();
  }

  private nowSeconds(): number {
    return Math.floor((this.deps.now ?? Date.now)() / 1000);
  }

  private async rowsOf(caller: Caller, domain: string, ranked: RankedWaitlist[], now: number): Promise<PurchasingRow[]> {
    if (ranked.length === 0) return [];
    const entries = await this.deps.catalog.catalogEntries(caller, domain, ranked.map(({ productId, variantId }) => ({ productId, variantId })));
    return ranked.map((waitlist, i) => {
      const entry = entries[i]!;
      // A sign-up time ahead of this clock (another server's) must not make time waited negative.
      const total = Math.max(0, waitlist.waiting * now - waitlist.waitingSinceSum);
      return {
        productId: waitlist.productId,
        variantId: waitlist.variantId,
        productTitle: entry.productTitle,
        variantTitle: entry.variantTitle,
        waiting: waitlist.waiting,
        totalWaitSeconds: total,
        meanWaitSeconds: Math.round(total / waitlist.waiting),
        price: entry.price,
        potentialRevenue: revenueOf(entry.price, waitlist.waiting),
      };
    });
  }
}

function keyOf(waitlist: RankedWaitlist): RankedWaitlistKey {
  return { waiting: waitlist.waiting, waitingSinceSum: waitlist.waitingSinceSum, productId: waitlist.productId, variantKey: waitlist.variantId ?? '' };
}

/** One unit for each waiting shopper; null when the price is unknown or the product would not count exactly. */
function revenueOf(price: Money | null, waiting: number): Money | null {
  if (price === null) return null;
  const minor = price.minor * waiting;
  return Number.isSafeInteger(minor) ? { minor, currency: price.currency } : null;
}
