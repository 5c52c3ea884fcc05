import { nowIso } from '../core/clock.ts';
import { ownStore, type Caller } from '../core/http/caller.ts';
import type { StoreService } from '../stores/service.ts';
import type { InventoryRepository, VariantStockRow } from './repository.ts';

/** One report of a variant's (or, with `variantId: null`, a whole product's) stock. */
export interface StockReport {
  productId: string;
  variantId: string | null;
  /** Sellable units across locations; null or absent leaves the known number as it is. */
  available?: number | null;
  /** Whether the product is published (on sale); absent leaves it as it is (new: published). */
  published?: boolean;
  inventoryItemId?: string | null;
  productTitle?: string | null;
  variantTitle?: string | null;
  imageUrl?: string | null;
  productUrl?: string | null;
  /** The source's time of this state; a report older than the last one taken is stale and ignored. */
  updatedAt?: string | null;
}

export type StockSourceKind = 'shopify-webhook' | 'inventory-api' | 'reconciliation';

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

export interface DetectedRestock {
  storeDomain: string;
  productId: string;
  variantId: string | null;
  available: number;
  source: StockSource;
}

/** Where restocks go: the dispatch feature. */
export interface RestockSink {
  startRestock(restock: DetectedRestock): Promise<{ restockId: string; created: boolean }>;
}

/** A report as an agent sends it: `variantId` may be left out for the product as a whole. */
export type ReportedStock = Omit<StockReport, 'variantId'> & { variantId?: string | null };

export interface StockOutcome {
  productId: string;
  variantId: string | null;
  available: number | null;
  published: boolean;
  /** stale: older than what is known, nothing changed. */
  ignored?: 'stale';
  /** Set when this report made the variant sellable again and its alerts are being dispatched. */
  restockId?: string;
}

export interface StockStatus {
  productId: string;
  variantId: string | null;
  available: number | null;
  published: boolean;
  productTitle: string | null;
  variantTitle: string | null;
  imageUrl: string | null;
  productUrl: string | null;
  updatedAt: string;
}

/**
 * The stock the service knows of, fed by webhooks, the inventory API and reconciliation. It
 * decides what counts as a restock: a variant going from not sellable (below the store's
 * minimum stock, or unpublished) to sellable. A variant never heard of counts as not sellable,
 * since shoppers wait for it because it was sold out.
 */
export class InventoryService {
  constructor(
    private readonly store: InventoryRepository,
    private readonly stores: StoreService,
    private readonly restocks: RestockSink,
  ) {}

  /** reportInventory: an agent bound to the store reports its stock, cited as the agent's report. */
  async reportInventory(caller: Caller, domain: string, items: ReportedStock[]): Promise<StockOutcome[]> {
    const store = ownStore(caller, domain);
    const reports = items.map((item) => ({ ...item, variantId: item.variantId ?? null }));
    return this.reportStock(store, reports, { kind: 'inventory-api', ref: caller.agentId, verified: false });
  }

  /** Stock from any source the service trusts to name the store (webhooks, reconciliation, `reportInventory`). */
  async reportStock(storeDomain: string, reports: StockReport[], source: StockSource): Promise<StockOutcome[]> {
    const outcomes: StockOutcome[] = [];
    const { minStock } = await this.stores.settingsOf(storeDomain);
    for (const report of reports) outcomes.push(await this.applyReport(storeDomain, report, source, minStock));
    return outcomes;
  }

  /**
   * One location's level of an inventory item (Shopify `inventory_levels/update`). The variant's
   * stock becomes the sum over its locations. Returns undefined when the item is not yet mapped
   * to a variant: the caller maps it (from a product payload or the Admin API) and reports again.
   */
  async reportLevel(
    storeDomain: string,
    level: { inventoryItemId: string; locationId: string; available: number | null; updatedAt?: string | null },
    source: StockSource,
  ): Promise<StockOutcome | undefined> {
    const known = await this.store.level(storeDomain, level.inventoryItemId, level.locationId);
    if (isStale(level.updatedAt, known?.source_updated_at)) {
      const variant = await this.store.byItem(storeDomain, level.inventoryItemId);
      return variant ? { ...describe(variant), ignored: 'stale' } : undefined;
    }
    await this.store.saveLevel({
      store_domain: storeDomain,
      inventory_item_id: level.inventoryItemId,
      location_id: level.locationId,
      available: level.available,
      source_updated_at: level.updatedAt ?? known?.source_updated_at ?? null,
      updated_at: nowIso(),
    });
    const variant = await this.store.byItem(storeDomain, level.inventoryItemId);
    if (!variant) return undefined;
    const total = await this.totalAfterLevel(storeDomain, variant, known?.available ?? null, level.available);
    const [outcome] = await this.reportStock(
      storeDomain,
      [{ productId: variant.product_id, variantId: variantOf(variant.variant_id), available: total }],
      source,
    );
    return outcome;
  }

  /**
   * The variant's stock after one location changed. Product payloads and reconciliation carry
   * the platform's total, which a level event adjusts by its change; a location never heard of
   * can only be summed with the known ones, which is exact when the variant was sold out (every
   * location empty) — the case that decides a restock.
   */
  private async totalAfterLevel(storeDomain: string, variant: VariantStockRow, before: number | null, after: number | null): Promise<number | null> {
    const known = variant.available;
    if (known !== null && before !== null && after !== null) return known + (after - before);
    const summed = await this.store.itemTotal(storeDomain, variant.inventory_item_id!);
    if (known === null || known <= 0 || summed === null) return summed;
    return Math.max(known, summed);
  }

