/**
 * The purchasing view (docs/purchasing.md): waitlists ranked by shoppers waiting, then time
 * waited, with the revenue at the current price, as JSON pages and as CSV. Time waited is read
 * from `waitlists.waiting_since_sum`, kept by triggers: it must equal the sum over the waiting
 * subscriptions after every kind of change (sign-ups, a cancellation, alerts sent, a sign-up time
 * rewritten), and the answers must follow it. Prices come from `reportInventory` and from the
 * Shopify Admin API stand-in. Another store's agent and an agent of no store get a 404; a bad
 * page or cursor a 400 that changes nothing.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from './fixtures/suites.ts';
import { failOnLeakedHandles } from './fixtures/leaks.ts';
import { dialectSkip, startTestApp, testDialects, type TestApp } from './fixtures/app.ts';
import { agentOf, call, expectProblem, expectStatus, storeWithAgent, type StoreAgent } from './fixtures/agents.ts';
import { deliverWebhook, productUpdatePayload, shopifyTestApp } from './fixtures/shopify-app.ts';
import { startShopifyAdmin, type FakeProduct, type ShopifyAdminStandIn } from './fixtures/shopify-admin.ts';
import type { Database } from '../src/core/db/database.ts';

failOnLeakedHandles();

const { apiKey: API_KEY, apiSecret: API_SECRET, scopes: SCOPES, env: SHOPIFY_ENV } = shopifyTestApp('restock-purchasing-app', 'read_products,read_inventory');
const ENV = { ...SHOPIFY_ENV, STOREFRONT_LIMIT_PER_HOUR: '1000000', BATCH_INTERVAL_SECONDS: '0', FREQUENCY_CAP_MINUTES: '0', RECONCILE_INTERVAL_MINUTES: '0' };
const DAY = 86_400;

let counter = 0;
const newId = () => Number(`${Date.now() % 1_000_000}${String(++counter).padStart(4, '0')}`);
const product = () => `gid://shopify/Product/${newId()}`;
const variant = () => `gid://shopify/ProductVariant/${newId()}`;
const nowSeconds = () => Math.floor(Date.now() / 1000);

interface Row {
  productId: string;
  variantId: string | null;
  productTitle: string | null;
  variantTitle: string | null;
  waiting: number;
  totalWaitSeconds: number;
  meanWaitSeconds: number;
  price: { minor: number; currency: string } | null;
  potentialRevenue: { minor: number; currency: string } | null;
}

/** The kept sums equal the sums over the waiting subscriptions, per waitlist. */
async function assertSumsKept(database: Database, step: string): Promise<void> {
  const kept = await database.db.selectFrom('waitlists').select(['store_domain', 'product_id', 'variant_key', 'waiting_since_sum']).execute();
  const waiting = await database.db.selectFrom('subscriptions').select(['store_domain', 'product_id', 'variant_id', 'created_at']).where('store_domain', 'is not', null).where('status', '=', 'active').execute();
  const real = new Map<string, number>();
  for (const row of waiting) {
    const key = `${row.store_domain}|${row.product_id}|${row.variant_id ?? ''}`;
    real.set(key, (real.get(key) ?? 0) + Math.floor(Date.parse(row.created_at) / 1000));
  }
  const held = new Map(kept.map((row) => [`${row.store_domain}|${row.product_id}|${row.variant_key}`, Number(row.waiting_since_sum)]));
  assert.deepEqual(Object.fromEntries([...held].sort()), Object.fromEntries([...real].sort()), `${step}: waiting_since_sum is the waiting subscriptions' sign-up times summed`);
}

