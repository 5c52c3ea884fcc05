import '@shopify/shopify-api/adapters/node';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from './fixtures/suites.ts';
import { ApiVersion, GraphqlQueryError, LogSeverity, RequestedTokenType, Session, shopifyApi, type Shopify } from '@shopify/shopify-api';
import { loadConfig } from '../src/config.ts';
import { failOnLeakedHandles } from './fixtures/leaks.ts';
import { startShopifyAdmin, type FakeProduct, type ShopifyAdminStandIn } from './fixtures/shopify-admin.ts';
import { ADMIN_API_VERSION } from './fixtures/shopify-admin-schema.ts';

failOnLeakedHandles();

// The stand-in must be as strict as Shopify's Admin GraphQL API: every refusal below is what
// Shopify answers (HTTP 200, an `errors` array in graphql-ruby's shape), driven through the
// official library's client as the app drives it.

const API_KEY = 'restock-stand-in-test-app';
const API_SECRET = `shpss_${randomBytes(16).toString('hex')}`;
/** What the app asks by default (SHOPIFY_SCOPES). */
const APP_SCOPES = 'read_products,read_inventory';

let counter = 0;
const newShop = () => `stand-in-${Date.now() % 1_000_000}${++counter}.myshopify.com`;
const newId = () => Number(`${Date.now() % 1_000_000}${String(++counter).padStart(4, '0')}`);

const INVENTORY_ITEM = `query RestockInventoryItem($id: ID!) {
  inventoryItem(id: $id) {
    variant { id title inventoryQuantity product { id title } }
  }
}`;

const ACCESS_SCOPES_DOCUMENTATION = 'https://shopify.dev/api/usage/access-scopes';

function product(overrides: Partial<FakeProduct> = {}): FakeProduct {
  const id = newId();
  return {
    id,
    title: `Mug ${id}`,
    handle: `mug-${id}`,
    status: 'ACTIVE',
    publishedAt: null,
    variants: [{ id: newId(), title: 'Blue', inventoryItemId: newId(), inventoryQuantity: 3 }],
    ...overrides,
  };
}

