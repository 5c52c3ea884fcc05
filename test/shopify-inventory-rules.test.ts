/**
 * Restock alerts follow Shopify's own inventory rules: a variant sold on backorder (CONTINUE),
 * untracked or by pre-order is never sold out; UNLISTED products are on sale; stock counts only
 * where it sells online (`sellableOnlineQuantity`), whatever a webhook's totals say; a shopper is
 * alerted only where the product is on sale (markets). Each runs end to end: signed webhooks as
 * Shopify sends them, the worker, the Admin API stand-in answering on Shopify's 2026-07 schema.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from './fixtures/suites.ts';
import { failOnLeakedHandles } from './fixtures/leaks.ts';
import { dialectSkip, startTestApp, testDialects, type TestApp } from './fixtures/app.ts';
import { deliverWebhook, installByTokenExchange, productUpdatePayload, shopifyTestApp } from './fixtures/shopify-app.ts';
import { startShopifyAdmin, type FakeProduct, type FakeVariant, type ShopifyAdminStandIn } from './fixtures/shopify-admin.ts';

failOnLeakedHandles();

const { apiKey: API_KEY, apiSecret: API_SECRET, scopes: SCOPES, env: ENV } = shopifyTestApp('restock-rules-app', 'read_products,read_inventory,read_publications');

let counter = 0;
const unique = () => `${Date.now() % 1_000_000}${++counter}`;
const newId = () => Number(`${Date.now() % 1_000_000}${String(++counter).padStart(4, '0')}`);

function fakeProduct(variant: Partial<FakeVariant> = {}, product: Partial<FakeProduct> = {}): FakeProduct {
  const id = newId();
  return {
    id,
    title: `Boots ${id}`,
    handle: `boots-${id}`,
    status: 'ACTIVE',
    publishedAt: '2024-01-01T00:00:00Z',
    variants: [{ id: newId(), title: 'Size 42', inventoryItemId: newId(), inventoryQuantity: 0, ...variant }],
    ...product,
  };
}

const productGid = (product: FakeProduct) => `gid://shopify/Product/${product.id}`;
const variantGid = (product: FakeProduct) => `gid://shopify/ProductVariant/${product.variants[0]!.id}`;

for (const dialect of testDialects()) {
  describe(`Shopify inventory rules on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    let t: TestApp;
    let shopify: ShopifyAdminStandIn;
    before(async () => {
      shopify = await startShopifyAdmin({ apiKey: API_KEY, apiSecret: API_SECRET, scopes: SCOPES });
      // Reconciliation off: every state here comes from a webhook and what it makes the worker read.
      t = await startTestApp(dialect, { ...ENV, RECONCILE_INTERVAL_MINUTES: '0' });
    });
    after(async () => {
      await t.close();
      await shopify.close();
    });

    async function installedShop(): Promise<string> {
      const shop = `rules-${unique()}.myshopify.com`;
      await installByTokenExchange(t, shopify, shop);
      return shop;
    }

    async function subscribe(shop: string, product: FakeProduct, country?: string): Promise<string> {
      const email = `shopper-${unique()}@example.com`;
      const res = await t.app.inject({
        method: 'POST',
        url: '/storefront/v1/subscribe',
        payload: { shop, productId: productGid(product), variantId: variantGid(product), email, ...(country ? { country } : {}) },
      });
      assert.equal(res.statusCode, 201, res.body);
      return email;
    }

    /** Shopify's state changes, then it says so by `products/update` (and the worker runs). */
    async function productChanged(shop: string, product: FakeProduct) {
      shopify.setProduct(shop, product);
      const res = await deliverWebhook(t, API_SECRET, { topic: 'products/update', shop, payload: productUpdatePayload(product, new Date().toISOString()) });
      assert.equal(res.statusCode, 200, res.body);
      await t.runWorker();
    }

    async function levelChanged(shop: string, product: FakeProduct, locationId: number, available: number) {
      shopify.setProduct(shop, product);
      const payload = { inventory_item_id: product.variants[0]!.inventoryItemId, location_id: locationId, available, updated_at: new Date().toISOString() };
      assert.equal((await deliverWebhook(t, API_SECRET, { topic: 'inventory_levels/update', shop, payload })).statusCode, 200);
      await t.runWorker();
    }

    async function restocks(product: FakeProduct): Promise<number> {
      const rows = await t.database.db.selectFrom('restocks').select('id').where('product_id', '=', productGid(product)).execute();
      return rows.length;
    }

    /** Alerts planned or sent to the address. */
    async function alerted(email: string): Promise<number> {
      return (await t.database.db.selectFrom('notifications').select('id').where('email', '=', email).execute()).length;
    }

    async function soldOutOnStorefront(shop: string, product: FakeProduct): Promise<boolean | null> {
      const res = await t.app.inject({ method: 'GET', url: `/storefront/v1/availability?shop=${shop}&productId=${encodeURIComponent(productGid(product))}` });
      assert.equal(res.statusCode, 200, res.body);
      return res.json().soldOut;
    }

    /**
     * A shopper waits for a variant as Shopify first has it, then stock arrives (`quantity` at a
     * shop that fulfils online orders) and Shopify says so by `products/update`.
     */
    async function stockArrivesForAShopper(variant: Partial<FakeVariant>, product: Partial<FakeProduct>, quantity: number) {
      const shop = await installedShop();
      const waited = fakeProduct(variant, product);
      await productChanged(shop, waited);
      const email = await subscribe(shop, waited);
      waited.variants[0]!.inventoryQuantity = quantity;
      waited.variants[0]!.sellableOnlineQuantity = quantity;
      await productChanged(shop, waited);
      return { shop, product: waited, email };
    }

    const neverSoldOut = [
      { what: 'a CONTINUE variant', variant: { inventoryPolicy: 'CONTINUE', inventoryQuantity: -3, sellableOnlineQuantity: -3 } },
      // The payload says nothing of tracking: only the Admin API read tells.
      { what: 'an untracked variant', variant: { tracked: false, inventoryQuantity: 0 } },
    ] as const;
    for (const { what, variant } of neverSoldOut) {
      it(`${what} is never sold out: stock arriving alerts nobody, and the storefront offers no form`, async () => {
        const { shop, product, email } = await stockArrivesForAShopper(variant, {}, 5);
        assert.equal(await restocks(product), 0);
        assert.equal(await alerted(email), 0);
        assert.equal(await soldOutOnStorefront(shop, product), false);
      });
    }

    it('a variant sold by a pre-order selling plan is not sold out for the widget', async () => {
      const shop = await installedShop();
      const product = fakeProduct({ preOrder: true, inventoryQuantity: 0 });
      await productChanged(shop, product);
      assert.equal(await soldOutOnStorefront(shop, product), false);
    });

    it('a DENY variant switched to CONTINUE becomes buyable: its waiting shoppers are alerted', async () => {
      const shop = await installedShop();
      const product = fakeProduct({ inventoryQuantity: 0 });
      await productChanged(shop, product);
      const email = await subscribe(shop, product);
      product.variants[0]!.inventoryPolicy = 'CONTINUE';
      await productChanged(shop, product);
      assert.equal(await restocks(product), 1);
      await t.runWorker();
      assert.equal(await alerted(email), 1);
    });

    it('stock arriving only at a retail location alerts nobody; stock arriving online does', async () => {
      const shop = await installedShop();
      const product = fakeProduct({ inventoryQuantity: 0, sellableOnlineQuantity: 0 });
      await productChanged(shop, product);
      const email = await subscribe(shop, product);

      // A shop that does not fulfil online orders receives 6: Shopify's total says 6, online 0.
      product.variants[0]!.inventoryQuantity = 6;
      await levelChanged(shop, product, 71, 6);
      await productChanged(shop, product);
      assert.equal(await restocks(product), 0, 'retail-only stock is no restock');
      assert.equal(await alerted(email), 0);

      // The warehouse that ships online orders receives 3.
      product.variants[0]!.inventoryQuantity = 9;
      product.variants[0]!.sellableOnlineQuantity = 3;
      await levelChanged(shop, product, 72, 3);
      assert.equal(await restocks(product), 1);
      await t.runWorker();
      assert.equal(await alerted(email), 1);
      const row = await t.database.db.selectFrom('inventory_variants').selectAll().where('product_id', '=', productGid(product)).executeTakeFirstOrThrow();
      assert.equal(row.available, 3, 'the quantity kept is what sells online');
    });

    it('an UNLISTED product is on sale (reachable by its link): its restock alerts', async () => {
      const { product, email } = await stockArrivesForAShopper({ inventoryQuantity: 0 }, { status: 'UNLISTED' }, 2);
      assert.equal(await restocks(product), 1);
      await t.runWorker();
      assert.equal(await alerted(email), 1);
    });

    it('a product not published to the online store is not on sale: its stock alerts nobody', async () => {
      const { product, email } = await stockArrivesForAShopper({ inventoryQuantity: 0 }, { publishedAt: null }, 5);
      assert.equal(await restocks(product), 0);
      assert.equal(await alerted(email), 0);
    });

    it('markets: a shopper is alerted only where the product is on sale; the others wait on', async () => {
      const shop = await installedShop();
      const product = fakeProduct({ inventoryQuantity: 0 }, { unpublishedIn: ['CA'] });
      await productChanged(shop, product);
      const inCanada = await subscribe(shop, product, 'CA');
      const inTheStates = await subscribe(shop, product, 'US');
      const unknown = await subscribe(shop, product);
      product.variants[0]!.inventoryQuantity = 10;
      await productChanged(shop, product);
      await t.runWorker();
      await t.runWorker();
      assert.equal(await alerted(inTheStates), 1);
      assert.equal(await alerted(unknown), 1);
      assert.equal(await alerted(inCanada), 0);
      const waiting = await t.database.db.selectFrom('subscriptions').select(['status', 'country']).where('product_id', '=', productGid(product)).where('country', '=', 'CA').executeTakeFirstOrThrow();
      assert.equal(waiting.status, 'active', 'the Canadian shopper still waits for the product to be sold there');
    });

    it('a country that is not two capital letters is refused before anything is stored', async () => {
      const shop = await installedShop();
      const product = fakeProduct();
      const res = await t.app.inject({
        method: 'POST',
        url: '/storefront/v1/subscribe',
        payload: { shop, productId: productGid(product), email: `bad-${unique()}@example.com`, country: 'ca}) { id } #' },
      });
      assert.equal(res.statusCode, 400, res.body);
      assert.match(res.headers['content-type'] as string, /^application\/problem\+json/);
    });
  });
}
