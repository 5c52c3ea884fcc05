import { z } from 'zod';
import type { StockReport } from '../core/connectors/stock-report.ts';
import { storeDomainOf } from './api.ts';

/**
 * A variant as the Catalog API renders it (`include=variants`): only what stock needs. Every
 * product has at least one (its base variant), so every report names a variant.
 * https://developer.bigcommerce.com/docs/rest-catalog/product-variants
 */
const variantSchema = z.object({
  id: z.number().int().positive(),
  inventory_level: z.number().int(),
  purchasing_disabled: z.boolean(),
  image_url: z.string().optional(),
  option_values: z.array(z.object({ label: z.string() })).optional(),
});

/** A product as the Catalog API renders it (`GET /v3/catalog/products/{id}?include=variants,images`). */
export const bcProductSchema = z.object({
  id: z.number().int().positive(),
  name: z.string(),
  inventory_tracking: z.enum(['none', 'product', 'variant']),
  inventory_level: z.number().int(),
  availability: z.enum(['available', 'disabled', 'preorder']),
  is_visible: z.boolean(),
  custom_url: z.object({ url: z.string() }).nullable().optional(),
  images: z.array(z.object({ url_standard: z.string(), is_thumbnail: z.boolean().optional() })).optional(),
  variants: z.array(variantSchema),
});
export type BcProduct = z.infer<typeof bcProductSchema>;

export const productGid = (id: number) => `gid://bigcommerce/Product/${id}`;
export const variantGid = (id: number) => `gid://bigcommerce/ProductVariant/${id}`;

/** The numeric id of a `gid://bigcommerce/Product/N`. */
export function productNumber(gid: string): number | undefined {
  const match = /^gid:\/\/bigcommerce\/Product\/([0-9]{1,20})$/.exec(gid);
  return match ? Number(match[1]) : undefined;
}

/**
 * Each variant's stock as a report. BigCommerce counts stock per product or per variant
 * (`inventory_tracking`), or not at all:
 * - `none`: sold whatever the number;
 * - `product`: every variant has the product's `inventory_level`;
 * - `variant`: each has its own.
 * A product sells only when `availability` is not `disabled` and it is visible; a variant only
 * when its purchasing is not disabled. `preorder` takes orders without stock: sold, like Shopify's
 * "continue selling when out of stock".
 */
export function stockReportsOf(hash: string, product: BcProduct, asOf: string): StockReport[] {
  const productOnSale = product.is_visible && product.availability !== 'disabled';
  const thumbnail = product.images?.find((image) => image.is_thumbnail)?.url_standard ?? product.images?.[0]?.url_standard ?? null;
  const productUrl = product.custom_url?.url ? `https://${storeDomainOf(hash)}${product.custom_url.url}` : null;
  return product.variants.map((variant) => ({
    productId: productGid(product.id),
    variantId: variantGid(variant.id),
    available: product.inventory_tracking === 'none' ? null : Math.max(0, product.inventory_tracking === 'product' ? product.inventory_level : variant.inventory_level),
    purchasableWithoutStock: product.inventory_tracking === 'none' || product.availability === 'preorder',
    published: productOnSale && !variant.purchasing_disabled,
    productTitle: product.name,
    variantTitle: variant.option_values?.length ? variant.option_values.map((value) => value.label).join(' / ') : null,
    imageUrl: variant.image_url || thumbnail,
    productUrl,
    updatedAt: asOf,
  }));
}
