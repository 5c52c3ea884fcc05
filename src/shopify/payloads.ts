import { z } from 'zod';
import type { StockReport } from '../core/connectors/stock-report.ts';
import { toMinorUnits } from '../conversions/service.ts';
import { onSaleOnline, purchasableWithoutStock, type ProductState } from './catalog.ts';

/** Topics as the library names them (`products/update` → `PRODUCTS_UPDATE`). */
export const HANDLED_TOPICS = [
  'PRODUCTS_UPDATE',
  'INVENTORY_LEVELS_UPDATE',
  'APP_UNINSTALLED',
  'APP_SUBSCRIPTIONS_UPDATE',
  'ORDERS_CREATE',
  'ORDERS_CANCELLED',
  'REFUNDS_CREATE',
  'CUSTOMERS_DATA_REQUEST',
  'CUSTOMERS_REDACT',
  'SHOP_REDACT',
] as const;
export type HandledTopic = (typeof HANDLED_TOPICS)[number];

export function isHandledTopic(topic: string): topic is HandledTopic {
  return (HANDLED_TOPICS as readonly string[]).includes(topic);
}

const numericId = z.union([z.number().int().nonnegative(), z.string().regex(/^[0-9]{1,20}$/)]);

export const productUpdatePayload = z.object({
  admin_graphql_api_id: z.string().regex(/^gid:\/\/shopify\/Product\/[0-9]+$/),
  title: z.string().nullish(),
  handle: z.string().nullish(),
  status: z.string().nullish(),
  published_at: z.string().nullish(),
  updated_at: z.string().nullish(),
  image: z.object({ src: z.string() }).nullish(),
  images: z.array(z.object({ src: z.string() })).nullish(),
  variants: z
    .array(
      z.object({
        admin_graphql_api_id: z.string().regex(/^gid:\/\/shopify\/ProductVariant\/[0-9]+$/),
        title: z.string().nullish(),
        inventory_item_id: numericId.nullish(),
        inventory_quantity: z.number().int().nullish(),
        inventory_policy: z.string().nullish(),
        inventory_management: z.string().nullish(),
      }),
    )
    .default([]),
});

export const inventoryLevelPayload = z.object({
  inventory_item_id: numericId,
  location_id: numericId,
  available: z.number().int().nullish(),
  updated_at: z.string().nullish(),
});

/** customers/redact and customers/data_request. */
export const customerPayload = z.object({
  shop_domain: z.string().optional(),
  customer: z.object({ email: z.string().nullish() }).nullish(),
  data_request: z.object({ id: numericId }).nullish(),
});

/** The shop domain a payload names, where it names one (compliance topics, app/uninstalled). */
export const shopDomainPayload = z.object({ shop_domain: z.string().optional(), myshopify_domain: z.string().optional() });

export function gid(type: 'InventoryItem' | 'Location', id: number | string): string {
  return `gid://shopify/${type}/${id}`;
}

/**
 * Each variant of a `products/update` payload, stamped with the product's `updated_at`. The
 * payload hints rather than tells: its quantity counts every location, shops that do not sell
 * online included, and it says nothing of selling plans. So a variant is marked as sold
 * whatever its stock only when the payload says so outright (policy `continue`, or no inventory
 * management), and a report that would restock a variant is confirmed through the Admin API
 * before it counts (see the webhook worker).
 */
export function productUpdateReports(shop: string, product: z.infer<typeof productUpdatePayload>): StockReport[] {
  const imageGiven = product.image !== undefined || product.images !== undefined;
  const image = product.image?.src ?? product.images?.[0]?.src ?? null;
  const common = {
    productId: product.admin_graphql_api_id,
    published: isPublished(product.status?.toLowerCase(), product.published_at),
    productTitle: product.title ?? null,
    // Absent from the payload: keep what is known rather than forget it.
    ...(imageGiven ? { imageUrl: image } : {}),
    productUrl: productUrl(shop, product.handle),
    updatedAt: product.updated_at ?? null,
  };
  return product.variants.map((variant) => ({
    ...common,
    variantId: variant.admin_graphql_api_id,
    ...(variant.inventory_item_id != null ? { inventoryItemId: gid('InventoryItem', variant.inventory_item_id) } : {}),
    available: variant.inventory_quantity ?? null,
    ...(soldWhateverStock(variant) ? { purchasableWithoutStock: true } : {}),
    variantTitle: variantTitle(variant.title),
  }));
}

function soldWhateverStock(variant: { inventory_policy?: string | null; inventory_management?: string | null }): boolean {
  return variant.inventory_policy?.toLowerCase() === 'continue' || variant.inventory_management === null;
}

/**
 * Every variant of a product read from the Admin API, as Shopify has it now. `asOf` is when it
 * was asked: webhook events from before it (delivered late) are stale against it.
 */
export function productStateReports(shop: string, product: ProductState, asOf: string): StockReport[] {
  const common = {
    productId: product.id,
    published: onSaleOnline(product),
    productTitle: product.title ?? null,
    imageUrl: product.featuredMedia?.preview?.image?.url ?? null,
    productUrl: productUrl(shop, product.handle),
    updatedAt: asOf,
  };
  return product.variants.nodes.map((variant) => ({
    ...common,
    variantId: variant.id,
    inventoryItemId: variant.inventoryItem.id,
    available: variant.sellableOnlineQuantity,
    purchasableWithoutStock: purchasableWithoutStock(product, variant),
    variantTitle: variantTitle(variant.title),
    price: priceOf(variant.price, product.currency),
  }));
}

/** A Money decimal in the shop's currency as minor units; one the currency cannot hold exactly is not known. */
function priceOf(decimal: string, currency: string): { minor: number; currency: string } | null {
  try {
    return { minor: toMinorUnits(decimal, currency), currency };
  } catch {
    return null;
  }
}

/** The countries asked about where the product is not on sale. */
export function unlistedCountries(product: ProductState): string[] {
  return Object.entries(product.publishedIn)
    .filter(([, published]) => !published)
    .map(([country]) => country);
}

/** On sale: active or unlisted (not draft or archived) and published to the online store. */
function isPublished(status: string | undefined, publishedAt: string | null | undefined): boolean {
  return (status === undefined || status === 'active' || status === 'unlisted') && publishedAt != null;
}

function productUrl(shop: string, handle: string | null | undefined): string | null {
  return handle ? `https://${shop}/products/${encodeURIComponent(handle)}` : null;
}

/** Shopify names the only variant of a product without options "Default Title"; it means nothing to a shopper. */
function variantTitle(title: string | null | undefined): string | null {
  return !title || title === 'Default Title' ? null : title;
}
