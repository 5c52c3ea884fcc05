/**
 * The WooCommerce authorization round trip, from an attacker's side: the page the site sends
 * the owner back to says only what the store's connection shows (finding 10), and the signed
 * `user_id` the site posts keys with connects its store once, for the owner it was issued to.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from '../fixtures/suites.ts';
import { failOnLeakedHandles } from '../fixtures/leaks.ts';
import { dialectSkip, postsToApp, startTestApp, testDialects, type TestApp } from '../fixtures/app.ts';
import { agentOfMailed, call, createStore, expectProblem, expectStatus, uniqueEmail, type RegisteredAgent } from '../fixtures/agents.ts';
import { startSmtpSink, type SmtpSink } from '../fixtures/smtp-sink.ts';
import { startWooCommerce, type WooCommerceStandIn } from '../fixtures/woocommerce.ts';

failOnLeakedHandles();

const BASE = 'https://restock.test';
let counter = 0;
const unique = () => `${Date.now() % 1_000_000}${++counter}`;

for (const dialect of testDialects()) {
  describe(`the WooCommerce authorization round trip on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    let t: TestApp;
    let sink: SmtpSink;
    let site: WooCommerceStandIn;

    before(async () => {
      sink = await startSmtpSink();
      t = await startTestApp(dialect, { BASE_URL: BASE, SMTP_URL: sink.url, RESTOCK_ENCRYPTION_KEY: randomBytes(32).toString('base64'), RECONCILE_INTERVAL_MINUTES: '0' });
      site = await startWooCommerce(postsToApp(t));
    });
    after(async () => {
      await site?.close();
      await t?.close();
      await sink?.close();
    });

    async function wooStore(): Promise<{ domain: string; owner: string; agent: RegisteredAgent }> {
      const domain = `shop-${unique()}.example.com`;
      const owner = uniqueEmail('woo-owner');
      await createStore(t.database, domain, owner, 'woocommerce');
      return { domain, owner, agent: await agentOfMailed(t.app, sink, domain, owner) };
    }

    /** The approval page's address, and the user_id in it. */
    async function authorization(store: { domain: string; agent: RegisteredAgent }): Promise<{ authorizeUrl: string; userId: string }> {
      const { authorizeUrl } = expectStatus(await call(t.app, 'POST', `/api/v1/stores/${store.domain}/woocommerce/authorization`, { token: store.agent.token, body: { siteUrl: site.url } }), 200);
      return { authorizeUrl, userId: new URL(authorizeUrl).searchParams.get('user_id')! };
    }

    /** What WooCommerce posts to the keys callback, with keys the site accepts. */
    function postKeys(userId: string, keys = site.makeKeys()) {
      return t.app.inject({
        method: 'POST',
        url: '/woocommerce/keys',
        payload: { key_id: 1, user_id: userId, consumer_key: keys.consumerKey, consumer_secret: keys.consumerSecret, key_permissions: 'read_write' },
      });
    }

    const connection = (domain: string) => t.database.db.selectFrom('store_connections').selectAll().where('store_domain', '=', domain).executeTakeFirst();
    /** What the page says (its main part). */
    const shown = async (query: string) => {
      const res = await t.app.inject({ method: 'GET', url: `/woocommerce/connected?${query}` });
      assert.equal(res.statusCode, 200, res.body);
      return /<main[^>]*>([\s\S]*)<\/main>/.exec(res.body)?.[1] ?? res.body;
    };

    it('finding 10: the page a query names a store on says nothing of that store', async () => {
      const { domain } = await wooStore();
      const forged = `${(await authorization(await wooStore())).userId}x`;
      for (const query of [
        `store=${domain}&success=1`,
        `store=${domain}&success=0`,
        'store=bank.example.com&success=1',
        `store=${domain}&success=1&user_id=${encodeURIComponent(forged)}`,
        `success=1&user_id=${encodeURIComponent(`${Buffer.from(JSON.stringify({ store: domain })).toString('base64url')}.AAAA`)}`,
      ]) {
        const body = await shown(query);
        assert.ok(!body.includes(domain) && !body.includes('bank.example.com'), `${query}: ${body}`);
        assert.doesNotMatch(body, /connected:|not approved/, query);
        assert.match(body, /The dashboard shows the WooCommerce connection of your store/);
      }
    });

    it('finding 10: with the user_id this service gave, the page states what the connection shows now', async () => {
      const store = await wooStore();
      const { authorizeUrl, userId } = await authorization(store);
      // The owner was sent back, but the site never posted the keys: success=1 alone proves nothing.
      assert.match(await shown(`store=${store.domain}&success=1&user_id=${encodeURIComponent(userId)}`), new RegExp(`${store.domain.replace(/\./g, '\\.')} is not connected`));
      const approved = await site.approve(authorizeUrl);
      assert.equal(approved.status, 302, approved.body);
      const back = new URL(approved.location!);
      assert.match(await shown(back.search.slice(1)), new RegExp(`${store.domain.replace(/\./g, '\\.')} is connected`));
      expectStatus(await call(t.app, 'DELETE', `/api/v1/stores/${store.domain}/woocommerce`, { token: store.agent.token }), 200);
      assert.match(await shown(back.search.slice(1)), new RegExp(`${store.domain.replace(/\./g, '\\.')} is not connected`), 'after the owner disconnected, the same address says so');
    });

    it('suspicion: a WooCommerce user_id authorization connects its store once, and is not used again after a disconnection', async () => {
      const store = await wooStore();
      const { authorizeUrl, userId } = await authorization(store);
      assert.equal((await site.approve(authorizeUrl)).status, 302);
      const first = await connection(store.domain);
      assert.equal(first?.status, 'connected');

      const before = await t.tableDigests();
      expectProblem(await postKeys(userId), 401, 'invalid-webhook');
      assert.deepEqual(await connection(store.domain), first, 'the connection keeps its keys and webhooks');
      assert.deepEqual(await t.tableDigests(), before);

      // The owner disconnects; whoever holds the user_id cannot connect the store again.
      expectStatus(await call(t.app, 'DELETE', `/api/v1/stores/${store.domain}/woocommerce`, { token: store.agent.token }), 200);
      expectProblem(await postKeys(userId), 401, 'invalid-webhook');
      assert.equal((await connection(store.domain))?.status, 'disconnected');

      // Two posts of a new one at once: one connects.
      const fresh = await authorization(store);
      const answers = await Promise.all([postKeys(fresh.userId), postKeys(fresh.userId)]);
      assert.deepEqual(answers.map((res) => res.statusCode).sort(), [200, 401], answers.map((res) => res.body).join('\n'));
    });

    it('suspicion: a WooCommerce user_id authorization does not survive a change of owner', async () => {
      const store = await wooStore();
      const { userId } = await authorization(store);
      // The store changes hands before the site posts the keys the former owner approved.
      await createStore(t.database, store.domain, uniqueEmail('new-owner'), 'woocommerce');
      const before = await t.tableDigests();
      expectProblem(await postKeys(userId), 401, 'invalid-webhook');
      assert.equal(await connection(store.domain), undefined, 'nothing was connected');
      assert.deepEqual(await t.tableDigests(), before);
      assert.doesNotMatch(await shown(`user_id=${encodeURIComponent(userId)}`), new RegExp(store.domain.replace(/\./g, '\\.')), 'nor does the page speak of the store');
    });
  });
}