describe('the Shopify Admin GraphQL stand-in, as strict as Shopify', () => {
  let standIn: ShopifyAdminStandIn;
  let shopify: Shopify;

  before(async () => {
    standIn = await startShopifyAdmin({ apiKey: API_KEY, apiSecret: API_SECRET, scopes: APP_SCOPES });
    shopify = shopifyApi({
      apiKey: API_KEY,
      apiSecretKey: API_SECRET,
      apiVersion: ApiVersion.July26,
      scopes: APP_SCOPES.split(','),
      hostName: 'restock.test',
      isEmbeddedApp: true,
      logger: { level: LogSeverity.Error, log: async () => {} },
    });
  });
  after(() => standIn.close());

  /** A shop with the app installed by token exchange, the merchant having granted `scopes`. */
  async function installed(scopes?: string): Promise<{ shop: string; session: Session }> {
    const shop = newShop();
    standIn.addShop(shop, { email: `owner@${shop}`, ...(scopes ? { scopes } : {}) });
    const { session } = await shopify.auth.tokenExchange({ shop, sessionToken: await standIn.sessionToken(shop), requestedTokenType: RequestedTokenType.OfflineAccessToken });
    return { shop, session };
  }

  async function request(session: Session, query: string, variables?: Record<string, unknown>): Promise<unknown> {
    const response = await new shopify.clients.Graphql({ session }).request(query, variables ? { variables } : {});
    return response.data;
  }

  /**
   * The data and errors Shopify answered (the library throws on errors), after checking they came
   * with HTTP 200. The library drops a null or absent `data`: both read as null here.
   */
  async function refused(session: Session, query: string, variables?: Record<string, unknown>): Promise<{ data: unknown; errors: unknown[] }> {
    try {
      await new shopify.clients.Graphql({ session }).request(query, variables ? { variables } : {});
    } catch (err) {
      assert.ok(err instanceof GraphqlQueryError, String(err));
      assert.equal((err.response as unknown as Response).status, 200, 'GraphQL errors come with HTTP 200');
      const body = err.body as { data?: unknown; errors: { graphQLErrors: unknown[] } };
      return { data: body.data ?? null, errors: body.errors.graphQLErrors };
    }
    assert.fail('Shopify would have refused this request');
  }

  it('serves the schema of the API version the app is configured with', () => {
    const config = loadConfig({ SHOPIFY_API_KEY: API_KEY, SHOPIFY_API_SECRET: API_SECRET, RESTOCK_ENCRYPTION_KEY: randomBytes(32).toString('base64') });
    assert.equal(config.platforms.shopify?.apiVersion, ADMIN_API_VERSION, 'bump test/fixtures/shopify-admin-schema.graphql with SHOPIFY_API_VERSION');
  });

  it('answers only the fields selected, with the schema types, and null where the shop has nothing', async () => {
    const { shop, session } = await installed();
    const mug = product();
    standIn.setProduct(shop, mug);
    const [variant] = mug.variants;

    assert.deepEqual(await request(session, '{ shop { email } }'), { shop: { email: `owner@${shop}` } });
    assert.deepEqual(await request(session, 'query Item($id: ID!) { inventoryItem(id: $id) { variant { id } } }', { id: `gid://shopify/InventoryItem/${variant!.inventoryItemId}` }), {
      inventoryItem: { variant: { id: `gid://shopify/ProductVariant/${variant!.id}` } },
    });
    assert.deepEqual(await request(session, INVENTORY_ITEM, { id: 'gid://shopify/InventoryItem/1' }), { inventoryItem: null }, 'an item the shop does not have');

    const products = await request(
      session,
      `query Products($ids: [ID!]!) {
        nodes(ids: $ids) { ... on Product { id publishedAt featuredImage { url } variants(first: 5) { nodes { inventoryQuantity } } } }
      }`,
      { ids: [`gid://shopify/Product/${mug.id}`, 'gid://shopify/Product/1', `gid://shopify/ProductVariant/${variant!.id}`] },
    );
    assert.deepEqual(products, {
      nodes: [
        { id: `gid://shopify/Product/${mug.id}`, publishedAt: null, featuredImage: null, variants: { nodes: [{ inventoryQuantity: 3 }] } },
        null,
        {},
      ],
    }, 'a missing product is null; a node of another type has none of the Product fields');
  });

  it('refuses a field its type does not have', async () => {
    const { session } = await installed();
    const answer = await refused(session, INVENTORY_ITEM.replace('inventoryQuantity', 'inventoryQuantityy'), { id: 'gid://shopify/InventoryItem/1' });
    assert.deepEqual(answer, {
      data: null,
      errors: [
        {
          message: "Field 'inventoryQuantityy' doesn't exist on type 'ProductVariant'",
          locations: [{ line: 3, column: 24 }],
          path: ['query RestockInventoryItem', 'inventoryItem', 'variant', 'inventoryQuantityy'],
          extensions: { code: 'undefinedField', typeName: 'ProductVariant', fieldName: 'inventoryQuantityy' },
        },
      ],
    });
  });

  it('refuses a variable whose type is not the argument type', async () => {
    const { session } = await installed();
    const answer = await refused(session, INVENTORY_ITEM.replace('$id: ID!', '$id: Int!'), { id: 'gid://shopify/InventoryItem/1' });
    assert.deepEqual(answer, {
      data: null,
      errors: [
        {
          message: 'Type mismatch on variable $id and argument id (Int! / ID!)',
          locations: [{ line: 2, column: 17 }],
          path: ['query RestockInventoryItem', 'inventoryItem', 'id'],
          extensions: { code: 'variableMismatch', variableName: 'id', typeName: 'Int!', argumentName: 'id', errorMessage: 'Type mismatch' },
        },
      ],
    });
    const nullable = await refused(session, INVENTORY_ITEM.replace('$id: ID!', '$id: ID'), { id: 'gid://shopify/InventoryItem/1' });
    assert.equal((nullable.errors[0] as { message: string }).message, 'Nullability mismatch on variable $id and argument id (ID / ID!)');
  });

  it('refuses a fragment on a type the schema does not have', async () => {
    const { session } = await installed();
    const answer = await refused(session, 'query RestockProducts($ids: [ID!]!) {\n  nodes(ids: $ids) { ... on Orange { bogus } }\n}', { ids: [] });
    assert.deepEqual(answer, {
      data: null,
      errors: [
        {
          message: "No such type Orange, so it can't be a fragment condition",
          locations: [{ line: 2, column: 22 }],
          path: ['query RestockProducts', 'nodes', '... on Orange'],
          extensions: { code: 'undefinedType', typeName: 'Orange' },
        },
      ],
    });
  });

  it('refuses a request missing a required variable, or with one of the wrong shape, before running it', async () => {
    const { shop, session } = await installed();
    assert.deepEqual(await refused(session, INVENTORY_ITEM, {}), {
      data: null,
      errors: [
        {
          message: 'Variable $id of type ID! was provided invalid value',
          locations: [{ line: 1, column: 28 }],
          extensions: { value: null, problems: [{ path: [], explanation: 'Expected value to not be null' }] },
        },
      ],
    });

    const create = `mutation Subscribe($name: String!, $lineItems: [AppSubscriptionLineItemInput!]!, $returnUrl: URL!) {
      appSubscriptionCreate(name: $name, lineItems: $lineItems, returnUrl: $returnUrl) { appSubscription { id } userErrors { field message } }
    }`;
    const lowerCaseCurrency = [{ plan: { appRecurringPricingDetails: { price: { amount: 10, currencyCode: 'usd' } } } }];
    const answer = await refused(session, create, { name: 'Pro', lineItems: lowerCaseCurrency, returnUrl: 'https://restock.test/back' });
    const [error] = answer.errors as Array<{ message: string; extensions: { value: unknown; problems: Array<{ path: unknown[]; explanation: string }> } }>;
    assert.match(error!.message, /^Variable \$lineItems of type \[AppSubscriptionLineItemInput!\]! was provided invalid value for 0\.plan\.appRecurringPricingDetails\.price\.currencyCode \(Expected "usd" to be one of: .*USD/);
    assert.deepEqual(error!.extensions.value, lowerCaseCurrency);
    assert.deepEqual(error!.extensions.problems.map((problem) => problem.path), [[0, 'plan', 'appRecurringPricingDetails', 'price', 'currencyCode']]);

    const unknownField = [{ plan: { appRecurringPricingDetails: { price: { amount: 10, currencyCode: 'USD' }, every: 'month' } } }];
    const [unknown] = (await refused(session, create, { name: 'Pro', lineItems: unknownField, returnUrl: 'https://restock.test/back' })).errors as Array<{ extensions: { problems: unknown[] } }>;
    assert.deepEqual(unknown!.extensions.problems, [{ path: [0, 'plan', 'appRecurringPricingDetails', 'every'], explanation: 'Field is not defined on AppRecurringPricingInput' }]);
    assert.deepEqual(standIn.appSubscriptions(shop), [], 'nothing ran');
  });

  it('refuses other mistakes the way graphql-ruby words them', async () => {
    const { session } = await installed();
    const codes = async (query: string, variables?: Record<string, unknown>) =>
      (await refused(session, query, variables)).errors.map((error) => (error as { extensions?: { code?: string } }).extensions?.code);
    assert.deepEqual(await codes('{ inventoryItem { id } }'), ['missingRequiredArguments']);
    assert.deepEqual(await codes('{ shop { email(format: "x") } }'), ['argumentNotAccepted']);
    assert.deepEqual(await codes('{ shop }'), ['selectionMismatch']);
    assert.deepEqual(await codes('{ shop { email { address } } }'), ['selectionMismatch']);
    assert.deepEqual(await codes('query Q($id: ID!) { shop { email } }', { id: '1' }), ['variableNotUsed']);
    assert.deepEqual(await codes('query Q { inventoryItem(id: $id) { id } }'), ['variableNotDefined']);
    assert.deepEqual(await codes('query Q($id: Identifier!) { inventoryItem(id: $id) { id } }', { id: '1' }), ['variableRequiresValidType']);
    // A connection needs a page size, as Shopify requires.
    const unbounded = await refused(session, '{ currentAppInstallation { oneTimePurchases { nodes { id } } } }');
    assert.equal((unbounded.errors[0] as { message: string }).message, 'you must provide one of first or last');
    const tooLong = await refused(session, '{ currentAppInstallation { oneTimePurchases(first: 251) { nodes { id } } } }');
    assert.match((tooLong.errors[0] as { message: string }).message, /Expected a page size from 0 to 250/);
  });

  it('refuses a field the granted scopes do not cover, with the scope it needs', async () => {
    const { session } = await installed();
    assert.deepEqual(await refused(session, '{ customers(first: 1) { nodes { id } } }'), {
      data: null,
      errors: [
        {
          message: 'Access denied for customers field. Required access: `read_customers` access scope.',
          locations: [{ line: 1, column: 3 }],
          path: ['customers'],
          extensions: { code: 'ACCESS_DENIED', documentation: ACCESS_SCOPES_DOCUMENTATION, requiredAccess: '`read_customers` access scope.' },
        },
      ],
    });
    // A field of an open type can need a scope of its own.
    const tags = await refused(session, '{ shop { email customerTags(first: 5) { nodes } } }');
    assert.equal(tags.data, null, 'Shop.customerTags is non-null, and so is shop: the null reaches the root');
    assert.deepEqual((tags.errors[0] as { path: unknown[] }).path, ['shop', 'customerTags']);
  });

  it('grants what Shopify grants: one scope of several, and read access with write access', async () => {
    const inventoryOnly = await installed('read_inventory');
    const item = (await installed()).shop;
    const mug = product();
    standIn.setProduct(item, mug);
    // InventoryItem needs read_inventory or read_products; its variant is a ProductVariant, which needs read_products.
    standIn.setProduct(inventoryOnly.shop, mug);
    const itemId = `gid://shopify/InventoryItem/${mug.variants[0]!.inventoryItemId}`;
    assert.deepEqual(await request(inventoryOnly.session, 'query Item($id: ID!) { inventoryItem(id: $id) { id } }', { id: itemId }), { inventoryItem: { id: itemId } });
    const variant = await refused(inventoryOnly.session, INVENTORY_ITEM, { id: itemId });
    assert.deepEqual(variant.data, { inventoryItem: null }, 'the non-null variant denied makes the nullable item null');
    assert.equal((variant.errors[0] as { message: string }).message, 'Access denied for variant field. Required access: `read_products` access scope.');

    const writer = await installed('write_products');
    standIn.setProduct(writer.shop, mug);
    assert.deepEqual(await request(writer.session, `{ nodes(ids: ["gid://shopify/Product/${mug.id}"]) { ... on Product { title } } }`), { nodes: [{ title: mug.title }] });
  });

  it('refuses a webhook topic whose scope the merchant did not grant, as a userError', async () => {
    const { shop, session } = await installed('read_products');
    const subscribe = `mutation Subscribe($topic: WebhookSubscriptionTopic!, $webhookSubscription: WebhookSubscriptionInput!) {
      webhookSubscriptionCreate(topic: $topic, webhookSubscription: $webhookSubscription) { webhookSubscription { id topic } userErrors { field message } }
    }`;
    const webhookSubscription = { callbackUrl: 'https://restock.test/webhooks/shopify', format: 'JSON' };
    const products = (await request(session, subscribe, { topic: 'PRODUCTS_UPDATE', webhookSubscription })) as { webhookSubscriptionCreate: { webhookSubscription: { topic: string } } };
    assert.equal(products.webhookSubscriptionCreate.webhookSubscription.topic, 'PRODUCTS_UPDATE');
    const levels = (await request(session, subscribe, { topic: 'INVENTORY_LEVELS_UPDATE', webhookSubscription })) as {
      webhookSubscriptionCreate: { webhookSubscription: null; userErrors: Array<{ field: string[]; message: string }> };
    };
    assert.equal(levels.webhookSubscriptionCreate.webhookSubscription, null);
    assert.match(levels.webhookSubscriptionCreate.userErrors[0]!.message, /^Topic Invalid topic specified: inventory_levels\/update\. Does it exist\? Is there a missing access scope\?/);
    assert.deepEqual(standIn.webhookSubscriptions(shop).map((sub) => sub.topic), ['PRODUCTS_UPDATE']);
  });

  it('refuses an unknown topic or a mistyped argument before anything changes', async () => {
    const { shop, session } = await installed();
    const subscribe = `mutation Subscribe($topic: WebhookSubscriptionTopic!) {
      webhookSubscriptionCreate(topic: $topic, webhookSubscription: { callbackUrl: "https://restock.test/webhooks/shopify" }) { userErrors { message } }
    }`;
    const [error] = (await refused(session, subscribe, { topic: 'PRODUCTS_UPDATED' })).errors as Array<{ extensions: { problems: Array<{ explanation: string }> } }>;
    assert.match(error!.extensions.problems[0]!.explanation, /^Expected "PRODUCTS_UPDATED" to be one of: /);
    assert.deepEqual(standIn.webhookSubscriptions(shop), []);
  });
});
