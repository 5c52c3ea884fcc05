/**
 * The counts a store's pages read instead of counting its subscriptions (`subscription_counts`,
 * `waitlists`, kept by triggers since migration 0017) must equal the real counts after every kind
 * of change: signups from the widget and from agents, a duplicate, a cancellation, alerts sent,
 * a customer erased, a store erased, a subscription moved to another product. And what the
 * service answers from them must be what the count over subscriptions answered, order included.
 */
import assert from 'node:assert/strict';
import { sql } from 'kysely';
import { after, before, describe, it } from './fixtures/suites.ts';
import { failOnLeakedHandles } from './fixtures/leaks.ts';
import { dialectSkip, startTestApp, testDialects, type TestApp } from './fixtures/app.ts';
import type { Database } from '../src/core/db/database.ts';

failOnLeakedHandles();

const UNLIMITED = { STOREFRONT_LIMIT_PER_HOUR: '1000000' };
const SOURCE = { kind: 'inventory-api', ref: 'agt_counts_test', verified: false } as const;

let counter = 0;
const unique = () => `${Date.now() % 1_000_000}${++counter}`;
const product = () => `gid://shopify/Product/${unique()}`;
const variant = () => `gid://shopify/ProductVariant/${unique()}`;

/** The counts as the tables hold them, and as the subscriptions themselves give them. */
async function assertCountsMatch(database: Database, step: string): Promise<void> {
  const { db } = database;
  const kept = await db.selectFrom('subscription_counts').select(['store_domain', 'status', 'n']).where('n', '<>', 0).orderBy('store_domain').orderBy('status').execute();
  const real = await db
    .selectFrom('subscriptions')
    .select(['store_domain', 'status', (eb) => eb.fn.countAll<number>().as('n')])
    .where('store_domain', 'is not', null)
    .groupBy(['store_domain', 'status'])
    .orderBy('store_domain')
    .orderBy('status')
    .execute();
  assert.deepEqual(kept.map((r) => ({ ...r, n: Number(r.n) })), real.map((r) => ({ ...r, n: Number(r.n) })), `${step}: subscription_counts equals the subscriptions per store and status`);

  const waitlists = await db.selectFrom('waitlists').select(['store_domain', 'product_id', 'variant_key', 'waiting']).orderBy('store_domain').orderBy('product_id').orderBy('variant_key').execute();
  const waiting = await db
    .selectFrom('subscriptions')
    .select(['store_domain', 'product_id', sql<string>`coalesce(variant_id, '')`.as('variant_key'), (eb) => eb.fn.countAll<number>().as('waiting')])
    .where('store_domain', 'is not', null)
    .where('status', '=', 'active')
    .groupBy(['store_domain', 'product_id', sql`coalesce(variant_id, '')`])
    .orderBy('store_domain')
    .orderBy('product_id')
    .orderBy('variant_key')
    .execute();
  assert.deepEqual(
    waitlists.map((r) => ({ ...r, waiting: Number(r.waiting) })),
    waiting.map((r) => ({ ...r, waiting: Number(r.waiting) })),
    `${step}: waitlists holds exactly the active subscriptions per store, product and variant, and no empty waitlist`,
  );

  const sums = await db.selectFrom('waitlists').select(['store_domain', 'product_id', 'variant_key', 'waiting_since_sum']).execute();
  const active = await db.selectFrom('subscriptions').select(['store_domain', 'product_id', 'variant_id', 'created_at']).where('store_domain', 'is not', null).where('status', '=', 'active').execute();
  const signedUp = new Map<string, number>();
  for (const row of active) {
    const key = `${row.store_domain}|${row.product_id}|${row.variant_id ?? ''}`;
    signedUp.set(key, (signedUp.get(key) ?? 0) + Math.floor(Date.parse(row.created_at) / 1000));
  }
  assert.deepEqual(
    Object.fromEntries(sums.map((r) => [`${r.store_domain}|${r.product_id}|${r.variant_key}`, Number(r.waiting_since_sum)]).sort()),
    Object.fromEntries([...signedUp].sort()),
    `${step}: each waitlist's waiting_since_sum is its shoppers' sign-up times summed (epoch seconds)`,
  );
}

/** What `waitingCounts` answered before the waitlists: the count over subscriptions, in its order. */
async function countedOverSubscriptions(database: Database, shop: string, order: 'product' | 'most-wanted') {
  const query = database.db
    .selectFrom('subscriptions')
    .select(['product_id', 'variant_id', (eb) => eb.fn.countAll<number>().as('waiting')])
    .where('store_domain', '=', shop)
    .where('status', '=', 'active')
    .groupBy(['product_id', 'variant_id']);
  // Most wanted: the whole product (no variant) before its variants, on both databases.
  const rows = order === 'most-wanted' ? await query.orderBy('waiting', 'desc').orderBy('product_id').orderBy(sql`coalesce(variant_id, '')`).execute() : await query.orderBy('product_id').orderBy('variant_id').execute();
  return rows.map((row) => ({ productId: row.product_id, variantId: row.variant_id, waiting: Number(row.waiting) }));
}

