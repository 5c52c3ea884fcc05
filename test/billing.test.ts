import assert from 'node:assert/strict';
import { after, before, describe, it } from './fixtures/suites.ts';
import { failOnLeakedHandles } from './fixtures/leaks.ts';
import { dialectSkip, startTestApp, testDialects, type TestApp } from './fixtures/app.ts';
import { call, storeWithAgent } from './fixtures/agents.ts';

failOnLeakedHandles();

const CHECKOUT = '/api/v1/plans/checkout';
/** Where the hosted page's button posts, with the owner's key the checkout URL carries. */
const completeUrl = (checkoutUrl: string) => {
  const url = new URL(checkoutUrl);
  return `${url.pathname}/complete${url.search}`;
};

for (const dialect of testDialects()) {
  describe(`plans on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    let t: TestApp;
    before(async () => {
      t = await startTestApp(dialect);
    });
    after(() => t.close());

    it('lists the plans with their prices', async () => {
      const res = await t.inject({ method: 'GET', url: '/api/v1/plans' });
      assert.equal(res.statusCode, 200);
      const starter = res.json().plans.find((p: { plan: string }) => p.plan === 'starter');
      assert.equal(starter.amount, 9.99);
      assert.equal(starter.currency, 'USD');
      assert.ok(res.json().plans.some((p: { plan: string }) => p.plan === 'growth'));
    });

    for (const plan of ['starter', 'growth']) {
      it(`checkoutPlan creates a stored session for ${plan}`, async () => {
        const res = await t.post(CHECKOUT, { plan, shop: 'My-Store.myshopify.com' });
        assert.equal(res.statusCode, 200);
        const body = res.json();
        assert.deepEqual(Object.keys(body).sort(), ['checkoutUrl', 'sessionId']);
        assert.match(body.sessionId, /^cs_[0-9a-z]{26}$/);
        assert.equal(body.checkoutUrl, `http://restock.test/checkout/${body.sessionId}`);
        const session = (await t.inject({ method: 'GET', url: `${CHECKOUT}/${body.sessionId}` })).json();
        assert.equal(session.plan, plan);
        assert.equal(session.shop, 'my-store.myshopify.com');
        // The test agent is bound to no store: its checkout is a proposal to the store's owner.
        assert.equal(session.status, 'awaiting_owner');
        assert.equal(session.amount, plan === 'starter' ? 9.99 : 29.99);
      });
    }

    const invalid: Array<[string, unknown, string]> = [
      ['an unknown plan', { plan: 'enterprise', shop: 'a.myshopify.com' }, '/body/plan'],
      ['a missing plan', { shop: 'a.myshopify.com' }, '/body/plan'],
      ['a plan in capitals', { plan: 'STARTER', shop: 'a.myshopify.com' }, '/body/plan'],
      ['a missing shop', { plan: 'starter' }, '/body/shop'],
      ['a shop that is not a store domain', { plan: 'starter', shop: 'example' }, '/body/shop'],
      ['a shop with a path', { plan: 'starter', shop: 'a.myshopify.com/admin' }, '/body/shop'],
      ['a shop URL', { plan: 'starter', shop: 'https://a.myshopify.com' }, '/body/shop'],
      ['a shop that is a number', { plan: 'starter', shop: 42 }, '/body/shop'],
      ['a shop too long', { plan: 'starter', shop: `${'a'.repeat(64)}.myshopify.com` }, '/body/shop'],
    ];
    for (const [name, body, pointer] of invalid) {
      it(`rejects ${name} naming ${pointer}, storing nothing`, async () => {
        const before = await t.tableDigests();
        const res = await t.post(CHECKOUT, body);
        assert.equal(res.statusCode, 400);
        assert.match(res.headers['content-type'] as string, /^application\/problem\+json/);
        assert.ok(res.json().errors.some((e: { pointer: string }) => e.pointer === pointer), res.body);
        assert.deepEqual(await t.tableDigests(), before);
      });
    }

    it('the hosted page shows plan, price and store, and completing it activates the plan', async () => {
      const owner = await storeWithAgent(t.app, t.database, 'shop');
      const shop = owner.domain;
      const { sessionId, checkoutUrl } = (await call(t.app, 'POST', CHECKOUT, { token: owner.token, body: { plan: 'starter', shop } })).json();
      const url = new URL(checkoutUrl);
      const page = await t.inject({ method: 'GET', url: `${url.pathname}${url.search}` });
      assert.equal(page.statusCode, 200);
      assert.match(page.headers['content-type'] as string, /^text\/html/);
      assert.match(page.body, /Starter/);
      assert.match(page.body, /\$9\.99 \/ month/);
      assert.match(page.body, new RegExp(shop.replace(/\./g, '\\.')));
      assert.match(page.body, /Test mode/);

      const readSession = () => t.inject({ method: 'GET', url: `${CHECKOUT}/${sessionId}`, headers: { authorization: `Bearer ${owner.token}` } });
      assert.equal((await readSession()).json().status, 'open');
      const done = await t.inject({ method: 'POST', url: completeUrl(checkoutUrl), headers: { 'content-type': 'application/x-www-form-urlencoded' }, payload: '' });
      assert.equal(done.statusCode, 200);
      assert.match(done.body, /Your plan is active/);
      const session = (await readSession()).json();
      assert.equal(session.status, 'completed');
      assert.ok(session.completedAt);
      const plan = await t.database.db.selectFrom('store_plans').selectAll().where('shop', '=', shop).executeTakeFirstOrThrow();
      assert.equal(plan.plan, 'starter');
      assert.equal(plan.status, 'active');
      assert.equal(plan.checkout_session_id, sessionId);

      const again = await t.inject({ method: 'POST', url: completeUrl(checkoutUrl) });
      assert.equal(again.statusCode, 200, 'completing twice is harmless');
    });

    it('a later purchase replaces the store plan', async () => {
      const owner = await storeWithAgent(t.app, t.database, 'upgrade');
      const shop = owner.domain;
      for (const plan of ['starter', 'growth']) {
        const { checkoutUrl } = (await call(t.app, 'POST', CHECKOUT, { token: owner.token, body: { plan, shop } })).json();
        assert.equal((await t.inject({ method: 'POST', url: completeUrl(checkoutUrl) })).statusCode, 200);
      }
      const rows = await t.database.db.selectFrom('store_plans').selectAll().where('shop', '=', shop).execute();
      assert.equal(rows.length, 1);
      assert.equal(rows[0]!.plan, 'growth');
    });

    it('an expired session cannot be completed (410) and activates nothing', async () => {
      const owner = await storeWithAgent(t.app, t.database, 'late');
      const shop = owner.domain;
      const { sessionId, checkoutUrl } = (await call(t.app, 'POST', CHECKOUT, { token: owner.token, body: { plan: 'starter', shop } })).json();
      await t.database.db.updateTable('checkout_sessions').set({ expires_at: '2020-01-01T00:00:00.000Z' }).where('id', '=', sessionId).execute();
      assert.equal((await call(t.app, 'GET', `${CHECKOUT}/${sessionId}`, { token: owner.token })).json().status, 'expired');
      const res = await t.inject({ method: 'POST', url: completeUrl(checkoutUrl) });
      assert.equal(res.statusCode, 410);
      assert.equal(res.json().type, 'http://restock.test/problems/checkout-expired');
      const page = await t.inject({ method: 'POST', url: completeUrl(checkoutUrl), headers: { accept: 'text/html' } });
      assert.equal(page.statusCode, 410);
      assert.match(page.body, /expired/);
      // Starting the checkout made the store's plan pending; the expired session did not activate it.
      const plan = await t.database.db.selectFrom('store_plans').selectAll().where('shop', '=', shop).executeTakeFirst();
      assert.equal(plan?.status, 'pending');
    });

    it('unknown sessions answer 404 on the API and the pages', async () => {
      for (const [method, url] of [['GET', `${CHECKOUT}/cs_nope`], ['GET', '/checkout/cs_nope'], ['POST', '/checkout/cs_nope/complete']] as const) {
        const res = await t.inject({ method, url });
        assert.equal(res.statusCode, 404, `${method} ${url}`);
        assert.equal(res.json().type, 'http://restock.test/problems/not-found');
      }
    });
  });
}