for (const dialect of testDialects()) {
  describe(`purchasing view on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    let t: TestApp;
    let shopify: ShopifyAdminStandIn;
    before(async () => {
      shopify = await startShopifyAdmin({ apiKey: API_KEY, apiSecret: API_SECRET, scopes: SCOPES });
      t = await startTestApp(dialect, ENV);
    });
    after(async () => {
      await t.close();
      await shopify.close();
    });

    async function signUp(shop: string, productId: string, variantId: string | null, waitedDays?: number): Promise<string> {
      const email = `shopper-${newId()}@example.com`;
      const res = await t.app.inject({ method: 'POST', url: '/storefront/v1/subscribe', payload: { shop, productId, ...(variantId ? { variantId } : {}), email } });
      assert.equal(res.statusCode, 201, res.body);
      const { id } = await t.database.db.selectFrom('subscriptions').select('id').where('email', '=', email).executeTakeFirstOrThrow();
      if (waitedDays !== undefined) await signedUpAgo(id, waitedDays);
      return id;
    }

    /** Moves a sign-up back in time, as if the shopper had waited so long (the triggers follow `created_at`). */
    async function signedUpAgo(id: string, days: number): Promise<void> {
      const at = new Date((nowSeconds() - days * DAY) * 1000).toISOString();
      await t.database.write((trx) => trx.updateTable('subscriptions').set({ created_at: at }).where('id', '=', id).execute());
    }

    async function view(agent: StoreAgent, query = ''): Promise<{ items: Row[]; next: string | null }> {
      return expectStatus(await call(t.app, 'GET', `/api/v1/stores/${agent.domain}/purchasing${query}`, { token: agent.token }), 200);
    }

    /** Every page of `limit` rows, following `next`. */
    async function allPages(agent: StoreAgent, limit: number): Promise<Row[]> {
      const rows: Row[] = [];
      let cursor: string | null = null;
      for (let pages = 0; pages < 100; pages++) {
        const page: { items: Row[]; next: string | null } = await view(agent, `?limit=${limit}${cursor ? `&cursor=${cursor}` : ''}`);
        assert.ok(page.items.length <= limit);
        rows.push(...page.items);
        if (page.next === null) return rows;
        cursor = page.next;
      }
      assert.fail('the pages never ended');
    }

    const keys = (rows: Row[]) => rows.map((row) => `${row.productId}|${row.variantId ?? ''}`);

    it('ranks by shoppers waiting, then time waited, and follows sign-ups, cancellations and alerts', async () => {
      const agent = await storeWithAgent(t.app, t.database, 'purchasing');
      const [mug, shirt, poster] = [product(), product(), product()];
      const [mugLarge, shirtBlue] = [variant(), variant()];
      // Each sign-up is moved back from the second it was made in: a loaded machine takes seconds
      // between the first sign-up and the view, and every shopper's wait grows by that.
      const from = nowSeconds();
      for (let i = 0; i < 3; i++) await signUp(agent.domain, mug, mugLarge, 1);
      const shirtIds: string[] = [];
      for (let i = 0; i < 3; i++) shirtIds.push(await signUp(agent.domain, shirt, shirtBlue, 2 + i));
      await signUp(agent.domain, poster, null, 30);
      await assertSumsKept(t.database, 'after sign-ups moved back in time');

      const first = await view(agent);
      const to = nowSeconds();
      assert.deepEqual(keys(first.items), [`${shirt}|${shirtBlue}`, `${mug}|${mugLarge}`, `${poster}|`], 'three waiting before one; of three each, the shirt waited longer (2, 3 and 4 days against 1 each)');
      const [shirtRow, mugRow, posterRow] = first.items as [Row, Row, Row];
      assert.equal(shirtRow.waiting, 3);
      assert.ok(shirtRow.totalWaitSeconds >= 9 * DAY + 3 * (from - to) && shirtRow.totalWaitSeconds <= 9 * DAY + 3 * (to - from), `the shirt's shoppers waited 9 days in all (${shirtRow.totalWaitSeconds} s)`);
      assert.ok(Math.abs(shirtRow.meanWaitSeconds - 3 * DAY) <= to - from + 1, 'three days each on average');
      assert.ok(Math.abs(mugRow.totalWaitSeconds - 3 * DAY) <= 3 * (to - from + 1));
      assert.ok(Math.abs(posterRow.meanWaitSeconds - 30 * DAY) <= to - from + 1, 'the whole product waited 30 days');
      assert.equal(posterRow.variantId, null);
      assert.equal(first.next, null, 'one page holds them all');

      // One shirt shopper cancels (the store's agent may cancel its shoppers' alerts): the mug leads.
      expectStatus(await call(t.app, 'DELETE', `/api/v1/alerts/${shirtIds[2]}`, { token: agent.token }), 200);
      await assertSumsKept(t.database, 'after a cancellation');
      const afterCancel = await view(agent);
      assert.deepEqual(keys(afterCancel.items), [`${mug}|${mugLarge}`, `${shirt}|${shirtBlue}`, `${poster}|`]);
      assert.ok(Math.abs(afterCancel.items[1]!.totalWaitSeconds - 5 * DAY) <= 2 * (nowSeconds() - from + 1), 'the shopper who left takes their 4 days along');

      // Two shoppers for the poster, the second of long ago: it waits as long as the shirt, and longer.
      await signUp(agent.domain, poster, null, 40);
      await assertSumsKept(t.database, 'after another sign-up');
      assert.deepEqual(keys((await view(agent)).items), [`${mug}|${mugLarge}`, `${poster}|`, `${shirt}|${shirtBlue}`], 'two each: the poster waited 70 days, the shirt 5');

      // The mug is back: its shoppers are alerted and no longer wait.
      expectStatus(await call(t.app, 'POST', `/api/v1/stores/${agent.domain}/inventory`, { token: agent.token, body: { items: [{ productId: mug, variantId: mugLarge, available: 10 }] } }), 200);
      await t.runWorker();
      await assertSumsKept(t.database, 'after alerts were sent');
      assert.deepEqual(keys((await view(agent)).items), [`${poster}|`, `${shirt}|${shirtBlue}`], 'the alerted waitlist is gone');
    });

    it('pages on a keyset cursor through ties, the same rows as one page', async () => {
      const agent = await storeWithAgent(t.app, t.database, 'purchasing-pages');
      // Waitlists of one shopper each, several with the same sign-up time, and a few of two.
      const same = new Date(Date.now() - 5 * DAY * 1000).toISOString();
      for (let i = 0; i < 7; i++) {
        const id = await signUp(agent.domain, product(), variant());
        if (i % 2 === 0) await t.database.write((trx) => trx.updateTable('subscriptions').set({ created_at: same }).where('id', '=', id).execute());
      }
      for (let i = 0; i < 3; i++) {
        const [p, v] = [product(), variant()];
        await signUp(agent.domain, p, v, i);
        await signUp(agent.domain, p, v, i);
      }
      const whole = (await view(agent, '?limit=500')).items;
      assert.equal(whole.length, 10);
      for (const limit of [1, 2, 3, 4]) assert.deepEqual(keys(await allPages(agent, limit)), keys(whole), `pages of ${limit} give the same rows in the same order`);
      // The rank as the subscriptions give it, recomputed here.
      const expected = [...whole].sort((a, b) => b.waiting - a.waiting || b.totalWaitSeconds - a.totalWaitSeconds || a.productId.localeCompare(b.productId) || (a.variantId ?? '').localeCompare(b.variantId ?? ''));
      assert.deepEqual(keys(whole), keys(expected), 'most waiting, longest waited, then by product');
    });

    it('prices from reportInventory: revenue is waiting × price, a whole product at its lowest price', async () => {
      const agent = await storeWithAgent(t.app, t.database, 'purchasing-prices');
      const [lamp, desk] = [product(), product()];
      const [lampRed, lampBlue] = [variant(), variant()];
      for (let i = 0; i < 3; i++) await signUp(agent.domain, lamp, lampRed);
      await signUp(agent.domain, desk, null);
      const inventory = async (items: unknown[]) => expectStatus(await call(t.app, 'POST', `/api/v1/stores/${agent.domain}/inventory`, { token: agent.token, body: { items } }), 200);

      let rows = (await view(agent)).items;
      assert.equal(rows[0]!.price, null, 'no price known yet');
      assert.equal(rows[0]!.potentialRevenue, null);

      await inventory([
        { productId: lamp, variantId: lampRed, available: 0, productTitle: 'Lamp', variantTitle: 'Red', price: { minor: 1999, currency: 'EUR' } },
        { productId: desk, variantId: variant(), available: 0, productTitle: 'Desk', variantTitle: 'Oak', price: { minor: 25000, currency: 'EUR' } },
        { productId: desk, variantId: variant(), available: 0, productTitle: 'Desk', variantTitle: 'Pine', price: { minor: 18000, currency: 'EUR' } },
      ]);
      rows = (await view(agent)).items;
      assert.deepEqual(rows[0], { ...rows[0], productTitle: 'Lamp', variantTitle: 'Red', price: { minor: 1999, currency: 'EUR' }, potentialRevenue: { minor: 5997, currency: 'EUR' } });
      assert.deepEqual(rows[1], { ...rows[1], productTitle: 'Desk', variantTitle: null, price: { minor: 18000, currency: 'EUR' }, potentialRevenue: { minor: 18000, currency: 'EUR' } }, 'a whole product: the least one of its variants costs');

      // A report without a price keeps it; null forgets it; another variant's price is not the lamp's.
      await inventory([{ productId: lamp, variantId: lampRed, available: 0 }, { productId: lamp, variantId: lampBlue, available: 0, price: { minor: 5, currency: 'EUR' } }]);
      assert.deepEqual((await view(agent)).items[0]!.price, { minor: 1999, currency: 'EUR' });
      await inventory([{ productId: lamp, variantId: lampRed, available: 0, price: null }]);
      assert.equal((await view(agent)).items[0]!.price, null);
      await inventory([{ productId: lamp, variantId: lampRed, available: 0, price: { minor: 1500, currency: 'JPY' } }]);
      assert.deepEqual((await view(agent)).items[0]!.potentialRevenue, { minor: 4500, currency: 'JPY' });
    });

    it('takes the price from the Shopify Admin API read it already makes', async () => {
      const shop = `purchasing-${newId()}.myshopify.com`;
      shopify.addShop(shop, { email: `owner@${shop}`, currencyCode: 'EUR' });
      expectStatus(await t.app.inject({ method: 'POST', url: '/shopify/token-exchange', headers: { authorization: `Bearer ${await shopify.sessionToken(shop)}` } }), 200);
      const agent: StoreAgent = { ...(await agentOf(t.app, t.database, shop, `owner@${shop}`)), domain: shop, owner: `owner@${shop}` };
      const id = newId();
      const boots: FakeProduct = {
        id,
        title: `Boots ${id}`,
        handle: `boots-${id}`,
        status: 'ACTIVE',
        publishedAt: '2024-01-01T00:00:00Z',
        variants: [{ id: newId(), title: 'Size 42', inventoryItemId: newId(), inventoryQuantity: 0, price: '89.90' }],
      };
      shopify.setProduct(shop, boots);
      expectStatus(await deliverWebhook(t, API_SECRET, { topic: 'products/update', shop, payload: productUpdatePayload(boots, new Date().toISOString()) }), 200);
      await t.runWorker();
      const productId = `gid://shopify/Product/${boots.id}`;
      const variantId = `gid://shopify/ProductVariant/${boots.variants[0]!.id}`;
      await signUp(shop, productId, variantId);
      await signUp(shop, productId, variantId);
      const [row] = (await view(agent)).items;
      assert.deepEqual(row, { ...row!, productTitle: `Boots ${id}`, variantTitle: 'Size 42', price: { minor: 8990, currency: 'EUR' }, potentialRevenue: { minor: 17980, currency: 'EUR' } });
    });

    it('serves the same rows as CSV, streamed', async () => {
      const agent = await storeWithAgent(t.app, t.database, 'purchasing-csv');
      const [vase, cup] = [product(), product()];
      const [vaseGreen, cupWhite] = [variant(), variant()];
      await signUp(agent.domain, vase, vaseGreen, 2);
      await signUp(agent.domain, vase, vaseGreen, 2);
      await signUp(agent.domain, cup, cupWhite, 1);
      const inventory = { items: [{ productId: vase, variantId: vaseGreen, available: 0, productTitle: '=Vase, "tall"', variantTitle: 'Green', price: { minor: 4200, currency: 'USD' } }] };
      expectStatus(await call(t.app, 'POST', `/api/v1/stores/${agent.domain}/inventory`, { token: agent.token, body: inventory }), 200);
      const json = (await view(agent)).items;
      const res = await call(t.app, 'GET', `/api/v1/stores/${agent.domain}/purchasing.csv`, { token: agent.token });
      assert.equal(res.statusCode, 200, res.body);
      assert.match(res.headers['content-type'] as string, /^text\/csv; charset=utf-8/);
      assert.match(res.headers['content-disposition'] as string, /purchasing\.csv"$/);
      const lines = res.body.split('\r\n');
      assert.equal(lines.at(-1), '', 'every record ends in CRLF');
      assert.equal(lines[0], 'product_id,variant_id,product_title,variant_title,waiting,total_wait_seconds,mean_wait_seconds,price_minor,currency,potential_revenue_minor');
      assert.equal(lines.length, 4);
      const vaseCells = lines[1]!.split(',');
      assert.deepEqual([vaseCells[0], vaseCells[1]], [vase, vaseGreen]);
      assert.ok(lines[1]!.includes(`"'=Vase, ""tall""",Green,2,`), 'quoted, and guarded against formulas');
      assert.ok(lines[1]!.endsWith(',4200,USD,8400'));
      assert.ok(Math.abs(Number(lines[1]!.split(',').at(-5)) - json[0]!.totalWaitSeconds) <= 4, 'time waited as the API says it');
      assert.ok(lines[2]!.startsWith(`${cup},${cupWhite},,,1,`) && lines[2]!.endsWith(',,,'), 'no title or price known: empty cells');
    });

    it("answers another store's agent and an agent of no store 404, and a bad page 400, changing nothing", async () => {
      const owner = await storeWithAgent(t.app, t.database, 'purchasing-owner');
      const other = await storeWithAgent(t.app, t.database, 'purchasing-other');
      await signUp(owner.domain, product(), variant());
      const before = await t.tableDigests();
      for (const path of ['purchasing', 'purchasing.csv']) {
        expectProblem(await call(t.app, 'GET', `/api/v1/stores/${owner.domain}/${path}`, { token: other.token }), 404, 'not-found');
        // t.token: an anonymous agent bound to no store, holding api:read.
        expectProblem(await call(t.app, 'GET', `/api/v1/stores/${owner.domain}/${path}`, { token: t.token }), 404, 'not-found');
        expectProblem(await call(t.app, 'GET', `/api/v1/stores/${owner.domain}/${path}`), 401, 'unauthorized');
      }
      const forged = Buffer.from(JSON.stringify(['1', 0, 'x', ''])).toString('base64url');
      const notJson = Buffer.from('{').toString('base64url');
      for (const query of ['?limit=0', '?limit=501', '?limit=ten', '?cursor=', '?cursor=%2F%2F', `?cursor=${forged}`, `?cursor=${notJson}`, `?cursor=${'a'.repeat(601)}`, '?sort=waiting']) {
        expectProblem(await call(t.app, 'GET', `/api/v1/stores/${owner.domain}/purchasing${query}`, { token: owner.token }), 400, 'validation-failed');
      }
      expectProblem(await call(t.app, 'GET', `/api/v1/stores/not a domain/purchasing.csv`, { token: owner.token }), 400, 'validation-failed');
      const badPrice = { items: [{ productId: product(), variantId: variant(), available: 0, price: { minor: -1, currency: 'EUR' } }] };
      expectProblem(await call(t.app, 'POST', `/api/v1/stores/${owner.domain}/inventory`, { token: owner.token, body: badPrice }), 400, 'validation-failed');
      const badCurrency = { items: [{ productId: product(), variantId: variant(), available: 0, price: { minor: 1, currency: 'euro' } }] };
      expectProblem(await call(t.app, 'POST', `/api/v1/stores/${owner.domain}/inventory`, { token: owner.token, body: badCurrency }), 400, 'validation-failed');
      assert.deepEqual(await t.tableDigests(), before, 'nothing changed');
      assert.equal((await view(owner)).items.length, 1, 'the owner still sees its own');
    });
  });
}