for (const dialect of testDialects()) {
  describe(`store counts kept by triggers on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    let t: TestApp;
    before(async () => {
      t = await startTestApp(dialect, UNLIMITED);
    });
    after(() => t.close());

    async function widgetSignup(shop: string, productId: string, variantId: string | null, email: string): Promise<void> {
      const res = await t.app.inject({
        method: 'POST',
        url: '/storefront/v1/subscribe',
        headers: { 'content-type': 'application/json' },
        payload: JSON.stringify({ shop, productId, variantId, email }),
      });
      assert.equal(res.statusCode, 201, res.body);
    }

    it('stay equal to the real counts through signups, a duplicate, a cancellation, sends and erasure', async () => {
      const shop = `counts-${unique()}.myshopify.com`;
      const other = `counts-${unique()}.myshopify.com`;
      for (const domain of [shop, other]) await t.app.restock.stores.createStore(domain, `owner-${unique()}@example.com`);
      const [mug, shirt] = [product(), product()];
      const [large, small] = [variant(), variant()];
      await assertCountsMatch(t.database, 'before anything');

      for (let i = 0; i < 3; i++) await widgetSignup(shop, mug, large, `large-${i}@example.com`);
      await widgetSignup(shop, mug, small, 'small@example.com');
      await widgetSignup(shop, mug, null, 'whole-mug@example.com');
      await widgetSignup(shop, shirt, null, 'shirt@example.com');
      await widgetSignup(other, mug, large, 'elsewhere@example.com');
      await assertCountsMatch(t.database, 'after signups from the widget');

      // An agent not bound to the store: its own subscription, then the same one again.
      const body = { productId: mug, variantId: large, email: 'agent-made@example.com', shop };
      const made = await t.post('/api/v1/alerts/subscribe', body);
      assert.equal(made.statusCode, 200, made.body);
      assert.equal((await t.post('/api/v1/alerts/subscribe', body)).json().subscriptionId, made.json().subscriptionId, 'a duplicate returns the same subscription');
      // A subscription of no store is not counted anywhere.
      assert.equal((await t.post('/api/v1/alerts/subscribe', { productId: mug, variantId: large, email: 'no-store@example.com' })).statusCode, 200);
      await assertCountsMatch(t.database, 'after an agent subscribed twice and once for no store');

      const cancelled = await t.inject({ method: 'DELETE', url: `/api/v1/alerts/${made.json().subscriptionId}` });
      assert.equal(cancelled.statusCode, 200, cancelled.body);
      await assertCountsMatch(t.database, 'after a cancellation');

      assert.deepEqual(await t.app.restock.alerts.waitingCounts(shop), await countedOverSubscriptions(t.database, shop, 'product'), 'the queue lists the same waitlists in the same order');
      assert.deepEqual(await t.app.restock.alerts.waitingCounts(shop, 500, 'most-wanted'), await countedOverSubscriptions(t.database, shop, 'most-wanted'), 'the demand lists the same waitlists, most wanted first');

      // The large variant is back: its three shoppers and the whole mug's are alerted and notified.
      await t.app.restock.inventory.reportStock(shop, [{ productId: mug, variantId: large, available: 10, productTitle: 'Mug', variantTitle: 'Large' }], SOURCE);
      await t.app.restock.worker.runUntilIdle();
      const notified = await t.database.db.selectFrom('subscriptions').select((eb) => eb.fn.countAll<number>().as('n')).where('store_domain', '=', shop).where('status', '=', 'notified').executeTakeFirstOrThrow();
      assert.equal(Number(notified.n), 4, 'the restock notified the three shoppers of the variant and the one of the whole product');
      await assertCountsMatch(t.database, 'after alerts were sent');

      await t.app.restock.alerts.eraseCustomer(shop, 'SMALL@example.com');
      await assertCountsMatch(t.database, 'after a customer was erased');

      // A change of product (no path of the service makes one today) moves the subscription between waitlists.
      await t.database.write((trx) => trx.updateTable('subscriptions').set({ product_id: shirt }).where('email', '=', 'whole-mug@example.com').execute());
      await t.database.write((trx) => trx.updateTable('subscriptions').set({ product_id: shirt, variant_id: null }).where('email', '=', 'shirt@example.com').execute());
      await assertCountsMatch(t.database, 'after subscriptions changed product');

      // Single statements over many rows, as the worker's marking makes: some rows move between
      // counts, some within one (a sign-up time rewritten), and one changes nothing counted.
      await t.database.write((trx) => trx.updateTable('subscriptions').set({ created_at: '2026-01-02T03:04:05.000Z' }).where('store_domain', '=', shop).where('status', '=', 'active').where('product_id', '=', shirt).execute());
      await assertCountsMatch(t.database, 'after sign-up times were rewritten in one statement');
      await t.database.write((trx) => trx.updateTable('subscriptions').set({ email_muted: 1 }).where('store_domain', 'in', [shop, other]).execute());
      await t.database.write((trx) => trx.updateTable('subscriptions').set({ status: 'cancelled' }).where('store_domain', 'in', [shop, other]).where('product_id', '=', mug).where('status', '=', 'active').execute());
      await assertCountsMatch(t.database, 'after one statement cancelled subscriptions of two stores and two variants');

      await t.app.restock.alerts.eraseStore(other);
      await assertCountsMatch(t.database, 'after a store was erased');
      assert.deepEqual(await t.app.restock.alerts.waitingCounts(other), [], 'an erased store waits for nothing');

      const counts = await t.app.restock.alerts.waitingCounts(shop);
      assert.deepEqual(counts, await countedOverSubscriptions(t.database, shop, 'product'), 'what is left is what the subscriptions say');
    });
  });
}
