/**
 * Storefront availability is kept in memory between changes and revalidated by ETag: a stock
 * change or a store's change shows at the next page view, in this process and in any other
 * (through Redis, or PostgreSQL's notifications), and a CDN can revalidate what it holds.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from './fixtures/suites.ts';
import { createTestDatabase, dialectSkip, testConfig, testDialects, type TestDatabase } from './fixtures/app.ts';
import { startProcess, type ServiceProcess } from './fixtures/oauth.ts';
import { changeChannels, startTwoProcesses, type TwoProcesses } from './fixtures/two-processes.ts';
import { REDIS_URL, redisAvailable } from './fixtures/redis.ts';

const redisUp = await redisAvailable();
const SOURCE = { kind: 'inventory-api', ref: 'agt_storefront_cache_test', verified: false } as const;

let counter = 0;
const unique = () => `${Date.now() % 1_000_000}${++counter}`;

async function availability(origin: string, shop: string, productId: string, etag?: string) {
  const response = await fetch(`${origin}/storefront/v1/availability?${new URLSearchParams({ shop, productId })}`, {
    headers: etag ? { 'if-none-match': etag } : {},
  });
  const text = await response.text();
  return { status: response.status, etag: response.headers.get('etag'), cacheControl: response.headers.get('cache-control'), body: text ? JSON.parse(text) : undefined };
}

async function newStoreWithSoldOutProduct(process: ServiceProcess) {
  const shop = `cache-${unique()}.myshopify.com`;
  const productId = `gid://shopify/Product/${unique()}`;
  const variantId = `gid://shopify/ProductVariant/${unique()}`;
  await process.app.restock.stores.createStore(shop, `owner-${unique()}@example.com`);
  await process.app.restock.inventory.reportStock(shop, [{ productId, variantId, available: 0 }], SOURCE);
  return { shop, productId, variantId };
}

for (const dialect of testDialects()) {
  describe(`storefront availability cache on ${dialect}, one process`, { skip: dialectSkip(dialect) }, () => {
    let testDatabase: TestDatabase;
    let service: ServiceProcess;
    let origin: string;

    before(async () => {
      testDatabase = await createTestDatabase(dialect);
      service = await startProcess(testConfig(testDatabase.url));
      origin = await service.app.listen({ host: '127.0.0.1', port: 0 });
    });

    after(async () => {
      await service?.close();
      await testDatabase?.drop();
    });

    it('answers 304 to its own ETag, and a new ETag and answer once the stock changes', async () => {
      const { shop, productId, variantId } = await newStoreWithSoldOutProduct(service);
      const first = await availability(origin, shop, productId);
      assert.equal(first.status, 200);
      assert.equal(first.body.soldOut, true);
      assert.ok(first.etag, 'the answer must carry an ETag');
      assert.equal(first.cacheControl, 'public, max-age=30');
      const again = await availability(origin, shop, productId, first.etag!);
      assert.equal(again.status, 304, 'an unchanged answer revalidated with its ETag must be a 304');

      await service.app.restock.inventory.reportStock(shop, [{ productId, variantId, available: 5 }], SOURCE);
      const restocked = await availability(origin, shop, productId, first.etag!);
      assert.equal(restocked.status, 200, 'the old ETag must no longer match once the stock changed');
      assert.equal(restocked.body.soldOut, false, 'the restock must show at the next page view');
      assert.notEqual(restocked.etag, first.etag);
    });

    it("a store's change shows at the next page view", async () => {
      const { shop, productId } = await newStoreWithSoldOutProduct(service);
      assert.equal((await availability(origin, shop, productId)).body.soldOut, true);
      await service.app.restock.stores.uninstall(shop);
      const after = await availability(origin, shop, productId);
      assert.equal(after.body.soldOut, null, 'an uninstalled store must answer as a store that is not a customer');
    });
  });

  for (const { channel, env } of changeChannels(dialect, redisUp, REDIS_URL)) {
    describe(`storefront availability cache on ${dialect}, changes through ${channel}`, { skip: dialectSkip(dialect) }, () => {
      let processes: TwoProcesses;
      let one: ServiceProcess;
      let twoOrigin: string;

      before(async () => {
        processes = await startTwoProcesses(dialect, env);
        ({ one, twoOrigin } = processes);
      });

      after(async () => {
        await processes?.close();
      });

      it('a restock reported to one process shows on the other at the next page view', async () => {
        const { shop, productId, variantId } = await newStoreWithSoldOutProduct(one);
        const kept = await availability(twoOrigin, shop, productId);
        assert.equal(kept.body.soldOut, true);
        assert.equal((await availability(twoOrigin, shop, productId, kept.etag!)).status, 304, 'the second view should be answered from what was kept');
        await one.app.restock.inventory.reportStock(shop, [{ productId, variantId, available: 3 }], SOURCE);
        const restocked = await availability(twoOrigin, shop, productId);
        assert.equal(restocked.body.soldOut, false, 'the other process must not answer from what it kept before the restock');
      });
    });
  }
}
