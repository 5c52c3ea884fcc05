/**
 * One report of a variant's (or, with `variantId: null`, a whole product's) stock: what every
 * platform's connector (and an agent, through the inventory API) hands to inventory.
 */
export interface StockReport {
  productId: string;
  variantId: string | null;
  /** Sellable units across locations; null or absent leaves the known number as it is. */
  available?: number | null;
  /** Whether the product is published (on sale); absent leaves it as it is (new: published). */
  published?: boolean;
  /**
   * Sold whatever its stock (backorders, untracked inventory, pre-order): never sold out. Absent
   * leaves it as it is (new: no). Only platforms that say so set it; agents report stock.
   */
  purchasableWithoutStock?: boolean;
  inventoryItemId?: string | null;
  productTitle?: string | null;
  variantTitle?: string | null;
  imageUrl?: string | null;
  productUrl?: string | null;
  /**
   * The current price, in the currency's minor unit; null: not known (forgets a known one); absent
   * leaves it as it is. Only sources that carry it in the read they make anyway set it.
   */
  price?: { minor: number; currency: string } | null;
  /** The source's time of this state; a report older than the last one taken is stale and ignored. */
  updatedAt?: string | null;
}

/** A platform's webhook (`shopify-webhook`, `woocommerce-webhook`, ...), an agent's report, or a reconciliation. */
export type StockSourceKind = `${string}-webhook` | 'inventory-api' | 'reconciliation';

export interface StockSource {
  kind: StockSourceKind;
  /** What to cite in the "why sent" record: an event id, an agent id. */
  ref: string;
  /**
   * True when the platform itself vouches that the product is the store's (a signed Shopify
   * webhook, the Admin API): then subscriptions made without naming a store match too.
   */
  verified: boolean;
}
