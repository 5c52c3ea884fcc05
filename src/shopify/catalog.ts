import { z } from 'zod';
import type { AdminApi } from './admin-api.ts';
import { UpstreamError } from './shopify-api.ts';

/**
 * What Shopify says a shopper can buy, read through the Admin API: the truth that webhook
 * payloads only hint at. A payload's `inventory_quantity` counts every location, shops that do not
 * sell online included, and says nothing of selling plans or markets; `sellableOnlineQuantity`,
 * the inventory policy, tracking, pre-order selling plans and publication in each market do.
 * (Admin GraphQL 2026-07: ProductVariant, InventoryItem, Product, SellingPlanCategory.)
 */

/** Products per query: each brings up to 100 variants, and one query may cost at most 1000 points. */
export const PRODUCTS_PER_QUERY = 2;
/** Selling plan groups and plans looked at per product, enough to find a pre-order one. */
const SELLING_PLANS_PER_PRODUCT = 5;

const variantState = z.object({
  id: z.string(),
  title: z.string().nullish(),
  inventoryPolicy: z.enum(['CONTINUE', 'DENY']),
  sellableOnlineQuantity: z.number().int(),
  /** Money: a decimal string in the shop's currency ("19.99"). */
  price: z.string(),
  inventoryItem: z.object({ id: z.string(), tracked: z.boolean() }),
  sellingPlanGroupsCount: z.object({ count: z.number().int() }).nullish(),
});

const productState = z.object({
  id: z.string(),
  title: z.string().nullish(),
  handle: z.string().nullish(),
  status: z.enum(['ACTIVE', 'ARCHIVED', 'DRAFT', 'UNLISTED']),
  publishedAt: z.string().nullish(),
  featuredMedia: z.object({ preview: z.object({ image: z.object({ url: z.string() }).nullish() }).nullish() }).nullish(),
  sellingPlanGroups: z.object({ nodes: z.array(z.object({ sellingPlans: z.object({ nodes: z.array(z.object({ category: z.string().nullish() })) }) })) }),
  variants: z.object({ nodes: z.array(variantState) }),
});

export type VariantState = z.infer<typeof variantState>;

/**
 * A product as Shopify has it now, per country asked about whether it is on sale there, and the
 * shop's currency, which its variants' prices are in.
 */
export type ProductState = z.infer<typeof productState> & { publishedIn: Record<string, boolean>; currency: string };

// A deleted product is null; an id of another type comes back as an empty object.
const nodesAnswer = z.object({ shop: z.object({ currencyCode: z.string() }), nodes: z.array(z.record(z.string(), z.unknown()).nullable()) });

const itemAnswer = z.object({
  inventoryItem: z.object({ variants: z.object({ nodes: z.array(z.object({ product: z.object({ id: z.string() }) })) }).nullish() }).nullish(),
});

const ITEM_PRODUCT = `query RestockInventoryItem($id: ID!) {
  inventoryItem(id: $id) { variants(first: 1) { nodes { product { id } } } }
}`;

/**
 * The products' state. Each country becomes a variable of type CountryCode and an aliased
 * `publishedInContext`, so the codes (already checked to be two capitals) never enter the query
 * text itself.
 */
function productsQuery(countries: string[]): string {
  const declared = countries.map((_, i) => `, $c${i}: CountryCode!`).join('');
  const markets = countries.map((_, i) => ` m${i}: publishedInContext(context: { country: $c${i} })`).join('');
  // The shop's currency rides along: a variant's price names none, and a query of its own would cost a call per read.
  return `query RestockProductStates($ids: [ID!]!${declared}) {
  nodes(ids: $ids) {
    ... on Product {
      id title handle status publishedAt${markets}
      featuredMedia { preview { image { url } } }
      sellingPlanGroups(first: ${SELLING_PLANS_PER_PRODUCT}) { nodes { sellingPlans(first: ${SELLING_PLANS_PER_PRODUCT}) { nodes { category } } } }
      variants(first: 100) {
        nodes { id title inventoryPolicy sellableOnlineQuantity inventoryItem { id tracked } sellingPlanGroupsCount { count } price }
      }
    }
  }
  shop { currencyCode }
}`;
}

/**
 * The products' state as Shopify has it now; deleted ones are left out. `countries` are asked
 * about only when the store granted `read_publications` (publishedInContext needs it).
 */
export async function readProductStates(admin: AdminApi, shop: string, accessToken: string, ids: string[], countries: string[]): Promise<ProductState[]> {
  const variables: Record<string, unknown> = { ids };
  countries.forEach((country, i) => (variables[`c${i}`] = country));
  const data = await admin.query(shop, accessToken, 'Reading products', productsQuery(countries), variables, nodesAnswer);
  const products: ProductState[] = [];
  for (const node of data.nodes) {
    if (node === null || node.id === undefined) continue;
    const parsed = productState.safeParse(node);
    if (!parsed.success) throw new UpstreamError(`Reading products: Shopify's answer lacks ${parsed.error.issues[0]?.path.join('.')}`);
    const publishedIn: Record<string, boolean> = {};
    countries.forEach((country, i) => (publishedIn[country] = node[`m${i}`] === true));
    products.push({ ...parsed.data, publishedIn, currency: data.shop.currencyCode });
  }
  return products;
}

/** The product an inventory item's variant belongs to; undefined when Shopify has none. */
export async function productOfInventoryItem(admin: AdminApi, shop: string, accessToken: string, inventoryItemId: string): Promise<string | undefined> {
  const data = await admin.query(shop, accessToken, 'Looking up an inventory item', ITEM_PRODUCT, { id: inventoryItemId }, itemAnswer);
  return data.inventoryItem?.variants?.nodes[0]?.product.id;
}

/** On sale in the online store: active or unlisted (reachable by its link), and published there. */
export function onSaleOnline(product: Pick<ProductState, 'status' | 'publishedAt'>): boolean {
  return (product.status === 'ACTIVE' || product.status === 'UNLISTED') && product.publishedAt != null;
}

/**
 * Bought whatever its stock: sold on when out of stock (CONTINUE), stock not tracked, or offered
 * by a pre-order selling plan. Shopify lists a product's groups with those of its variants, so a
 * variant in any group of a product that has a pre-order plan counts as sold by pre-order.
 */
export function purchasableWithoutStock(product: ProductState, variant: VariantState): boolean {
  if (variant.inventoryPolicy === 'CONTINUE' || !variant.inventoryItem.tracked) return true;
  const preOrder = product.sellingPlanGroups.nodes.some((group) => group.sellingPlans.nodes.some((plan) => plan.category === 'PRE_ORDER'));
  return preOrder && (variant.sellingPlanGroupsCount?.count ?? 0) > 0;
}
