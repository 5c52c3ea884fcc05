// Longer than most files on purpose: every stock source passes through one place that decides what a restock is (sellable, stale, confirmed), and splitting it would split that rule.
import { eventId, type EventSink } from '../core/events.ts';
import type { StockReport, StockSource } from '../core/connectors/stock-report.ts';
import { nowIso } from '../core/clock.ts';
import { ownStore, type Caller } from '../core/http/caller.ts';
import { idsAt } from '../core/platforms.ts';
import type { StoreService } from '../stores/service.ts';
import type { InventoryRepository, VariantStockRow } from './repository.ts';

/** What the inventory asks of the stores: a store's platform, its settings. */
export type InventoryStores = Pick<StoreService, 'requireStorePlatform' | 'settingsOf'>;

export interface DetectedRestock {
  storeDomain: string;
  productId: string;
  variantId: string | null;
  available: number;
  source: StockSource;
}

/** Reads products again from the platform itself: the reports to take instead of those that would restock them. */
export type ConfirmRestock = (productIds: string[]) => Promise<StockReport[]>;

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
    private readonly stores: InventoryStores,
    private readonly restocks: RestockSink,
    /** Where a store's restocks are announced (`product.restocked`: webhooks, Shopify Flow). */
    private readonly events?: EventSink,
  ) {}

  /** reportInventory: an agent bound to the store reports its stock, cited as the agent's report. */
  async reportInventory(caller: Caller, domain: string, items: ReportedStock[]): Promise<StockOutcome[]> {
    const store = ownStore(caller, domain);
    await this.stores.requireStorePlatform(store, items.flatMap((item, i) => idsAt(`/body/items/${i}`, item)));
    const reports = items.map((item) => ({ ...item, variantId: item.variantId ?? null }));
    return this.reportStock(store, reports, { kind: 'inventory-api', ref: caller.agentId, verified: false });
  }

  /**
   * Stock from any source the service trusts to name the store (webhooks, reconciliation,
   * `reportInventory`). With `confirm`, reports that would restock a variant are first replaced
   * by what `confirm` reads for their products (the platform's own answer), so a hint alone
   * never starts a restock.
   */
  async reportStock(storeDomain: string, reports: StockReport[], source: StockSource, options: { confirm?: ConfirmRestock } = {}): Promise<StockOutcome[]> {
    const { minStock } = await this.stores.settingsOf(storeDomain);
    const known = new KnownRows(this.store, storeDomain);
    const taken = options.confirm ? await this.confirmed(storeDomain, reports, known, minStock, options.confirm) : reports;
    const outcomes: StockOutcome[] = [];
    for (const report of taken) outcomes.push(await this.applyReport(storeDomain, report, source, minStock, known));
    return outcomes;
  }

  /**
   * The reports, with every product read again through `confirm` that a report is doubtful
   * about: a source whose numbers are not the whole truth (a webhook's total counts stock in
   * shops that do not sell online) has those confirmed before they count, namely reports about a
   * variant first heard of and reports that would restock one.
   */
  private async confirmed(storeDomain: string, reports: StockReport[], known: KnownRows, minStock: number, confirm: ConfirmRestock): Promise<StockReport[]> {
    const doubtful: StockReport[] = [];
    for (const report of reports) {
      const row = await known.of(report);
      if (row && isStale(report.updatedAt, row.source_updated_at)) continue;
      if (!row || startsRestock(row, mergedRow(storeDomain, report, row), minStock)) doubtful.push(report);
    }
    if (doubtful.length === 0) return reports;
    const products = new Set(doubtful.map((report) => report.productId));
    const read = await confirm([...products]);
    return [...reports.filter((report) => !products.has(report.productId)), ...read];
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
    options: { confirm?: ConfirmRestock } = {},
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
    const variantId = variantOf(variant.variant_id);
    const outcomes = await this.reportStock(storeDomain, [{ productId: variant.product_id, variantId, available: total }], source, options);
    return outcomes.find((outcome) => outcome.productId === variant.product_id && outcome.variantId === variantId);
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
  async stockOf(storeDomain: string, productId: string, variantId: string | null): Promise<RestockStock> {
    if (variantId !== null) {
      const row = await this.store.find(storeDomain, productId, variantId);
      return row ? stockOfRow(row) : { available: 0, published: false, unlimited: false };
    }
    const rows = await this.store.ofProduct(storeDomain, productId);
    const whole = rows.find((row) => row.variant_id === '');
    if (whole) return stockOfRow(whole);
    const published = rows.filter((row) => row.published === 1);
    return {
      available: published.reduce((sum, row) => sum + Math.max(0, row.available ?? 0), 0),
      published: published.length > 0,
      unlimited: published.some((row) => row.purchasable_without_stock === 1),
    };
  }

  /** The countries where a product is not on sale (markets it is not published to), replacing what was known. */
  setUnlistedCountries(storeDomain: string, productId: string, countries: string[]): Promise<void> {
    return this.store.setUnlistedCountries(storeDomain, productId, countries, nowIso());
  }

  /** Countries where a product is not on sale: shoppers there are not alerted by its restocks. */
  unlistedCountries(storeDomain: string, productId: string): Promise<string[]> {
    return this.store.unlistedCountries(storeDomain, productId);
  }

  /** Product details for an alert e-mail: the variant's, else any known for the product. */
  async describeProduct(storeDomain: string, productId: string, variantId: string | null): Promise<StockStatus | undefined> {
    const exact = await this.store.find(storeDomain, productId, variantId ?? '');
    if (exact) return describe(exact);
    const any = (await this.store.ofProduct(storeDomain, productId))[0];
    return any && { ...describe(any), variantId, variantTitle: variantId === null ? null : any.variant_title };
  }

  /** What a storefront may show of a product: per variant (null: the product as a whole), its stock and whether it is on sale. */
  async availabilityOf(
    storeDomain: string,
    productId: string,
  ): Promise<Array<{ variantId: string | null; available: number | null; published: boolean; purchasableWithoutStock: boolean }>> {
    const rows = await this.store.availability(storeDomain, productId);
    return rows.map((row) => ({
      variantId: variantOf(row.variant_id),
      available: row.available,
      published: Boolean(row.published),
      purchasableWithoutStock: Boolean(row.purchasable_without_stock),
    }));
  }

  /** Stock status of every known variant of these products (one read per few hundred products), for a caller bound to the store. */
  async stockStatusOf(caller: Caller, domain: string, productIds: string[]): Promise<StockStatus[]> {
    return (await this.store.ofProducts(ownStore(caller, domain), productIds)).map(describe);
  }

  /**
   * Titles and current prices of these waitlists' products and variants, for a caller bound to the
   * store (the purchasing view). A whole product's (variantId null) is its own row's when a
   * platform counts stock per product, else its variants' lowest price when they share one
   * currency: the least a shopper waiting for any of them spends.
   */
  async catalogEntries(caller: Caller, domain: string, keys: Array<{ productId: string; variantId: string | null }>): Promise<CatalogEntry[]> {
    const rows = await this.store.ofProducts(ownStore(caller, domain), [...new Set(keys.map((key) => key.productId))]);
    const byProduct = new Map<string, VariantStockRow[]>();
    for (const row of rows) byProduct.set(row.product_id, [...(byProduct.get(row.product_id) ?? []), row]);
    return keys.map(({ productId, variantId }) => {
      const known = byProduct.get(productId) ?? [];
      const exact = known.find((row) => row.variant_id === (variantId ?? ''));
      const titled = exact ?? known.find((row) => row.product_title !== null);
      return {
        productId,
        variantId,
        productTitle: titled?.product_title ?? null,
        variantTitle: exact && variantId !== null ? exact.variant_title : null,
        price: exact ? priceOf(exact) : variantId === null ? lowestPrice(known) : null,
      };
    });
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

  private async applyReport(storeDomain: string, report: StockReport, source: StockSource, minStock: number, knownRows: KnownRows): Promise<StockOutcome> {
    const known = await knownRows.of(report);
    if (known && isStale(report.updatedAt, known.source_updated_at)) return { ...describe(known), ignored: 'stale' };

    const row = mergedRow(storeDomain, report, known);
    await this.store.save(row);
    knownRows.saved(row);

    const outcome: StockOutcome = describeOutcome(row);
    if (startsRestock(known, row, minStock)) {
      const { restockId, created } = await this.restocks.startRestock({
        storeDomain,
        productId: row.product_id,
        variantId: report.variantId,
        available: row.available ?? 0,
        source,
      });
      outcome.restockId = restockId;
      // Once per restock: a report that finds it already started announces nothing again.
      if (created && this.events) {
        const occurredAt = new Date().toISOString();
        await this.events.announce({
          storeDomain,
          type: 'product.restocked',
          id: eventId('product.restocked', restockId),
          occurredAt,
          data: { restockId, productId: row.product_id, variantId: report.variantId, available: row.available ?? 0, ...(row.product_title ? { productTitle: row.product_title } : {}), restockedAt: occurredAt },
        });
      }
    }
    return outcome;
  }
}

/** The variants one batch of reports is about, each read once however many of its reports look at it. */
class KnownRows {
  private readonly rows = new Map<string, VariantStockRow | undefined>();

  constructor(
    private readonly store: InventoryRepository,
    private readonly storeDomain: string,
  ) {}

  async of(report: Pick<StockReport, 'productId' | 'variantId'>): Promise<VariantStockRow | undefined> {
    const key = rowKey(report.productId, report.variantId ?? '');
    if (!this.rows.has(key)) this.rows.set(key, await this.store.find(this.storeDomain, report.productId, report.variantId ?? ''));
    return this.rows.get(key);
  }

  saved(row: VariantStockRow): void {
    this.rows.set(rowKey(row.product_id, row.variant_id), row);
  }
}

function rowKey(productId: string, variantKey: string): string {
  return `${productId}\n${variantKey}`;
}

/** A product or variant as the purchasing view names and prices it. */
export interface CatalogEntry {
  productId: string;
  variantId: string | null;
  productTitle: string | null;
  variantTitle: string | null;
  /** The current price; null while unknown. */
  price: { minor: number; currency: string } | null;
}

function priceOf(row: VariantStockRow): { minor: number; currency: string } | null {
  return row.price_minor === null || row.price_currency === null ? null : { minor: Number(row.price_minor), currency: row.price_currency };
}

function lowestPrice(rows: VariantStockRow[]): { minor: number; currency: string } | null {
  const prices = rows.map(priceOf);
  if (prices.length === 0 || prices.some((price) => price === null)) return null;
  const known = prices as Array<{ minor: number; currency: string }>;
  if (new Set(known.map((price) => price.currency)).size !== 1) return null;
  return known.reduce((low, price) => (price.minor < low.minor ? price : low));
}

/** What a restock sends against: the stock, and whether stock limits it at all. */
export interface RestockStock {
  available: number;
  published: boolean;
  /** Sold whatever its stock: the batches are not sized by it. */
  unlimited: boolean;
}

/** A shopper can buy it: on sale, and in stock (at least the store's minimum) unless stock does not matter. */
function sellable(row: Pick<VariantStockRow, 'available' | 'published' | 'purchasable_without_stock'> | undefined, minStock: number): boolean {
  if (row === undefined || row.published !== 1) return false;
  return row.purchasable_without_stock === 1 || (row.available !== null && row.available >= minStock);
}

/**
 * A shopper could not buy it and now can. A variant never heard of counts as not sellable, since
 * shoppers wait for it because it was sold out; but one first heard of as sold whatever its
 * stock never was sold out.
 */
function startsRestock(known: VariantStockRow | undefined, row: VariantStockRow, minStock: number): boolean {
  if (known === undefined && row.purchasable_without_stock === 1) return false;
  return !sellable(known, minStock) && sellable(row, minStock);
}

/** The known row with a report laid over it: what the report leaves out stays as it was. */
function mergedRow(storeDomain: string, report: StockReport, known: VariantStockRow | undefined): VariantStockRow {
  return {
    store_domain: storeDomain,
    product_id: report.productId,
    variant_id: report.variantId ?? '',
    inventory_item_id: pick(report.inventoryItemId, known?.inventory_item_id),
    available: report.available ?? known?.available ?? null,
    published: flag(report.published, known?.published ?? 1),
    purchasable_without_stock: flag(report.purchasableWithoutStock, known?.purchasable_without_stock ?? 0),
    product_title: pick(report.productTitle, known?.product_title),
    variant_title: pick(report.variantTitle, known?.variant_title),
    image_url: pick(report.imageUrl, known?.image_url),
    product_url: pick(report.productUrl, known?.product_url),
    ...priceColumns(report.price, known),
    source_updated_at: report.updatedAt ?? known?.source_updated_at ?? null,
    updated_at: nowIso(),
  };
}

function priceColumns(given: StockReport['price'], known: VariantStockRow | undefined): Pick<VariantStockRow, 'price_minor' | 'price_currency'> {
  if (given === undefined) return { price_minor: known?.price_minor ?? null, price_currency: known?.price_currency ?? null };
  return { price_minor: given?.minor ?? null, price_currency: given?.currency ?? null };
}

function flag(given: boolean | undefined, known: number): number {
  return given === undefined ? known : given ? 1 : 0;
}

function stockOfRow(row: VariantStockRow): RestockStock {
  return { available: Math.max(0, row.available ?? 0), published: row.published === 1, unlimited: row.purchasable_without_stock === 1 };
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
