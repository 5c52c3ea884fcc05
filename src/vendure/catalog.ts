import { z } from 'zod';
import type { StockReport } from '../core/connectors/stock-report.ts';
import type { VendureAdminApi } from './admin-api.ts';

/** Variants asked for per request: the Admin API's lists take at most 1 000, and 100 keeps each answer small. */
export const VARIANTS_PER_PAGE = 100;

const VARIANT_FIELDS = `
  id productId name enabled trackInventory outOfStockThreshold useGlobalOutOfStockThreshold
  stockLevels { stockOnHand stockAllocated }
  featuredAsset { preview }
  product { id name slug enabled featuredAsset { preview } }`;

/** The shop-wide settings Vendure's stock rules fall back on, and the variants asked for, as the connection's channel has them. */
export const VARIANTS_BY_ID = `query RestockVariants($ids: [String!]!, $take: Int!) {
  globalSettings { trackInventory outOfStockThreshold }
  productVariants(options: { filter: { id: { in: $ids } }, take: $take }) { items { ${VARIANT_FIELDS} } }
}`;

export const VARIANTS_OF_PRODUCTS = `query RestockProductVariants($productIds: [String!]!, $take: Int!, $skip: Int!) {
  globalSettings { trackInventory outOfStockThreshold }
  productVariants(options: { filter: { productId: { in: $productIds } }, take: $take, skip: $skip }) { totalItems items { ${VARIANT_FIELDS} } }
}`;

const asset = z.object({ preview: z.string() }).nullable();
const variantSchema = z.object({
  id: z.string(),
  productId: z.string(),
  name: z.string(),
  enabled: z.boolean(),
  trackInventory: z.enum(['TRUE', 'FALSE', 'INHERIT']),
  outOfStockThreshold: z.number().int(),
  useGlobalOutOfStockThreshold: z.boolean(),
  stockLevels: z.array(z.object({ stockOnHand: z.number().int(), stockAllocated: z.number().int() })),
  featuredAsset: asset,
  product: z.object({ id: z.string(), name: z.string(), slug: z.string(), enabled: z.boolean(), featuredAsset: asset }),
});
export type VendureVariant = z.infer<typeof variantSchema>;

const globalSettingsSchema = z.object({ trackInventory: z.boolean(), outOfStockThreshold: z.number().int() });
export type GlobalStockSettings = z.infer<typeof globalSettingsSchema>;

const answerSchema = z.object({
  globalSettings: globalSettingsSchema,
  productVariants: z.object({ totalItems: z.number().int().optional(), items: z.array(variantSchema) }),
});

export interface VariantsRead {
  settings: GlobalStockSettings;
  variants: VendureVariant[];
}

/** The variants named, as the Admin API has them; a variant deleted or outside the key's channel is not among them. */
export async function readVariants(api: VendureAdminApi, ids: readonly string[]): Promise<VariantsRead> {
  const variants: VendureVariant[] = [];
  let settings: GlobalStockSettings | undefined;
  for (let start = 0; start < ids.length; start += VARIANTS_PER_PAGE) {
    const page = answerSchema.parse(await api.query(VARIANTS_BY_ID, { ids: ids.slice(start, start + VARIANTS_PER_PAGE), take: VARIANTS_PER_PAGE }));
    settings = page.globalSettings;
    variants.push(...page.productVariants.items);
  }
  return { settings: settings ?? (await readSettings(api)), variants };
}

/** Every variant of the products named, page by page. */
export async function readVariantsOfProducts(api: VendureAdminApi, productIds: readonly string[]): Promise<VariantsRead> {
  const variants: VendureVariant[] = [];
  let settings: GlobalStockSettings | undefined;
  for (let start = 0; start < productIds.length; start += VARIANTS_PER_PAGE) {
    const batch = productIds.slice(start, start + VARIANTS_PER_PAGE);
    for (let skip = 0; ; skip += VARIANTS_PER_PAGE) {
      const page = answerSchema.parse(await api.query(VARIANTS_OF_PRODUCTS, { productIds: batch, take: VARIANTS_PER_PAGE, skip }));
      settings = page.globalSettings;
      variants.push(...page.productVariants.items);
      if (page.productVariants.items.length < VARIANTS_PER_PAGE) break;
    }
  }
  return { settings: settings ?? (await readSettings(api)), variants };
}

/** What connecting checks: the key reads the catalogue and the shop's settings. */
export async function readSettings(api: VendureAdminApi): Promise<GlobalStockSettings> {
  const answer = z.object({ globalSettings: globalSettingsSchema, productVariants: z.object({ totalItems: z.number().int() }) }).parse(
    await api.query('query RestockCheck { globalSettings { trackInventory outOfStockThreshold } productVariants(options: { take: 1 }) { totalItems } }'),
  );
  return answer.globalSettings;
}

export const productGid = (id: string) => `gid://vendure/Product/${id}`;
export const variantGid = (id: string) => `gid://vendure/ProductVariant/${id}`;

/** The number in a `gid://vendure/Product/<n>` (or a variant's), when it is one of ours. */
export function vendureNumber(gid: string, kind: 'Product' | 'ProductVariant'): string | undefined {
  const match = new RegExp(`^gid://vendure/${kind}/([0-9]{1,18})$`).exec(gid);
  return match?.[1];
}

/**
 * A variant's stock as Vendure itself judges it (`ProductVariantService.getSaleableStockLevel`):
 * untracked inventory is always for sale; tracked, what can be sold is what is on hand in every
 * location, less what orders hold (allocated), less the out-of-stock threshold (the variant's own,
 * or the shop's), which may be negative to sell that many on backorder. A variant is on sale when
 * it and its product are enabled; one the channel does not show is never read.
 */
export function stockReportOf(variant: VendureVariant, settings: GlobalStockSettings, asOf: string, productUrl: (slug: string, productId: string) => string | null): StockReport {
  const tracked = variant.trackInventory === 'TRUE' || (variant.trackInventory === 'INHERIT' && settings.trackInventory);
  const threshold = variant.useGlobalOutOfStockThreshold ? settings.outOfStockThreshold : variant.outOfStockThreshold;
  const onHand = variant.stockLevels.reduce((sum, level) => sum + level.stockOnHand, 0);
  const allocated = variant.stockLevels.reduce((sum, level) => sum + level.stockAllocated, 0);
  return {
    productId: productGid(variant.productId),
    variantId: variantGid(variant.id),
    available: tracked ? Math.max(0, onHand - allocated - threshold) : null,
    purchasableWithoutStock: !tracked,
    published: variant.enabled && variant.product.enabled,
    productTitle: variant.product.name,
    variantTitle: variant.name === variant.product.name ? null : variant.name,
    imageUrl: (variant.featuredAsset ?? variant.product.featuredAsset)?.preview ?? null,
    productUrl: productUrl(variant.product.slug, variant.productId),
    updatedAt: asOf,
  };
}
