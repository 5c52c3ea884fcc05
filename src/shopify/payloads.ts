import { z } from 'zod';
import type { StockReport } from '../inventory/service.ts';
import type { AdminItemVariant, AdminProduct, AdminProductFields } from './admin-api.ts';

/** Topics as the library names them (`products/update` → `PRODUCTS_UPDATE`). */
export const HANDLED_TOPICS = [
  'PRODUCTS_UPDATE',
  'INVENTORY_LEVELS_UPDATE',
  'APP_UNINSTALLED',
  'APP_SUBSCRIPTIONS_UPDATE',
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

/** Each variant of a `products/update` payload, stamped with the product's `updated_at`. */
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
    variantTitle: variantTitle(variant.title),
  }));
}

/** The variant an inventory item lookup found, as Shopify has it now. */
export function itemVariantReport(shop: string, inventoryItemId: string, variant: AdminItemVariant, asOf: string): StockReport {
  return {
    ...adminProductFields(shop, variant.product, asOf),
    variantId: variant.id,
    inventoryItemId,
    available: variant.inventoryQuantity ?? null,
    variantTitle: variantTitle(variant.title),
  };
}

/** Every variant of a product read from the Admin API, as Shopify has it now. */
export function adminProductReports(shop: string, product: AdminProduct, asOf: string): StockReport[] {
  const common = adminProductFields(shop, product, asOf);
  return product.variants.nodes.map((variant) => ({
    ...common,
    variantId: variant.id,
    ...(variant.inventoryItem ? { inventoryItemId: variant.inventoryItem.id } : {}),
    available: variant.inventoryQuantity ?? null,
    variantTitle: variantTitle(variant.title),
  }));
}

/**
 * `asOf` is when the Admin API was asked: its answer is the state at that moment, so webhook
 * events from before it (delivered late) are stale against it.
 */
function adminProductFields(shop: string, product: AdminProductFields, asOf: string) {
  return {
    productId: product.id,
    published: isPublished(product.status?.toLowerCase(), product.publishedAt),
    productTitle: product.title ?? null,
    imageUrl: product.featuredImage?.url ?? null,
    productUrl: productUrl(shop, product.handle),
    updatedAt: asOf,
  };
}

/** On sale: active (not draft or archived) and published to the online store. */
function isPublished(status: string | undefined, publishedAt: string | null | undefined): boolean {
  return (status ?? 'active') === 'active' && publishedAt != null;
}

function productUrl(shop: string, handle: string | null | undefined): string | null {
  return handle ? `https://${shop}/products/${encodeURIComponent(handle)}` : null;
}

/** Shopify names the only variant of a product without options "Default Title"; it means nothing to a shopper. */
function variantTitle(title: string | null | undefined): string | null {
  return !title || title === 'Default Title' ? null : title;
}
