/**
 * No quota cliffs (docs/plans.md, "Allowances"): beyond a paid plan's allowance, alerts go out at
 * the published price each, up to the ceiling the store's owner sets, recorded at the hosted test
 * checkout; at the ceiling the owner was warned before anything waits, and the dashboard says what
 * the next restock will cost. On SQLite and PostgreSQL.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from './fixtures/suites.ts';
import { call, expectProblem, expectStatus, registerAnonymousAgent, storeWithAgent, uniqueEmail, type StoreAgent } from './fixtures/agents.ts';
import { dialectSkip, startTestApp, testDialects, type TestApp } from './fixtures/app.ts';
import { csrfOf, getPage, postForm, signIn } from './fixtures/dashboard.ts';
import { failOnLeakedHandles } from './fixtures/leaks.ts';

failOnLeakedHandles();

const SUBSCRIBE = '/api/v1/alerts/subscribe';
const CHECKOUT = '/api/v1/plans/checkout';
let serial = 0;

for (const dialect of testDialects()) {
  describe(`alerts beyond the allowance on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    let t: TestApp;

    before(async () => {
      t = await startTestApp(dialect, {
        PLAN_GROWTH_ALERTS_PER_MONTH: '3',
        PLAN_OVERAGE_CENTS_PER_ALERT: '2',
        FREQUENCY_CAP_MINUTES: '0',
        BATCH_INTERVAL_SECONDS: '0',
        BATCH_MULTIPLIER: '100',
      });
    });
    after(() => t.close());

    /** A store whose owner bought growth (3 alerts a month here) on the hosted test page. */
    async function storeOnGrowth(name: string): Promise<StoreAgent> {
      const store = await storeWithAgent(t.app, t.database, name);
      const { checkoutUrl } = expectStatus(await call(t.app, 'POST', CHECKOUT, { token: store.token, body: { plan: 'growth', shop: store.domain } }), 200);
      const page = new URL(checkoutUrl);
      assert.equal((await t.app.inject({ method: 'POST', url: `${page.pathname}/complete${page.search}` })).statusCode, 200);
      return store;
    }

    async function waiting(store: StoreAgent, count: number) {
      const ids = { productId: `gid://shopify/Product/${9_300_000 + ++serial}`, variantId: `gid://shopify/ProductVariant/${9_400_000 + serial}` };
      for (let i = 0; i < count; i++) {
        expectStatus(await call(t.app, 'POST', SUBSCRIBE, { token: store.token, body: { ...ids, email: uniqueEmail(`over${i}`), shop: store.domain } }), 200);
      }
      return ids;
    }
    const restock = (store: StoreAgent, ids: { productId: string; variantId: string }) =>
      call(t.app, 'POST', `/api/v1/stores/${store.domain}/inventory`, { token: store.token, body: { items: [{ productId: ids.productId, variantId: ids.variantId, available: 50, productTitle: `Overage widget ${serial}` }] } });
    /** The store's alerts by status, sent first: counts are what the allowance decides. */
    const statuses = async (domain: string) => (await t.database.db.selectFrom('notifications').select('status').where('store_domain', '=', domain).execute()).map((row) => row.status).sort((a, b) => (a === b ? 0 : a === 'sent' ? -1 : b === 'sent' ? 1 : a.localeCompare(b)));
    const planOf = async (store: StoreAgent) => expectStatus(await call(t.app, 'GET', `/api/v1/stores/${store.domain}`, { token: store.token }), 200).plan;
    const notices = (owner: string) => t.database.db.selectFrom('mail_outbox').select(['subject', 'text_body', 'created_at']).where('recipient', '=', owner).where('purpose', '=', 'plan-notice').orderBy('created_at').execute();

    it('a restock larger than the allowance alerts everyone, and the alerts beyond it are billed at the published price', async () => {
      const store = await storeOnGrowth('beyond');
      const ids = await waiting(store, 6);
      expectStatus(await restock(store, ids), 200);
      await t.runWorker();
      assert.deepEqual(await statuses(store.domain), ['sent', 'sent', 'sent', 'sent', 'sent', 'sent'], 'nobody waits for the allowance');
      const plan = await planOf(store);
      assert.equal(plan.used, 6);
      // USD 0.02 an alert (the setting), up to the plan's price by default.
      assert.deepEqual(plan.overage, { billed: true, pricePerAlert: 0.02, ceiling: 29.99, alerts: 3, amount: 0.06, currency: 'USD' });
      const queue = expectStatus(await call(t.app, 'GET', `/api/v1/stores/${store.domain}/queue`, { token: store.token }), 200);
      assert.equal(queue.heldByPlan, 0);
      // The catalogue publishes the price.
      const { plans } = expectStatus(await call(t.app, 'GET', '/api/v1/plans'), 200);
      assert.deepEqual(plans.map((p: { plan: string; overagePerAlert: number; defaultOverageCeiling: number }) => [p.plan, p.overagePerAlert, p.defaultOverageCeiling]), [['starter', 0.02, 9.99], ['growth', 0.02, 29.99]]);
    });

    it('at the ceiling the owner set, the owner was warned before anything waits; past it the rest wait, and the dashboard says what the next restock costs', async () => {
      const store = await storeOnGrowth('ceiling');
      // Room for 3 + 2 alerts: USD 0.04 at USD 0.02 each.
      const set = expectStatus(await call(t.app, 'PATCH', `/api/v1/stores/${store.domain}/plan`, { token: store.token, body: { overageCeiling: 0.04 } }), 200);
      assert.equal(set.overage.ceiling, 0.04);

      const first = await waiting(store, 4);
      expectStatus(await restock(store, first), 200);
      await t.runWorker();
      assert.deepEqual(await statuses(store.domain), ['sent', 'sent', 'sent', 'sent']);
      const warned = await notices(store.owner);
      assert.equal(warned.length, 1, 'warned once the room is 80% used, with nothing held yet');
      assert.match(warned[0]!.subject, /running out/);
      assert.match(warned[0]!.text_body, /^4 of the 5 alerts /);
      assert.match(warned[0]!.text_body, /alerts cost \$0\.02 each, up to your ceiling of \$0\.04 this period/);

      const second = await waiting(store, 3);
      // The dashboard, before the restock: one more goes out, USD 0.02, and two would wait.
      const cookie = await signIn(t, store.domain, store.owner);
      const overview = await getPage(t, '/dashboard', cookie);
      assert.match(overview.body, /The next restock of <strong>[^<]+<\/strong> would alert its 3 waiting shoppers: 1 of them beyond your allowance, costing \$0\.02\. <span class="error">2 would wait until the next period/);

      expectStatus(await restock(store, second), 200);
      await t.runWorker();
      assert.deepEqual(await statuses(store.domain), ['sent', 'sent', 'sent', 'sent', 'sent', 'queued', 'queued']);
      const held = await t.database.db.selectFrom('notifications').select('outcome').where('store_domain', '=', store.domain).where('status', '=', 'queued').execute();
      assert.ok(held.every((row) => /allowance of 3 alerts and the overage ceiling of \$0\.04 are used up/.test(row.outcome ?? '')), JSON.stringify(held));
      const told = await notices(store.owner);
      assert.equal(told.length, 2);
      assert.match(told[1]!.subject, /waiting/);
      assert.ok(told[0]!.created_at <= told[1]!.created_at, 'warned before told of the wait');
      assert.deepEqual((await planOf(store)).overage, { billed: true, pricePerAlert: 0.02, ceiling: 0.04, alerts: 2, amount: 0.04, currency: 'USD' });

      // The owner raises the ceiling on the plan page: the waiting two go out when looked at again.
      const page = await getPage(t, '/dashboard/plan', cookie);
      assert.match(page.body, /2 alerts at \$0\.02: \$0\.04 of your \$0\.04 ceiling/);
      const refused = await postForm(t, '/dashboard/plan/overage-ceiling', { csrf: csrfOf(page.body), overageCeiling: '1.001' }, cookie);
      assert.equal(refused.statusCode, 400);
      assert.match(refused.body, /at most two decimals/);
      const saved = await postForm(t, '/dashboard/plan/overage-ceiling', { csrf: csrfOf(page.body), overageCeiling: '1.00' }, cookie);
      assert.equal(saved.statusCode, 303, saved.body);
      await t.database.db.updateTable('notifications').set({ next_attempt_at: new Date(Date.now() - 1000).toISOString() }).where('store_domain', '=', store.domain).where('status', '=', 'queued').execute();
      await t.runWorker();
      assert.deepEqual(await statuses(store.domain), ['sent', 'sent', 'sent', 'sent', 'sent', 'sent', 'sent']);
      assert.deepEqual((await planOf(store)).overage, { billed: true, pricePerAlert: 0.02, ceiling: 1, alerts: 4, amount: 0.08, currency: 'USD' });
    });

    it('a ceiling of 0 sends nothing beyond the allowance; no plan, nobody to bill: the free allowance holds', async () => {
      const store = await storeOnGrowth('zero');
      expectStatus(await call(t.app, 'PATCH', `/api/v1/stores/${store.domain}/plan`, { token: store.token, body: { overageCeiling: 0 } }), 200);
      const ids = await waiting(store, 5);
      expectStatus(await restock(store, ids), 200);
      await t.runWorker();
      assert.deepEqual(await statuses(store.domain), ['sent', 'sent', 'sent', 'queued', 'queued']);
      assert.equal((await planOf(store)).overage.amount, 0);

      const free = await storeWithAgent(t.app, t.database, 'free');
      assert.deepEqual((await planOf(free)).overage, { billed: false, pricePerAlert: 0, ceiling: 0, alerts: 0, amount: 0, currency: 'USD' });
    });

    it('refuses a ceiling that is not an amount, or set by anyone but the store’s side, with problem+json, changing nothing', async () => {
      const store = await storeOnGrowth('refused');
      const other = await storeWithAgent(t.app, t.database, 'other');
      const stranger = await registerAnonymousAgent(t.app);
      const before = await t.tableDigests();
      for (const body of [{ overageCeiling: -1 }, { overageCeiling: 0.001 }, { overageCeiling: '5' }, { overageCeiling: 10_001 }, {}, { overageCeiling: 5, extra: true }]) {
        expectProblem(await call(t.app, 'PATCH', `/api/v1/stores/${store.domain}/plan`, { token: store.token, body }), 400, 'validation-failed');
      }
      expectProblem(await call(t.app, 'PATCH', `/api/v1/stores/${store.domain}/plan`, { token: other.token, body: { overageCeiling: 5 } }), 404, 'not-found');
      const unbound = await call(t.app, 'PATCH', `/api/v1/stores/${store.domain}/plan`, { token: stranger.token, body: { overageCeiling: 5 } });
      assert.ok([403, 404].includes(unbound.statusCode), `${unbound.statusCode}`);
      assert.deepEqual(await t.tableDigests(), before);
    });
  });
}
