/**
 * Klaviyo end to end on both databases, through the public API: a store connects its Klaviyo
 * account (the key checked with Klaviyo first, kept sealed, never shown again), and its sign-ups,
 * alerts sent, clicks and attributed orders arrive at the Klaviyo stand-in
 * (test/fixtures/klaviyo.ts) as Create Event requests of the pinned revision, on the shopper's
 * profile, once each; double opt-in holds the sign-up back until the shopper confirms, and no
 * marketing consent is ever passed; another store's events never reach this store's Klaviyo.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { KLAVIYO_REVISION } from '../src/klaviyo/api.ts';
import { call, expectProblem, expectStatus, registerAnonymousAgent, storeWithAgent, uniqueEmail, type StoreAgent } from './fixtures/agents.ts';
import { dialectSkip, startTestApp, testDialects, type TestApp } from './fixtures/app.ts';
import { startKlaviyo, type KlaviyoEvent, type KlaviyoStandIn } from './fixtures/klaviyo.ts';
import { failOnLeakedHandles } from './fixtures/leaks.ts';
import { after, before, describe, it } from './fixtures/suites.ts';

failOnLeakedHandles();

const ENCRYPTION_KEY = randomBytes(32).toString('base64');
const SAME_ORIGIN = { accept: 'text/html', 'sec-fetch-site': 'same-origin', 'content-type': 'application/x-www-form-urlencoded' };
const BROWSER = { 'user-agent': 'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 Chrome/126.0 Safari/537.36' };

for (const dialect of testDialects()) {
  describe(`Klaviyo on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    let t: TestApp;
    let klaviyo: KlaviyoStandIn;
    let serial = 0;

    before(async () => {
      klaviyo = await startKlaviyo();
      t = await startTestApp(dialect, { RESTOCK_ENCRYPTION_KEY: ENCRYPTION_KEY, KLAVIYO_API_URL: klaviyo.url });
    });
    after(async () => {
      await t.close();
      await klaviyo.close();
    });

    const path = (store: StoreAgent) => `/api/v1/stores/${store.domain}/klaviyo`;

    async function connected(name: string) {
      const store = await storeWithAgent(t.app, t.database, name);
      const key = klaviyo.addKey();
      const view = expectStatus(await call(t.app, 'PUT', path(store), { token: store.token, body: { privateApiKey: key.key } }), 200);
      return { store, key, view };
    }

    /** A product the store reports sold out, then a shopper subscribed to it by an agent. */
    async function subscribed(store: StoreAgent, email = uniqueEmail('shopper')) {
      const productId = `gid://shopify/Product/${800 + ++serial}`;
      const variantId = `gid://shopify/ProductVariant/${900 + serial}`;
      expectStatus(await call(t.app, 'POST', `/api/v1/stores/${store.domain}/inventory`, { token: store.token, body: { items: [{ productId, variantId, available: 0, productTitle: 'Blue mug' }] } }), 200);
      const agent = await registerAnonymousAgent(t.app);
      const answer = expectStatus(await call(t.app, 'POST', '/api/v1/alerts/subscribe', { token: agent.token, body: { productId, variantId, email, shop: store.domain } }), 200);
      return { ...answer, productId, variantId, email } as { subscriptionId: string; status: string; productId: string; variantId: string; email: string };
    }

    /** Runs the worker until `count` events of `email` reached Klaviyo. */
    async function eventsOf(email: string, count: number): Promise<KlaviyoEvent[]> {
      for (let round = 0; round < 20; round++) {
        await t.runWorker();
        const got = klaviyo.events.filter((event) => event.email === email);
        if (got.length >= count) return got;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      const queued = await t.database.db.selectFrom('klaviyo_events').select(['event_type', 'status', 'last_error']).execute();
      assert.fail(`${count} Klaviyo events of ${email} did not arrive: ${klaviyo.events.filter((event) => event.email === email).length} did; queue ${JSON.stringify(queued)}`);
    }

    it('refuses a key Klaviyo refuses, with problem+json, and stores nothing', async () => {
      const store = await storeWithAgent(t.app, t.database, 'badkey');
      const before = await t.tableDigests();
      const refused = async (privateApiKey: string, words: RegExp) => {
        const problem = expectProblem(await call(t.app, 'PUT', path(store), { token: store.token, body: { privateApiKey } }), 400, 'validation-failed');
        assert.equal(problem.errors[0].pointer, '/body/privateApiKey');
        assert.match(problem.errors[0].message, words);
      };
      await refused('pk_notakeyklaviyoknows000000', /refused by Klaviyo \(401 not_authenticated\)/);
      await refused(klaviyo.addKey(['events:write']).key, /lacks the scope accounts:read/);
      await refused('pub_AbC123', /private API key/);
      assert.deepEqual(await t.tableDigests(), before, 'nothing stored');
      const checked = klaviyo.calls.filter((c) => c.path === '/api/accounts');
      assert.ok(checked.length >= 2, 'the keys were checked with Klaviyo');
      for (const c of checked) assert.equal(c.revision, KLAVIYO_REVISION);
      expectProblem(await call(t.app, 'GET', path(store), { token: store.token }), 404, 'not-found');
    });

    it('keeps the key sealed and never shows it; another store cannot read or change the connection', async () => {
      const { store, key, view } = await connected('sealed');
      assert.equal(view.status, 'connected');
      assert.equal(view.accountId, key.accountId);
      assert.equal(view.keyHint, key.key.slice(-4));
      const read = await call(t.app, 'GET', path(store), { token: store.token });
      assert.ok(!read.body.includes(key.key), 'the key is not shown back');
      const row = await t.database.db.selectFrom('klaviyo_connections').selectAll().where('store_domain', '=', store.domain).executeTakeFirstOrThrow();
      assert.ok(row.key_sealed && !row.key_sealed.includes(key.key), 'sealed at rest');
      const other = await storeWithAgent(t.app, t.database, 'sealed-other');
      expectProblem(await call(t.app, 'GET', path(store), { token: other.token }), 404, 'not-found');
      expectProblem(await call(t.app, 'DELETE', path(store), { token: other.token }), 404, 'not-found');
    });

    it('sends sign-up, alert sent, click and attributed order to Klaviyo on the shopper’s profile, once each, as documented', async () => {
      const { store, key } = await connected('journey');
      const other = await connected('journey-other');
      const sub = await subscribed(store);
      const otherSub = await subscribed(other.store);
      const [signedUp] = await eventsOf(sub.email, 1);
      assert.equal(signedUp!.metric, 'Restock Subscribed');
      assert.equal(signedUp!.key, key.key, 'with the store’s own key');
      assert.equal(signedUp!.properties.subscriptionId, sub.subscriptionId);
      assert.equal(signedUp!.properties.productId, sub.productId);
      assert.equal(signedUp!.properties.marketingConsent, false, 'a back-in-stock sign-up is not marketing consent');
      assert.equal(signedUp!.properties.consentMethod, 'agent-api');
      assert.equal(signedUp!.properties.email, undefined, 'the address is the profile’s, not a property');

      expectStatus(await call(t.app, 'POST', `/api/v1/stores/${store.domain}/inventory`, { token: store.token, body: { items: [{ productId: sub.productId, variantId: sub.variantId, available: 5, productTitle: 'Blue mug' }] } }), 200);
      const sent = (await eventsOf(sub.email, 2)).find((event) => event.metric === 'Restock Alert Sent')!;
      assert.ok(sent, 'alert sent');
      const alertId = String(sent.properties.alertId);
      assert.equal(sent.properties.channel, 'email');

      const mail = await t.database.db.selectFrom('mail_outbox').selectAll().where('recipient', '=', sub.email).execute();
      const link = mail.map((row) => /https?:\/\/[^\s"<>]*\/r\/[^\s"<>]+/.exec(`${row.text_body ?? ''} ${row.html_body ?? ''}`)?.[0]).find(Boolean);
      assert.ok(link, 'the alert carries a tracked link');
      const { pathname, search } = new URL(link!);
      assert.equal((await t.app.inject({ method: 'GET', url: `${pathname}${search}`, headers: BROWSER })).statusCode, 302);
      const order = { orderId: `kl-${serial}`, email: sub.email, placedAt: new Date().toISOString(), currency: 'USD', lines: [{ lineId: 'l1', productId: sub.productId, variantId: sub.variantId, quantity: 2, amountMinor: 2500 }] };
      expectStatus(await call(t.app, 'POST', `/api/v1/stores/${store.domain}/orders`, { token: store.token, body: order }), 200);
      const all = await eventsOf(sub.email, 4);
      assert.deepEqual(all.map((event) => event.metric).sort(), ['Restock Alert Clicked', 'Restock Alert Sent', 'Restock Order Attributed', 'Restock Subscribed']);
      const clicked = all.find((event) => event.metric === 'Restock Alert Clicked')!;
      assert.equal(clicked.properties.alertId, alertId);
      const ordered = all.find((event) => event.metric === 'Restock Order Attributed')!;
      assert.equal(ordered.properties.orderId, order.orderId);
      assert.equal(ordered.value, 25, 'the order’s attributed worth, in the store’s currency');
      assert.equal(ordered.properties.currency, 'USD');
      for (const event of all) {
        assert.match(event.uniqueId ?? '', /^evt_/, 'unique_id is our event id');
        assert.ok(event.time && !Number.isNaN(Date.parse(event.time)));
      }
      // Every call as Klaviyo documents it: the key, the revision, JSON:API.
      for (const c of klaviyo.calls.filter((c) => c.path === '/api/events' && c.key === key.key)) {
        assert.equal(c.revision, KLAVIYO_REVISION);
        assert.equal(c.contentType, 'application/vnd.api+json');
        assert.equal(c.status, 202);
      }
      // A second visit of the link counts no second click: nothing more arrives.
      await t.app.inject({ method: 'GET', url: `${pathname}${search}`, headers: BROWSER });
      await t.runWorker();
      assert.equal(klaviyo.events.filter((event) => event.email === sub.email).length, 4);
      // The other store's shopper went to the other store's Klaviyo only.
      const otherEvents = await eventsOf(otherSub.email, 1);
      assert.ok(otherEvents.every((event) => event.key === other.key.key));
      assert.ok(klaviyo.events.filter((event) => event.key === key.key).every((event) => event.email !== otherSub.email));
      assert.equal(klaviyo.calls.filter((c) => c.path === '/api/profile-subscription-bulk-create-jobs').length, 0, 'no marketing consent is ever passed');
    });

    it("never puts one store's events on another's Klaviyo, even announced together (a settled group of alerts spans stores)", async () => {
      const first = await connected('mixed-a');
      const second = await connected('mixed-b');
      const unconnected = await storeWithAgent(t.app, t.database, 'mixed-none');
      const { buildKlaviyo } = await import('../src/klaviyo/feature.ts');
      const { LocalChangeBus } = await import('../src/core/changes/bus.ts');
      const sink = buildKlaviyo({ config: t.config, database: t.database, changes: new LocalChangeBus(), log: t.app.log }).service;
      const at = new Date().toISOString();
      const sentAt = (store: StoreAgent, n: number) => ({ storeDomain: store.domain, type: 'alert.sent' as const, id: `evt_mixed_${store.domain.slice(0, 12)}_${n}`, occurredAt: at, data: { alertId: `ntf_mixed_${n}`, email: `${store.domain.split('.')[0]}-${n}@example.com`, channel: 'email' } });
      await sink.announce(sentAt(first.store, 1), sentAt(second.store, 2), sentAt(unconnected, 3), sentAt(first.store, 4));
      const rows = await t.database.db.selectFrom('klaviyo_events').select(['store_domain', 'email']).where('event_id', 'like', 'evt_mixed_%').execute();
      assert.deepEqual(
        rows.map((row) => `${row.store_domain} ${row.email}`).sort(),
        [sentAt(first.store, 1), sentAt(first.store, 4), sentAt(second.store, 2)].map((event) => `${event.storeDomain} ${event.data.email}`).sort(),
        'each connected store gets its own events only; the unconnected store none',
      );
      await t.runWorker();
      for (const [store, key] of [[first.store, first.key], [second.store, second.key]] as const) {
        for (const event of klaviyo.events.filter((candidate) => candidate.email.startsWith(store.domain.split('.')[0]!))) assert.equal(event.key, key.key);
      }
    });

    it('double opt-in: nothing reaches Klaviyo before the shopper confirms; the sign-up arrives with its confirmation', async () => {
      const { store } = await connected('doi');
      expectStatus(await call(t.app, 'PATCH', `/api/v1/stores/${store.domain}`, { token: store.token, body: { doubleOptIn: 'always' } }), 200);
      const sub = await subscribed(store);
      assert.equal(sub.status, 'pending');
      await t.runWorker();
      assert.equal(klaviyo.events.filter((event) => event.email === sub.email).length, 0, 'nothing before confirmation');
      const mail = await t.database.db.selectFrom('mail_outbox').selectAll().where('recipient', '=', sub.email).execute();
      const confirm = mail.map((row) => /https?:\/\/[^\s"<>]*\/confirm\/[^\s"<>]+/.exec(row.text_body ?? '')?.[0]).find(Boolean);
      assert.ok(confirm, 'a confirmation link was mailed');
      assert.equal((await t.app.inject({ method: 'POST', url: new URL(confirm!).pathname, headers: SAME_ORIGIN, payload: '' })).statusCode, 200);
      const [signedUp] = await eventsOf(sub.email, 1);
      assert.equal(signedUp!.metric, 'Restock Subscribed');
      assert.equal(signedUp!.properties.marketingConsent, false);
      assert.ok(signedUp!.properties.confirmedAt, 'the confirmation is on the event');
      assert.equal(klaviyo.calls.filter((c) => c.path === '/api/profile-subscription-bulk-create-jobs').length, 0);
    });

    it('retries what Klaviyo could not take, and sends nothing once the store disconnects', async () => {
      const { store } = await connected('retry');
      klaviyo.failNext(1, 429);
      const sub = await subscribed(store);
      await t.runWorker();
      const row = await t.database.db.selectFrom('klaviyo_events').selectAll().where('store_domain', '=', store.domain).executeTakeFirstOrThrow();
      assert.equal(row.status, 'pending');
      assert.equal(row.last_status_code, 429);
      assert.equal(row.attempts, 1);
      await t.database.db.updateTable('klaviyo_events').set({ next_attempt_at: new Date(Date.now() - 1).toISOString() }).where('id', '=', row.id).execute();
      await eventsOf(sub.email, 1);

      const gone = expectStatus(await call(t.app, 'DELETE', path(store), { token: store.token }), 200);
      assert.equal(gone.status, 'disconnected');
      const stored = await t.database.db.selectFrom('klaviyo_connections').selectAll().where('store_domain', '=', store.domain).executeTakeFirstOrThrow();
      assert.equal(stored.key_sealed, null, 'the key is forgotten');
      const later = await subscribed(store);
      await t.runWorker();
      assert.equal(klaviyo.events.filter((event) => event.email === later.email).length, 0);
      const queued = await t.database.db.selectFrom('klaviyo_events').select('id').where('store_domain', '=', store.domain).where('email', '=', later.email).execute();
      assert.deepEqual(queued, [], 'nothing is even queued once disconnected, though each process keeps the connection state between changes');
    });

    it('a store that connects after its events began is heard from its next event on', async () => {
      const store = await storeWithAgent(t.app, t.database, 'late');
      const before = await subscribed(store);
      const key = klaviyo.addKey();
      expectStatus(await call(t.app, 'PUT', path(store), { token: store.token, body: { privateApiKey: key.key } }), 200);
      const after = await subscribed(store);
      const [signUp] = await eventsOf(after.email, 1);
      assert.equal(signUp!.key, key.key);
      assert.equal(klaviyo.events.filter((event) => event.email === before.email).length, 0, 'what came before the connection is not sent');
    });
  });
}
