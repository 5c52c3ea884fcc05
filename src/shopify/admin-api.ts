import { z } from 'zod';
import { callShopify, offlineSession, UpstreamError, type ShopifyApi } from './shopify-api.ts';

/** The topics the app subscribes to by API; the compliance topics are declared in the app's configuration. */
export const SUBSCRIBED_TOPICS = ['PRODUCTS_UPDATE', 'INVENTORY_LEVELS_UPDATE', 'APP_UNINSTALLED', 'APP_SUBSCRIPTIONS_UPDATE'] as const;

const productFields = z.object({
  id: z.string(),
  title: z.string().nullish(),
  handle: z.string().nullish(),
  status: z.string().nullish(),
  publishedAt: z.string().nullish(),
  featuredImage: z.object({ url: z.string() }).nullish(),
});
export type AdminProductFields = z.infer<typeof productFields>;

const variantFields = z.object({
  id: z.string(),
  title: z.string().nullish(),
  inventoryQuantity: z.number().nullish(),
});

const inventoryItemAnswer = z.object({
  inventoryItem: z.object({ variant: variantFields.extend({ product: productFields }).nullish() }).nullish(),
});
export type AdminItemVariant = NonNullable<NonNullable<z.infer<typeof inventoryItemAnswer>['inventoryItem']>['variant']>;

const productWithVariants = productFields.extend({
  variants: z.object({ nodes: z.array(variantFields.extend({ inventoryItem: z.object({ id: z.string() }).nullish() })) }),
});
export type AdminProduct = z.infer<typeof productWithVariants>;

// A deleted product is null; an id of another type comes back as an empty object.
const productsAnswer = z.object({ nodes: z.array(z.record(z.string(), z.unknown()).nullable()) });

const SHOP_EMAIL = `query RestockShopEmail { shop { email } }`;

const REGISTER_WEBHOOK = `mutation RestockRegisterWebhook($topic: WebhookSubscriptionTopic!, $webhookSubscription: WebhookSubscriptionInput!) {
  webhookSubscriptionCreate(topic: $topic, webhookSubscription: $webhookSubscription) {
    webhookSubscription { id }
    userErrors { field message }
  }
}`;

const INVENTORY_ITEM_VARIANT = `query RestockInventoryItem($id: ID!) {
  inventoryItem(id: $id) {
    variant {
      id title inventoryQuantity
      product { id title handle status publishedAt featuredImage { url } }
    }
  }
}`;

const PRODUCTS = `query RestockProducts($ids: [ID!]!) {
  nodes(ids: $ids) {
    ... on Product {
      id title handle status publishedAt featuredImage { url }
      variants(first: 100) { nodes { id title inventoryQuantity inventoryItem { id } } }
    }
  }
}`;

const APP_SUBSCRIPTION_CREATE = `mutation RestockAppSubscription($name: String!, $lineItems: [AppSubscriptionLineItemInput!]!, $returnUrl: URL!, $test: Boolean) {
  appSubscriptionCreate(name: $name, lineItems: $lineItems, returnUrl: $returnUrl, test: $test) {
    appSubscription { id status }
    confirmationUrl
    userErrors { field message }
  }
}`;

const appSubscriptionAnswer = z.object({
  appSubscriptionCreate: z
    .object({
      appSubscription: z.object({ id: z.string(), status: z.string() }).nullish(),
      confirmationUrl: z.string().nullish(),
      userErrors: z.array(z.object({ message: z.string() })),
    })
    .nullable(),
});

/**
 * The Admin GraphQL operations the app needs, through the library's client with a store's
 * offline token. Answers are checked against the fields asked for before anyone reads them.
 */
export class AdminApi {
  constructor(private readonly shopify: ShopifyApi) {}

  /** The address Shopify has for the store: its owner's, for install and data requests. */
  async shopEmail(shop: string, accessToken: string): Promise<string> {
    const data = await this.query(shop, accessToken, 'Reading the shop', SHOP_EMAIL, {}, z.object({ shop: z.object({ email: z.string().min(3) }) }));
    return data.shop.email;
  }

