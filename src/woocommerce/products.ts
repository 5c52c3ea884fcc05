import { z } from 'zod';
import type { StockReport } from '../core/connectors/stock-report.ts';

/**
 * A product or variation as WooCommerce's REST API renders it (`GET /products/{id}`, the items of
 * `GET /products/{id}/variations`, and every `product.*` webhook's body): only the fields stock
 * needs. https://woocommerce.github.io/woocommerce-rest-api-docs/#product-properties
 */
export const wooProductSchema = z.object({
  id: z.number().int().positive(),
  name: z.string().optional(),
  type: z.string().optional().describe('simple | grouped | external | variable; variation when a variation is fetched or delivered as a product'),
  parent_id: z.number().int().nonnegative().optional(),
  status: z.string().optional().describe('publish | draft | pending | private'),
  permalink: z.string().optional(),
  // true | false, or "parent" for a variation whose parent counts the stock.
  manage_stock: z.union([z.boolean(), z.literal('parent')]),
  stock_quantity: z.number().int().nullable().optional(),
  stock_status: z.enum(['instock', 'outofstock', 'onbackorder']),
  backorders: z.enum(['no', 'notify', 'yes']).optional(),
  images: z.array(z.object({ src: z.string() }).passthrough()).optional(),
  image: z.object({ src: z.string() }).passthrough().nullable().optional(),
  variations: z.array(z.number().int()).optional(),
});

export type WooProduct = z.infer<typeof wooProductSchema>;

export const productGid = (id: number) => `gid://woocommerce/Product/${id}`;
export const variationGid = (id: number) => `gid://woocommerce/ProductVariant/${id}`;

/** The numeric id of a `gid://woocommerce/Product/N`. */
export function productNumber(gid: string): number | undefined {
  const match = /^gid:\/\/woocommerce\/Product\/([0-9]{1,20})$/.exec(gid);
  return match ? Number(match[1]) : undefined;
}

/**
 * One product's or variation's stock as a report. WooCommerce says what it sells by
 * `stock_status`, worked out from the quantity and `backorders` when it counts stock itself:
 * - counted (`manage_stock` true, or "parent"): the quantity is what is available, and a store
 *   that takes backorders sells without stock;
 * - not counted: `instock` and `onbackorder` sell whatever the number, `outofstock` does not.
 * A variation's parent (`variable`) is no report of its own: its variations are.
 */
export function stockReportOf(product: WooProduct, asOf: string, parent?: WooProduct): StockReport | undefined {
  if (product.type === 'variable') return undefined;
  const isVariation = product.type === 'variation' || parent !== undefined;
  const parentId = parent?.id ?? product.parent_id;
  if (isVariation && !parentId) return undefined;
  const counted = product.manage_stock !== false;
  const report: StockReport = {
    productId: productGid(isVariation ? parentId! : product.id),
    variantId: isVariation ? variationGid(product.id) : null,
    available: counted ? Math.max(0, product.stock_quantity ?? 0) : product.stock_status === 'outofstock' ? 0 : null,
    purchasableWithoutStock: counted ? product.backorders !== undefined && product.backorders !== 'no' : product.stock_status !== 'outofstock',
    // A variation's own status is publish, or private when switched off; its parent's counts too.
    published: product.status === 'publish' && (parent === undefined || parent.status === 'publish'),
    productTitle: parent?.name ?? product.name ?? null,
    variantTitle: isVariation && parent?.name && product.name?.startsWith(`${parent.name} - `) ? product.name.slice(parent.name.length + 3) : null,
    imageUrl: product.image?.src ?? product.images?.[0]?.src ?? parent?.images?.[0]?.src ?? null,
    productUrl: product.permalink ?? parent?.permalink ?? null,
    updatedAt: asOf,
  };
  return report;
}