  /**
   * What is in stock now for a restock of (product, variant); for a whole product, the sum of
   * its variants (or its own product-level number), published if any is.
   */
  async stockOf(storeDomain: string, productId: string, variantId: string | null): Promise<{ available: number; published: boolean }> {
    if (variantId !== null) {
      const row = await this.store.find(storeDomain, productId, variantId);
      return { available: Math.max(0, row?.available ?? 0), published: row ? row.published === 1 : false };
    }
    const rows = await this.store.ofProduct(storeDomain, productId);
    const whole = rows.find((row) => row.variant_id === '');
    if (whole) return { available: Math.max(0, whole.available ?? 0), published: whole.published === 1 };
    const published = rows.filter((row) => row.published === 1);
    return { available: published.reduce((sum, row) => sum + Math.max(0, row.available ?? 0), 0), published: published.length > 0 };
  }

  /** Product details for an alert e-mail: the variant's, else any known for the product. */
  async describeProduct(storeDomain: string, productId: string, variantId: string | null): Promise<StockStatus | undefined> {
    const exact = await this.store.find(storeDomain, productId, variantId ?? '');
    if (exact) return describe(exact);
    const any = (await this.store.ofProduct(storeDomain, productId))[0];
    return any && { ...describe(any), variantId, variantTitle: variantId === null ? null : any.variant_title };
  }

  /** What a storefront may show of a product: per variant (null: the product as a whole), its stock and whether it is on sale. */
  async availabilityOf(storeDomain: string, productId: string): Promise<Array<{ variantId: string | null; available: number | null; published: boolean }>> {
    const rows = await this.store.availability(storeDomain, productId);
    return rows.map((row) => ({ variantId: variantOf(row.variant_id), available: row.available, published: Boolean(row.published) }));
  }

  /** Stock status of every known variant of these products (one read per few hundred products), for a caller bound to the store. */
  async stockStatusOf(caller: Caller, domain: string, productIds: string[]): Promise<StockStatus[]> {
    return (await this.store.ofProducts(ownStore(caller, domain), productIds)).map(describe);
  }

  /** getStockStatus: a store's variants, optionally of one product, for a caller bound to the store. */
  async stockStatus(caller: Caller, domain: string, productId?: string, limit = 1000): Promise<StockStatus[]> {
    const store = ownStore(caller, domain);
    const rows = productId ? await this.store.ofProduct(store, productId) : await this.store.list(store, limit);
    return rows.slice(0, limit).map(describe);
  }

  forgetStore(storeDomain: string): Promise<void> {
    return this.store.forgetStore(storeDomain);
  }

  private async applyReport(storeDomain: string, report: StockReport, source: StockSource, minStock: number): Promise<StockOutcome> {
    const variantKey = report.variantId ?? '';
    const known = await this.store.find(storeDomain, report.productId, variantKey);
    if (known && isStale(report.updatedAt, known.source_updated_at)) return { ...describe(known), ignored: 'stale' };

    const row: VariantStockRow = {
      store_domain: storeDomain,
      product_id: report.productId,
      variant_id: variantKey,
      inventory_item_id: pick(report.inventoryItemId, known?.inventory_item_id),
      available: report.available ?? known?.available ?? null,
      published: report.published === undefined ? (known?.published ?? 1) : report.published ? 1 : 0,
      product_title: pick(report.productTitle, known?.product_title),
      variant_title: pick(report.variantTitle, known?.variant_title),
      image_url: pick(report.imageUrl, known?.image_url),
      product_url: pick(report.productUrl, known?.product_url),
      source_updated_at: report.updatedAt ?? known?.source_updated_at ?? null,
      updated_at: nowIso(),
    };
    await this.store.save(row);

    const outcome: StockOutcome = describeOutcome(row);
    if (!sellable(known, minStock) && sellable(row, minStock)) {
      const { restockId } = await this.restocks.startRestock({
        storeDomain,
        productId: row.product_id,
        variantId: report.variantId,
        available: row.available ?? 0,
        source,
      });
      outcome.restockId = restockId;
    }
    return outcome;
  }
}

function sellable(row: Pick<VariantStockRow, 'available' | 'published'> | undefined, minStock: number): boolean {
  return row !== undefined && row.published === 1 && row.available !== null && row.available >= minStock;
}

/** Reports without a time are never stale: the inventory API's callers speak for the present. */
function isStale(reported: string | null | undefined, known: string | null | undefined): boolean {
  if (!reported || !known) return false;
  return Date.parse(reported) < Date.parse(known);
}

function pick<T>(given: T | null | undefined, known: T | null | undefined): T | null {
  return given === undefined ? (known ?? null) : given;
}

function variantOf(key: string): string | null {
  return key === '' ? null : key;
}

function describeOutcome(row: VariantStockRow): StockOutcome {
  return { productId: row.product_id, variantId: variantOf(row.variant_id), available: row.available, published: row.published === 1 };
}

function describe(row: VariantStockRow): StockStatus {
  return {
    productId: row.product_id,
    variantId: variantOf(row.variant_id),
    available: row.available,
    published: row.published === 1,
    productTitle: row.product_title,
    variantTitle: row.variant_title,
    imageUrl: row.image_url,
    productUrl: row.product_url,
    updatedAt: row.updated_at,
  };
}