  /**
   * Subscribes the store's events to our endpoint. An address already subscribed for a topic
   * (a reinstall that kept them) counts as done.
   */
  async registerWebhooks(shop: string, accessToken: string, callbackUrl: string): Promise<string[]> {
    const answer = z.object({
      webhookSubscriptionCreate: z.object({ userErrors: z.array(z.object({ message: z.string() })) }).nullable(),
    });
    for (const topic of SUBSCRIBED_TOPICS) {
      // callbackUrl rather than the newer uri: it is accepted by every API version the library supports.
      const data = await this.query(shop, accessToken, `Subscribing to ${topic}`, REGISTER_WEBHOOK, { topic, webhookSubscription: { callbackUrl, format: 'JSON' } }, answer);
      const errors = (data.webhookSubscriptionCreate?.userErrors ?? []).filter((error) => !/already (been )?taken|already exists/i.test(error.message));
      if (errors.length > 0) throw new UpstreamError(`Subscribing to ${topic}: ${errors.map((error) => error.message).join('; ')}`);
    }
    return [...SUBSCRIBED_TOPICS];
  }

  /**
   * A recurring app charge (Shopify Billing) the merchant approves at `confirmationUrl`; Shopify
   * then reports its status by `app_subscriptions/update`.
   */
  async createAppSubscription(
    shop: string,
    accessToken: string,
    charge: { name: string; amount: number; currencyCode: string; returnUrl: string; test: boolean },
  ): Promise<{ id: string; confirmationUrl: string }> {
    const lineItems = [{ plan: { appRecurringPricingDetails: { price: { amount: charge.amount, currencyCode: charge.currencyCode }, interval: 'EVERY_30_DAYS' } } }];
    const data = await this.query(shop, accessToken, 'Creating the app subscription', APP_SUBSCRIPTION_CREATE, { name: charge.name, lineItems, returnUrl: charge.returnUrl, test: charge.test }, appSubscriptionAnswer);
    const created = data.appSubscriptionCreate;
    const errors = created?.userErrors ?? [];
    if (!created?.appSubscription || !created.confirmationUrl || errors.length > 0) {
      throw new UpstreamError(`Creating the app subscription: ${errors.map((error) => error.message).join('; ') || 'no subscription in the answer'}`);
    }
    return { id: created.appSubscription.id, confirmationUrl: created.confirmationUrl };
  }

  /** The variant (and its product) an inventory item belongs to; undefined when Shopify has none. */
  async variantOfInventoryItem(shop: string, accessToken: string, inventoryItemId: string): Promise<AdminItemVariant | undefined> {
    const data = await this.query(shop, accessToken, 'Looking up an inventory item', INVENTORY_ITEM_VARIANT, { id: inventoryItemId }, inventoryItemAnswer);
    return data.inventoryItem?.variant ?? undefined;
  }

  /** Products with their variants' stock; deleted products are left out. */
  async products(shop: string, accessToken: string, ids: string[]): Promise<AdminProduct[]> {
    const data = await this.query(shop, accessToken, 'Reading products', PRODUCTS, { ids }, productsAnswer);
    const products: AdminProduct[] = [];
    for (const node of data.nodes) {
      if (node === null || node.id === undefined) continue;
      const product = productWithVariants.safeParse(node);
      if (!product.success) throw new UpstreamError(`Reading products: Shopify's answer lacks ${product.error.issues[0]?.path.join('.')}`);
      products.push(product.data);
    }
    return products;
  }

  /** One GraphQL operation with the store's token; the answer is checked against `shape` before anyone reads it. */
  async query<T>(
    shop: string,
    accessToken: string,
    what: string,
    query: string,
    variables: Record<string, unknown>,
    shape: z.ZodType<T>,
  ): Promise<T> {
    const client = new this.shopify.clients.Graphql({ session: offlineSession(this.shopify, shop, accessToken) });
    const response = await callShopify(what, (signal) => client.request(query, { variables, signal }));
    const parsed = shape.safeParse(response.data);
    if (!parsed.success) throw new UpstreamError(`${what}: Shopify's answer lacks ${parsed.error.issues[0]?.path.join('.') || 'data'}`);
    return parsed.data;
  }
}
