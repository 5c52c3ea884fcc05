import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { existsSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from './fixtures/suites.ts';
import { startServer, type RunningServer } from '../src/server.ts';
import { createTestDatabase, dialectSkip, startTestApp, testConfig, testDialects, type TestApp } from './fixtures/app.ts';
import {
  call,
  codeIn,
  createStore,
  expectProblem,
  expectStatus,
  registerAnonymousAgent,
  requestCode,
  storeWithAgent as storeWithOutboxAgent,
  submitCode,
  uniqueDomain,
  uniqueEmail,
  type StoreAgent,
} from './fixtures/agents.ts';
import { failOnLeakedHandles } from './fixtures/leaks.ts';
import { eventually } from './fixtures/network.ts';
import { mailSystemSkipReason, startMailSystem, type MailSystem } from './fixtures/mail-system.ts';
import { startSmtpSink, type SinkMessage, type SmtpSink } from './fixtures/smtp-sink.ts';

failOnLeakedHandles();

const outboxFixtures = { storeWithAgent: storeWithOutboxAgent };

const SUBSCRIBE = '/api/v1/alerts/subscribe';
const ENCRYPTION_KEY = randomBytes(32).toString('base64');
let serial = 0;
const product = () => `gid://shopify/Product/${7_000_000 + ++serial}`;
const variant = () => `gid://shopify/ProductVariant/${8_000_000 + ++serial}`;

/** Waits until the latest retry time the ledger recorded for these alerts has come. */
async function untilRetriesDue(rows: Array<{ next_attempt_at: string }>): Promise<void> {
  const due = Math.max(...rows.map((row) => Date.parse(row.next_attempt_at)));
  await new Promise((resolve) => setTimeout(resolve, Math.max(0, due - Date.now() + 1)));
}

/** Mail the sink received for one product, in arrival order. */
function alertsFor(sink: SmtpSink, productTitle: string): SinkMessage[] {
  return sink.messages.filter((m) => m.subject.includes(productTitle));
}

for (const dialect of testDialects()) {
  describe(`alert dispatch on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    let t: TestApp;
    let sink: SmtpSink;
    let refused: Set<string>;

    before(async () => {
      refused = new Set();
      sink = await startSmtpSink({ refuseRecipient: (address) => refused.has(address) });
      t = await startTestApp(dialect, {
        SMTP_URL: sink.url,
        FREQUENCY_CAP_MINUTES: '0',
        BATCH_INTERVAL_SECONDS: '0',
        BATCH_MULTIPLIER: '1',
        DISPATCH_RETRY_BASE_MS: '20',
        // One connection: mail arrives in the order it was sent, so signup order is observable.
        SMTP_POOL_SIZE: '1',
        RESTOCK_ENCRYPTION_KEY: ENCRYPTION_KEY,
      });
    });
    after(async () => {
      await t.close();
      await sink.close();
    });

    /** A store and an agent its owner claimed for it, the claim code read at the SMTP sink. */
    async function storeWithAgent(_app: unknown, _database: unknown, name: string): Promise<StoreAgent> {
      const domain = uniqueDomain(name);
      const owner = uniqueEmail(`${name}-owner`);
      await createStore(t.database, domain, owner);
      const agent = await registerAnonymousAgent(t.app);
      expectStatus(await requestCode(t.app, agent.claimToken, owner, domain), 200);
      const mail = await sink.waitFor((m) => m.recipients.includes(owner));
      const claimed = expectStatus(await submitCode(t.app, agent.claimToken, codeIn(mail.text)), 200);
      return { ...agent, token: claimed.credential, domain, owner };
    }

    /** A store with its agent, and `count` shoppers waiting for one variant, in signup order. */
    async function storeWithWaiting(count: number, settings: Record<string, unknown> = {}) {
      const store = await storeWithAgent(t.app, t.database, 'dispatch');
      if (Object.keys(settings).length > 0) {
        expectStatus(await call(t.app, 'PATCH', `/api/v1/stores/${store.domain}`, { token: store.token, body: settings }), 200);
      }
      const ids = { productId: product(), variantId: variant() };
      const title = `Widget ${serial}`;
      const emails: string[] = [];
      const subscriptions: string[] = [];
      for (let i = 0; i < count; i++) {
        const email = uniqueEmail(`waiting${i}`);
        const res = expectStatus(await call(t.app, 'POST', SUBSCRIBE, { token: store.token, body: { ...ids, email, shop: store.domain } }), 200);
        emails.push(email);
        subscriptions.push(res.subscriptionId);
      }
      return { store, ...ids, title, emails, subscriptions };
    }

    function report(store: StoreAgent, items: Array<Record<string, unknown>>) {
      return call(t.app, 'POST', `/api/v1/stores/${store.domain}/inventory`, { token: store.token, body: { items } });
    }

    async function ledger(store: StoreAgent) {
      return t.database.db.selectFrom('notifications').selectAll().where('store_domain', '=', store.domain).orderBy('position').execute();
    }

    async function statusOf(id: string) {
      return (await t.database.db.selectFrom('subscriptions').select('status').where('id', '=', id).executeTakeFirstOrThrow()).status;
    }

    it('sends exactly one alert per waiting subscriber, in signup order, in batches no larger than stock × multiplier', async () => {
      const w = await storeWithWaiting(7);
      const res = expectStatus(await report(w.store, [{ productId: w.productId, variantId: w.variantId, available: 3, productTitle: w.title }]), 200);
      assert.ok(res.items[0].restockId, 'the report starts a restock');

      await t.runWorker();
      const mails = alertsFor(sink, w.title);
      assert.deepEqual(mails.map((m) => m.recipients), w.emails.map((e) => [e]), 'each subscriber once, first come first served');

      const rows = await ledger(w.store);
      assert.equal(rows.length, 7);
      assert.deepEqual(rows.map((r) => r.batch), [1, 1, 1, 2, 2, 2, 3], 'batches of 3 units × 1');
      assert.ok(rows.every((r) => r.status === 'sent' && r.sent_at !== null));
      assert.match(rows[0]!.reason, /came back in stock/);
      assert.match(rows[0]!.reason, /3 in stock × 1 = up to 3 alerts/);
      assert.match(rows[6]!.reason, /#7 in signup order/);
      for (const id of w.subscriptions) assert.equal(await statusOf(id), 'notified');

      // Nothing more goes out: not on another turn, not on the next restock.
      await t.runWorker();
      expectStatus(await report(w.store, [{ productId: w.productId, variantId: w.variantId, available: 0 }]), 200);
      expectStatus(await report(w.store, [{ productId: w.productId, variantId: w.variantId, available: 9 }]), 200);
      await t.runWorker();
      assert.equal(alertsFor(sink, w.title).length, 7);
    });

    it('waits the batch interval between batches and shows the queue meanwhile', async () => {
      const w = await storeWithWaiting(5, { batchIntervalSeconds: 3600, batchMultiplier: 1 });
      expectStatus(await report(w.store, [{ productId: w.productId, variantId: w.variantId, available: 2, productTitle: w.title }]), 200);
      await t.runWorker();
      assert.equal(alertsFor(sink, w.title).length, 2, 'one batch of 2 × 1');

      const queue = expectStatus(await call(t.app, 'GET', `/api/v1/stores/${w.store.domain}/queue`, { token: w.store.token }), 200);
      assert.equal(queue.totalWaiting, 3);
      assert.equal(queue.alerts.sent, 2);
      assert.equal(queue.restocks[0].status, 'dispatching');
      assert.ok(Date.parse(queue.restocks[0].nextBatchAt) > Date.now() + 3500_000);
    });

    it('re-checks stock before each batch and stops when sold out; the rest wait for the next restock', async () => {
      const w = await storeWithWaiting(5);
      expectStatus(await report(w.store, [{ productId: w.productId, variantId: w.variantId, available: 2, productTitle: w.title }]), 200);
      await t.app.restock.worker.turn(); // plans batch 1 and sends it
      assert.equal(alertsFor(sink, w.title).length, 2);
      expectStatus(await report(w.store, [{ productId: w.productId, variantId: w.variantId, available: 0 }]), 200);
      await t.runWorker();
      assert.equal(alertsFor(sink, w.title).length, 2, 'no batch after the stock ran out');
      const [restock] = await t.database.db.selectFrom('restocks').selectAll().where('store_domain', '=', w.store.domain).execute();
      assert.equal(restock!.status, 'sold_out');
      assert.equal(await statusOf(w.subscriptions[4]!), 'active');

      expectStatus(await report(w.store, [{ productId: w.productId, variantId: w.variantId, available: 10 }]), 200);
      await t.runWorker();
      assert.deepEqual(alertsFor(sink, w.title).map((m) => m.recipients[0]), w.emails);
    });

    it('announces nothing below the minimum stock, nor for an unpublished product', async () => {
      const w = await storeWithWaiting(1, { minStock: 5 });
      const low = expectStatus(await report(w.store, [{ productId: w.productId, variantId: w.variantId, available: 3, productTitle: w.title }]), 200);
      assert.equal(low.items[0].restockId, undefined);
      const hidden = expectStatus(await report(w.store, [{ productId: w.productId, variantId: w.variantId, available: 8, published: false }]), 200);
      assert.equal(hidden.items[0].restockId, undefined);
      await t.runWorker();
      assert.equal(alertsFor(sink, w.title).length, 0);
      const shown = expectStatus(await report(w.store, [{ productId: w.productId, variantId: w.variantId, available: 8, published: true }]), 200);
      assert.ok(shown.items[0].restockId, 'publishing a product in stock is a restock');
      await t.runWorker();
      assert.equal(alertsFor(sink, w.title).length, 1);
    });

    it('never mails an unsubscribed or cancelled subscriber', async () => {
      const w = await storeWithWaiting(3);
      const read = expectStatus(await call(t.app, 'GET', `/api/v1/alerts/${w.subscriptions[0]}`, { token: w.store.token }), 200);
      assert.equal((await t.app.inject({ method: 'POST', url: new URL(read.unsubscribeUrl).pathname })).statusCode, 200);
      expectStatus(await call(t.app, 'DELETE', `/api/v1/alerts/${w.subscriptions[1]}`, { token: w.store.token }), 200);
      expectStatus(await report(w.store, [{ productId: w.productId, variantId: w.variantId, available: 5, productTitle: w.title }]), 200);
      await t.runWorker();
      assert.deepEqual(alertsFor(sink, w.title).map((m) => m.recipients[0]), [w.emails[2]]);
    });

    it('honours suppressions: complaints reported through the API, and hard bounces found while sending', async () => {
      const w = await storeWithWaiting(3);
      const suppressed = expectStatus(
        await call(t.app, 'POST', `/api/v1/stores/${w.store.domain}/suppressions`, { token: w.store.token, body: { email: w.emails[0], reason: 'complaint' } }),
        200,
      );
      assert.equal(suppressed.reason, 'complaint');
      refused.add(w.emails[1]!);
      expectStatus(await report(w.store, [{ productId: w.productId, variantId: w.variantId, available: 5, productTitle: w.title }]), 200);
      await t.runWorker();
      assert.deepEqual(alertsFor(sink, w.title).map((m) => m.recipients[0]), [w.emails[2]]);

      const rows = await ledger(w.store);
      const byEmail = new Map(rows.map((r) => [r.email, r]));
      assert.equal(byEmail.get(w.emails[0]!)!.status, 'skipped');
      assert.match(byEmail.get(w.emails[0]!)!.outcome!, /suppressed.*complaint/);
      assert.equal(byEmail.get(w.emails[1]!)!.status, 'failed');
      assert.match(byEmail.get(w.emails[1]!)!.outcome!, /550/);
      const list = expectStatus(await call(t.app, 'GET', `/api/v1/stores/${w.store.domain}/suppressions`, { token: w.store.token }), 200);
      assert.deepEqual(list.items.map((s: { email: string }) => s.email).sort(), [w.emails[0], w.emails[1]].sort());
      assert.equal(list.items.find((s: { email: string }) => s.email === w.emails[1]).reason, 'bounce');
    });

    it('caps alerts per address: a second restock for the same shopper waits, it is not dropped', async () => {
      const store = await storeWithAgent(t.app, t.database, 'capped');
      expectStatus(await call(t.app, 'PATCH', `/api/v1/stores/${store.domain}`, { token: store.token, body: { frequencyCapMinutes: 60 } }), 200);
      const email = uniqueEmail('capped');
      const a = { productId: product(), variantId: variant() };
      const b = { productId: product(), variantId: variant() };
      for (const ids of [a, b]) expectStatus(await call(t.app, 'POST', SUBSCRIBE, { token: store.token, body: { ...ids, email, shop: store.domain } }), 200);
      expectStatus(await report(store, [{ ...a, available: 4, productTitle: 'Capped A' }, { ...b, available: 4, productTitle: 'Capped B' }]), 200);
      await t.runWorker();
      assert.equal(sink.messages.filter((m) => m.recipients[0] === email).length, 1);
      const waiting = (await ledger(store)).filter((r) => r.status === 'queued');
      assert.equal(waiting.length, 1);
      assert.ok(Date.parse(waiting[0]!.next_attempt_at) > Date.now() + 3500_000, 'due when the cap window ends');
    });

    it("sends through the store's own SMTP server, logged in with the credentials its URL carries, kept sealed", async () => {
      // Characters a URL must escape, so a password mangled on the way to the server fails the login.
      const password = `p@ss:w/rd %${randomBytes(6).toString('hex')}`;
      const own = await startSmtpSink({ auth: { user: 'shop@example.com', pass: password } });
      try {
        const w = await storeWithWaiting(2, { smtpUrl: own.url });
        const config = expectStatus(await call(t.app, 'GET', `/api/v1/stores/${w.store.domain}`, { token: w.store.token }), 200);
        assert.equal(config.ownSmtp, true);
        assert.ok(!JSON.stringify(config).includes(encodeURIComponent(password)), 'the URL is never shown back');
        const row = await t.database.db.selectFrom('stores').select('smtp_url_sealed').where('domain', '=', w.store.domain).executeTakeFirstOrThrow();
        assert.ok(row.smtp_url_sealed && !row.smtp_url_sealed.includes(encodeURIComponent(password)) && !row.smtp_url_sealed.includes(String(own.port)), 'sealed at rest');

        expectStatus(await report(w.store, [{ productId: w.productId, variantId: w.variantId, available: 5, productTitle: w.title }]), 200);
        await t.runWorker();
        assert.deepEqual(alertsFor(own, w.title).map((m) => [m.recipients[0], m.user]), w.emails.map((email) => [email, 'shop@example.com']));
        assert.deepEqual(own.refusedLogins, []);
        assert.equal(alertsFor(sink, w.title).length, 0, 'not through the service-wide server');

        expectStatus(await call(t.app, 'PATCH', `/api/v1/stores/${w.store.domain}`, { token: w.store.token, body: { smtpUrl: null } }), 200);
      } finally {
        // The store's pooled transport stays open until the app closes.
        await own.crash();
      }
    });

    it("a wrong password for the store's own server sends nothing, suppresses no shopper, and says why", async () => {
      const own = await startSmtpSink({ auth: { user: 'shop', pass: 'right' } });
      try {
        const w = await storeWithWaiting(2, { smtpUrl: own.url.replace(':right@', ':wrong@') });
        expectStatus(await report(w.store, [{ productId: w.productId, variantId: w.variantId, available: 5, productTitle: w.title }]), 200);
        await t.app.restock.worker.turn();

        assert.deepEqual(alertsFor(own, w.title), []);
        assert.ok(own.refusedLogins.length > 0 && own.refusedLogins.every((user) => user === 'shop'), own.refusedLogins.join());
        const rows = await ledger(w.store);
        assert.equal(rows.length, 2);
        for (const row of rows) {
          assert.equal(row.status, 'queued', 'a refused login is the sender\'s fault: retried, not given up');
          assert.match(row.outcome ?? '', /535/);
        }
        const suppressed = await t.database.db.selectFrom('suppressions').select('email').where('store_domain', '=', w.store.domain).execute();
        assert.deepEqual(suppressed, [], 'the shoppers did nothing wrong');
      } finally {
        await own.crash();
      }
    });

    describe("a store's SMTP URL never becomes mail library options", () => {
      const marker = path.join(os.tmpdir(), `restock-smtp-marker-${process.pid}-${randomBytes(4).toString('hex')}`);
      // Read as options, this query makes the library run /bin/sh instead of speaking SMTP.
      const runsAProgram = `smtp://mail.example.com/?pool=false&sendmail=true&path=/bin/sh&args=-c&args=${encodeURIComponent(`touch ${marker}`)}&newline=unix`;
      after(() => rmSync(marker, { force: true }));

      it('is refused by the settings with a problem naming the field, and changes nothing', async () => {
        const w = await storeWithWaiting(0);
        const before = await t.database.db.selectFrom('stores').selectAll().where('domain', '=', w.store.domain).executeTakeFirstOrThrow();
        const res = await call(t.app, 'PATCH', `/api/v1/stores/${w.store.domain}`, { token: w.store.token, body: { smtpUrl: runsAProgram, locale: 'de' } });
        const problem = expectProblem(res, 400, 'validation-failed');
        assert.equal(problem.errors[0].pointer, '/body/smtpUrl');
        assert.match(problem.errors[0].message, /takes no options/);
        assert.ok(!JSON.stringify(problem).includes(marker), 'the URL is not repeated');
        assert.deepEqual(await t.database.db.selectFrom('stores').selectAll().where('domain', '=', w.store.domain).executeTakeFirstOrThrow(), before);
      });

      it('stored before the check existed, it runs nothing: its alerts fail with the reason and other stores still send', async () => {
        const w = await storeWithWaiting(1);
        const other = await storeWithWaiting(1);
        // As a row written before the settings checked the URL would hold it.
        await t.app.restock.stores.setSmtpUrl(w.store.domain, runsAProgram);
        expectStatus(await report(w.store, [{ productId: w.productId, variantId: w.variantId, available: 5, productTitle: w.title }]), 200);
        expectStatus(await report(other.store, [{ productId: other.productId, variantId: other.variantId, available: 5, productTitle: other.title }]), 200);
        await t.app.restock.worker.turn();
        await t.app.restock.worker.turn();

        assert.equal(existsSync(marker), false, 'no program ran');
        const [row] = await ledger(w.store);
        assert.match(row!.outcome ?? '', /SMTP URL is refused: a store's SMTP URL takes no options/);
        assert.notEqual(row!.status, 'sent');
        assert.deepEqual(alertsFor(sink, other.title).map((m) => m.recipients[0]), other.emails);
      });
    });

    it('retries transient failures with backoff and delivers once the SMTP server is back', async () => {
      const w = await storeWithWaiting(3);
      const port = sink.port;
      await t.app.restock.worker.turn(); // settle nothing pending before the sink goes
      await sink.crash();
      expectStatus(await report(w.store, [{ productId: w.productId, variantId: w.variantId, available: 5, productTitle: w.title }]), 200);
      await t.app.restock.worker.turn();
      const rows = await ledger(w.store);
      assert.ok(rows.every((r) => r.status === 'queued' && r.attempts === 1 && /will retry/.test(r.outcome ?? '')), 'queued again for a retry');

      sink = await startSmtpSink({ port, refuseRecipient: (address) => refused.has(address) });
      await untilRetriesDue(rows);
      await t.runWorker();
      assert.deepEqual(alertsFor(sink, w.title).map((m) => m.recipients[0]), w.emails);
      assert.ok((await ledger(w.store)).every((r) => r.status === 'sent' && r.attempts === 2));
    });

    it('reads stock status and the alert ledger with api:read, for the bound store only', async () => {
      const w = await storeWithWaiting(1);
      expectStatus(await report(w.store, [{ productId: w.productId, variantId: w.variantId, available: 4, productTitle: w.title }]), 200);
      await t.runWorker();
      const stock = expectStatus(await call(t.app, 'GET', `/api/v1/stores/${w.store.domain}/stock?productId=${encodeURIComponent(w.productId)}`, { token: w.store.token }), 200);
      assert.deepEqual(
        stock.items.map((s: { variantId: string; available: number; published: boolean }) => [s.variantId, s.available, s.published]),
        [[w.variantId, 4, true]],
      );
      const audit = expectStatus(await call(t.app, 'GET', `/api/v1/stores/${w.store.domain}/notifications?status=sent`, { token: w.store.token }), 200);
      assert.equal(audit.items.length, 1);
      assert.match(audit.items[0].reason, /signup order/);
      const config = expectStatus(await call(t.app, 'GET', `/api/v1/stores/${w.store.domain}`, { token: w.store.token }), 200);
      assert.equal(config.settings.batchMultiplier, 1);

      const stranger = await registerAnonymousAgent(t.app);
      expectProblem(await call(t.app, 'GET', `/api/v1/stores/${w.store.domain}/queue`, { token: stranger.token }), 404, 'not-found');
      expectProblem(await report({ ...w.store, token: stranger.token }, [{ productId: w.productId, available: 1 }]), 403, 'insufficient-scope');
      const other = await storeWithAgent(t.app, t.database, 'other');
      expectProblem(await report({ ...w.store, token: other.token }, [{ productId: w.productId, available: 1 }]), 404, 'not-found');
    });

    it('refuses bad inventory reports whole, changing nothing', async () => {
      const w = await storeWithWaiting(1);
      const before = await t.tableDigests();
      for (const items of [
        [],
        [{ productId: 'nope', available: 1 }],
        [{ productId: w.productId, available: 1.5 }],
        [{ productId: w.productId, variantId: w.variantId, available: 1 }, { productId: w.productId, available: 'many' }],
        [{ productId: w.productId, available: 1, productUrl: 'javascript:alert(1)' }],
        [{ productId: w.productId, available: 1, extra: true }],
      ]) {
        expectProblem(await report(w.store, items), 400, 'validation-failed');
      }
      assert.deepEqual(await t.tableDigests(), before);
    });

    it('ignores a report older than the state already known', async () => {
      const w = await storeWithWaiting(1);
      const now = Date.now();
      expectStatus(await report(w.store, [{ productId: w.productId, variantId: w.variantId, available: 0, updatedAt: new Date(now).toISOString() }]), 200);
      const stale = expectStatus(await report(w.store, [{ productId: w.productId, variantId: w.variantId, available: 6, updatedAt: new Date(now - 60_000).toISOString() }]), 200);
      assert.equal(stale.items[0].ignored, 'stale');
      assert.equal(stale.items[0].restockId, undefined);
      assert.equal(stale.items[0].available, 0);
    });
  });

  describe(`alerts through a real mail system (Postfix, Dovecot) on ${dialect}`, { skip: dialectSkip(dialect) ?? mailSystemSkipReason() }, () => {
    let mail: MailSystem;
    let t: TestApp;
    before(async () => {
      mail = await startMailSystem();
      t = await startTestApp(dialect, { SMTP_URL: mail.smtpUrl, FREQUENCY_CAP_MINUTES: '0', BATCH_INTERVAL_SECONDS: '0', BATCH_MULTIPLIER: '1' });
    });
    after(async () => {
      await t?.close();
    });

    /** A store and an agent its owner claimed for it, the claim code read from the owner's mailbox. */
    async function storeWithAgent(): Promise<StoreAgent> {
      const domain = uniqueDomain('delivered');
      const owner = uniqueEmail('delivered-owner');
      await createStore(t.database, domain, owner);
      const agent = await registerAnonymousAgent(t.app);
      expectStatus(await requestCode(t.app, agent.claimToken, owner, domain), 200);
      const claim = await mail.waitForMessage(owner);
      const claimed = expectStatus(await submitCode(t.app, agent.claimToken, codeIn(claim.text ?? '')), 200);
      return { ...agent, token: claimed.credential, domain, owner };
    }

    async function storeWithWaiting(count: number, settings: Record<string, unknown> = {}) {
      const store = await storeWithAgent();
      if (Object.keys(settings).length > 0) {
        expectStatus(await call(t.app, 'PATCH', `/api/v1/stores/${store.domain}`, { token: store.token, body: settings }), 200);
      }
      const ids = { productId: product(), variantId: variant() };
      const emails: string[] = [];
      const subscriptions: string[] = [];
      for (let i = 0; i < count; i++) {
        const email = uniqueEmail(`delivered${i}`);
        const res = expectStatus(await call(t.app, 'POST', SUBSCRIBE, { token: store.token, body: { ...ids, email, shop: store.domain } }), 200);
        emails.push(email);
        subscriptions.push(res.subscriptionId);
      }
      return { store, ...ids, emails, subscriptions };
    }

    const report = (store: StoreAgent, items: Array<Record<string, unknown>>) =>
      call(t.app, 'POST', `/api/v1/stores/${store.domain}/inventory`, { token: store.token, body: { items } });
    const statusOf = async (id: string) =>
      (await t.database.db.selectFrom('subscriptions').select('status').where('id', '=', id).executeTakeFirstOrThrow()).status;
    const ledger = (store: StoreAgent) =>
      t.database.db.selectFrom('notifications').selectAll().where('store_domain', '=', store.domain).orderBy('position').execute();
    /** The one-click unsubscribe a mail client makes (RFC 8058): a POST without cookies or login. */
    const oneClick = (url: string) =>
      t.app.inject({ method: 'POST', url: new URL(url).pathname, payload: 'List-Unsubscribe=One-Click', headers: { 'content-type': 'application/x-www-form-urlencoded' } });

    it('an alert arrives as sent: its headers, MIME parts and a non-ASCII product name, the link and one-click unsubscribe working from the mailbox', async () => {
      const w = await storeWithWaiting(2);
      const title = `Crème brûlée — 日本 ${serial}`;
      const image = 'https://cdn.example.com/creme.png';
      const url = `https://${w.store.domain}/products/creme`;
      expectStatus(
        await report(w.store, [{ productId: w.productId, variantId: w.variantId, available: 5, productTitle: `${title} <Deluxe>`, variantTitle: 'Bleu / M', imageUrl: image, productUrl: url }]),
        200,
      );
      await t.runWorker();
      const [first, second] = await Promise.all(w.emails.map((to) => mail.waitForMessage(to)));
      const rows = await ledger(w.store);

      for (const [i, got] of [first!, second!].entries()) {
        const to = w.emails[i]!;
        // What Postfix added: the envelope and its trace; nothing it wrote replaces a field of ours.
        assert.equal(got.deliveredTo, to);
        assert.equal(got.header('return-path'), '<alerts@restock.localhost>');
        assert.match(got.header('received') ?? '', /by mail\.restock\.test \(Postfix\) with ESMTP /);
        for (const name of ['from', 'to', 'subject', 'date', 'message-id', 'mime-version', 'list-unsubscribe', 'list-unsubscribe-post', 'x-restock-alert']) {
          assert.equal(got.headers[name]?.length, 1, `one ${name} field`);
        }
        assert.equal(got.header('from'), 'Restock <alerts@restock.localhost>');
        assert.equal(got.headers.sender, undefined, 'the From address sends it: no Sender field');
        assert.equal(got.header('to'), to);
        assert.equal(got.subject, `${title} <Deluxe> is back in stock`);
        // Ours, not one Postfix made up for a mail without it (those end @mail.restock.test).
        assert.match(got.header('message-id')!, /^<[^<>@\s]+@restock\.localhost>$/);
        assert.ok(Math.abs(Date.parse(got.header('date')!) - Date.now()) < 10 * 60_000, got.header('date'));
        assert.equal(got.header('x-restock-alert'), rows.find((row) => row.email === to)!.id);
        assert.equal(got.header('list-unsubscribe-post'), 'List-Unsubscribe=One-Click');
        assert.match(got.header('list-unsubscribe')!, /^<http:\/\/restock\.test\/unsubscribe\/[^>\s]+>$/);

        assert.equal(got.structure, 'multipart/alternative(text/plain,text/html)');
        assert.ok(got.parts.every((part) => part.charset === 'utf-8'), JSON.stringify(got.parts.map((p) => p.charset)));
        assert.ok(got.text?.includes(`${title} <Deluxe>`), got.text);
        assert.match(got.text!, /Bleu \/ M/);
        assert.ok(got.html?.includes(`${title} &lt;Deluxe&gt;`), 'titles are escaped in HTML');
        assert.ok(got.html?.includes(image));
        const head = got.raw.slice(0, got.raw.indexOf('\r\n\r\n'));
        assert.match(head, /^[\x20-\x7e\r\n\t]*$/, 'the header is ASCII: the title travels as encoded words, no SMTPUTF8 needed');
        assert.ok(got.raw.split('\r\n').every((line) => line.length <= 998), 'no line over the 998 characters RFC 5322 allows');
      }
      assert.notEqual(first!.header('message-id'), second!.header('message-id'));

      // The product link is ours: it records the click and lands on the product with UTM parameters.
      const productLink = new RegExp(`http://restock\\.test/r/${w.store.domain.replace(/\./g, '\\.')}/[^\\s]+`).exec(first!.text!)?.[0];
      assert.ok(productLink, first!.text);
      const landed = await t.app.inject({ method: 'GET', url: new URL(productLink).pathname, headers: { 'user-agent': 'Mozilla/5.0' } });
      assert.equal(landed.statusCode, 302, landed.body);
      assert.equal(landed.headers.location, `${url}?variant=${w.variantId.split('/').pop()}&utm_source=restock&utm_medium=email&utm_campaign=back-in-stock`);

      const link = /^<([^>]+)>$/.exec(first!.header('list-unsubscribe')!)![1]!;
      assert.ok(first!.text!.includes(link), 'the text offers the same link');
      assert.equal((await oneClick(link)).statusCode, 200);
      // Already alerted: the alert stays sent, and the subscription ends, so no reminder follows it.
      assert.equal(await statusOf(w.subscriptions[0]!), 'unsubscribed');
      assert.equal(await statusOf(w.subscriptions[1]!), 'notified');

      // A shopper still waiting who uses the same one-click address is never mailed.
      const third = uniqueEmail('one-click');
      const waiting = expectStatus(await call(t.app, 'POST', SUBSCRIBE, { token: w.store.token, body: { productId: w.productId, variantId: w.variantId, email: third, shop: w.store.domain } }), 200);
      const fourth = uniqueEmail('stays');
      expectStatus(await call(t.app, 'POST', SUBSCRIBE, { token: w.store.token, body: { productId: w.productId, variantId: w.variantId, email: fourth, shop: w.store.domain } }), 200);
      const read = expectStatus(await call(t.app, 'GET', `/api/v1/alerts/${waiting.subscriptionId}`, { token: w.store.token }), 200);
      assert.equal((await oneClick(read.unsubscribeUrl)).statusCode, 200);

      expectStatus(await report(w.store, [{ productId: w.productId, variantId: w.variantId, available: 0 }]), 200);
      expectStatus(await report(w.store, [{ productId: w.productId, variantId: w.variantId, available: 5 }]), 200);
      await t.runWorker();
      await mail.waitForMessage(fourth);
      const sent = (await ledger(w.store)).filter((row) => row.status === 'sent').map((row) => row.email);
      assert.deepEqual(sent.sort(), [...w.emails, fourth].sort(), 'the next restock mails the shopper still waiting, and no one twice');
      assert.equal(await statusOf(waiting.subscriptionId), 'unsubscribed');
      assert.deepEqual(await mail.messages(third), []);
    });

    it('keeps what a real mailbox needs of an alert: From, Date and Message-ID of our own, and RFC 8058 one-click unsubscribe', async () => {
      // Postfix fills in From, Date and Message-ID for a loopback client that leaves them out,
      // and a mailbox offers one-click unsubscribe only with both List-Unsubscribe fields.
      const w = await storeWithWaiting(1);
      expectStatus(await report(w.store, [{ productId: w.productId, variantId: w.variantId, available: 1, productTitle: `Needs ${serial}` }]), 200);
      await t.runWorker();
      const got = await mail.waitForMessage(w.emails[0]!);
      const fields = (name: string) => got.headers[name] ?? [];
      assert.deepEqual(fields('from'), ['Restock <alerts@restock.localhost>']);
      assert.equal(fields('date').length, 1);
      assert.doesNotMatch(got.raw, /^Date: .*\r\n(?:.*\r\n)*?Date: /m);
      assert.match(fields('message-id')[0] ?? '', /@restock\.localhost>$/, 'the Message-ID is ours, not one Postfix added');
      assert.match(fields('list-unsubscribe')[0] ?? '', /^<http:\/\/restock\.test\/unsubscribe\/[^>]+>$/);
      assert.deepEqual(fields('list-unsubscribe-post'), ['List-Unsubscribe=One-Click']);
      assert.equal(fields('mime-version')[0], '1.0');
    });

    it("uses the store's locale, own template and sender name, encoded so a mailbox reads them back", async () => {
      const w = await storeWithWaiting(1, { locale: 'fr', senderName: 'Crème & Co — Boutique', template: { subject: 'Enfin ! {{product_title}} pour {{email}}' } });
      const title = `Brûlée ${serial}`;
      expectStatus(await report(w.store, [{ productId: w.productId, variantId: w.variantId, available: 1, productTitle: title }]), 200);
      await t.runWorker();
      const got = await mail.waitForMessage(w.emails[0]!);
      assert.equal(got.subject, `Enfin ! ${title} pour ${w.emails[0]}`);
      assert.match(got.text!, /est de nouveau en stock/);
      assert.match(got.header('from')!, /^"?Crème & Co — Boutique"? <alerts@restock\.localhost>$/);
      assert.match(got.raw, /^From: =\?UTF-8\?/m, 'the name travels as an encoded word');
    });
  });

  describe(`alerts over submission (STARTTLS and a login) on ${dialect}`, { skip: dialectSkip(dialect) ?? mailSystemSkipReason() }, () => {
    let mail: MailSystem;
    before(async () => {
      mail = await startMailSystem();
    });

    /**
     * A service sending through `smtpUrl`, a store with `count` shoppers waiting and a restock
     * reported; no agent, so no claim code has to get through a server that may refuse it.
     */
    async function restockThrough(env: Record<string, string>, count: number, use: (t: TestApp, shop: string, emails: string[]) => Promise<void>) {
      const t = await startTestApp(dialect, { FREQUENCY_CAP_MINUTES: '0', BATCH_INTERVAL_SECONDS: '0', BATCH_MULTIPLIER: '1', DISPATCH_RETRY_BASE_MS: '20', ...env });
      try {
        const shop = uniqueDomain('submission');
        await createStore(t.database, shop, uniqueEmail('submission-owner'));
        const ids = { productId: product(), variantId: variant() };
        const emails = Array.from({ length: count }, (_, i) => uniqueEmail(`submission${i}`));
        for (const email of emails) await t.app.restock.alerts.subscribeShopper({ shop, ...ids, email });
        await t.app.restock.inventory.reportStock(shop, [{ ...ids, available: count, productTitle: `Submitted ${serial}` }], { kind: 'shopify-webhook', ref: 'test', verified: true });
        await use(t, shop, emails);
      } finally {
        await t.close();
      }
    }

    const ledgerOf = (t: TestApp, shop: string) => t.database.db.selectFrom('notifications').selectAll().where('store_domain', '=', shop).execute();
    const suppressionsOf = (t: TestApp, shop: string) => t.database.db.selectFrom('suppressions').select('email').where('store_domain', '=', shop).execute();

    it('sends through submission: STARTTLS to a server of SMTP_CA_FILE, then logged in', async () => {
      await restockThrough({ SMTP_URL: mail.submissionUrl, SMTP_CA_FILE: mail.caFile }, 1, async (t, shop, [email]) => {
        await t.runWorker();
        const got = await mail.waitForMessage(email!);
        // RFC 3848: ESMTPSA is ESMTP with TLS (S) and a login (A).
        assert.match(got.header('received') ?? '', /\bwith ESMTPSA\b/);
        assert.equal(got.header('list-unsubscribe-post'), 'List-Unsubscribe=One-Click');
        assert.deepEqual((await ledgerOf(t, shop)).map((row) => row.status), ['sent']);
      });
    });

    it('a wrong password loses no alert: queued again with the reason, retried, and no shopper suppressed', async () => {
      await restockThrough({ SMTP_URL: mail.submissionUrlWithWrongPassword, SMTP_CA_FILE: mail.caFile }, 2, async (t, shop, emails) => {
        await t.app.restock.worker.turn();
        let rows = await ledgerOf(t, shop);
        assert.equal(rows.length, 2);
        for (const row of rows) {
          assert.equal(row.status, 'queued', "a refused login is the sender's to fix: retried, not given up");
          assert.equal(row.attempts, 1);
          assert.match(row.outcome ?? '', /refused the login \(reply code 535\)/);
        }
        await untilRetriesDue(rows);
        await t.app.restock.worker.turn();
        rows = await ledgerOf(t, shop);
        assert.ok(rows.every((row) => row.status === 'queued' && row.attempts === 2), 'retried on the service\'s backoff');
        assert.deepEqual(await suppressionsOf(t, shop), [], 'the shoppers did nothing wrong');
        for (const email of emails) assert.deepEqual(await mail.messages(email), [], 'Postfix never took it, so nothing can arrive later');
      });
    });

    it("without a login, Postfix refuses each recipient with 554 5.7.1: the alerts are retried, no shopper suppressed", async () => {
      const noLogin = mail.submissionUrl.replace(/\/\/[^@]+@/, '//');
      await restockThrough({ SMTP_URL: noLogin, SMTP_CA_FILE: mail.caFile }, 2, async (t, shop) => {
        await t.app.restock.worker.turn();
        const rows = await ledgerOf(t, shop);
        assert.equal(rows.length, 2);
        for (const row of rows) {
          assert.equal(row.status, 'queued', 'a policy refusal at RCPT TO is not a bounce');
          assert.match(row.outcome ?? '', /refused the recipient for a policy or login reason \(reply code 554\)/);
        }
        assert.deepEqual(await suppressionsOf(t, shop), []);
      });
    });

    it('without SMTP_CA_FILE the test CA is not trusted: nothing is sent, the alert waits with the reason', async () => {
      await restockThrough({ SMTP_URL: mail.submissionUrl }, 1, async (t, shop, [email]) => {
        await t.app.restock.worker.turn();
        const [row] = await ledgerOf(t, shop);
        assert.equal(row!.status, 'queued');
        assert.match(row!.outcome ?? '', /secure \(TLS\) connection to the mail server failed/);
        assert.deepEqual(await mail.messages(email!), []);
      });
    });
  });

  describe(`the local outbox on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    const { storeWithAgent } = outboxFixtures;
    let t: TestApp;
    before(async () => {
      t = await startTestApp(dialect, { FREQUENCY_CAP_MINUTES: '0' });
    });
    after(() => t.close());

    it('keeps alerts in the outbox when no SMTP server is set, listed for the store', async () => {
      const store = await storeWithAgent(t.app, t.database, 'outbox');
      const ids = { productId: product(), variantId: variant() };
      const email = uniqueEmail('outbox');
      expectStatus(await call(t.app, 'POST', SUBSCRIBE, { token: store.token, body: { ...ids, email, shop: store.domain } }), 200);
      expectStatus(await call(t.app, 'POST', `/api/v1/stores/${store.domain}/inventory`, { token: store.token, body: { items: [{ ...ids, available: 3, productTitle: 'Outbox widget' }] } }), 200);
      await t.runWorker();
      const outbox = expectStatus(await call(t.app, 'GET', `/api/v1/stores/${store.domain}/outbox`, { token: store.token }), 200);
      const alerts = outbox.items.filter((m: { purpose: string }) => m.purpose === 'restock-alert');
      assert.equal(alerts.length, 1);
      assert.equal(alerts[0].to, email);
      assert.equal(alerts[0].subject, 'Outbox widget is back in stock');
      assert.equal(alerts[0].headers['List-Unsubscribe-Post'], 'List-Unsubscribe=One-Click');
    });

    it("refuses to keep a store's SMTP credentials without an encryption key, changing nothing", async () => {
      const store = await storeWithAgent(t.app, t.database, 'nokey');
      const before = await t.tableDigests();
      const res = await call(t.app, 'PATCH', `/api/v1/stores/${store.domain}`, { token: store.token, body: { smtpUrl: 'smtp://user:secret@mail.example.com:587', locale: 'de' } });
      expectProblem(res, 501, 'not-configured');
      assert.match(res.json().detail, /RESTOCK_ENCRYPTION_KEY/);
      assert.deepEqual(await t.tableDigests(), before);
      const config = expectStatus(await call(t.app, 'GET', `/api/v1/stores/${store.domain}`, { token: store.token }), 200);
      assert.equal(config.ownSmtp, false);
      assert.equal(config.settings.locale, 'en');
    });
  });

  describe(`the worker inside the service on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    /** A running server with one restock reported to it; `alerts()` reads its store's outbox. */
    async function serveWithRestock(env: Record<string, string>, use: (server: RunningServer, alerts: () => Promise<number>) => Promise<void>) {
      const database = await createTestDatabase(dialect);
      const server = await startServer(testConfig(database.url, { PORT: '0', FREQUENCY_CAP_MINUTES: '0', DISPATCH_POLL_MS: '50', ...env }));
      try {
        const store = await storeWithOutboxAgent(server.app, server.database, 'serve');
        const ids = { productId: product(), variantId: variant() };
        expectStatus(await call(server.app, 'POST', SUBSCRIBE, { token: store.token, body: { ...ids, email: uniqueEmail('serve'), shop: store.domain } }), 200);
        expectStatus(await call(server.app, 'POST', `/api/v1/stores/${store.domain}/inventory`, { token: store.token, body: { items: [{ ...ids, available: 2 }] } }), 200);
        const alerts = async () => {
          const outbox = expectStatus(await call(server.app, 'GET', `/api/v1/stores/${store.domain}/outbox`, { token: store.token }), 200);
          return outbox.items.filter((m: { purpose: string }) => m.purpose === 'restock-alert').length;
        };
        await use(server, alerts);
      } finally {
        await server.stop();
        await database.drop();
      }
    }

    it('sends alerts from `restock serve` by default, with no separate worker', async () => {
      await serveWithRestock({}, async (server, alerts) => {
        assert.equal(server.app.restock.worker.isRunning, true);
        await eventually(async () => (await alerts()) === 1, 'the alert is in the outbox', 15_000);
      });
    });

    it('leaves sending to `restock worker` processes when RUN_WORKER=false', async () => {
      await serveWithRestock({ RUN_WORKER: 'false' }, async (server, alerts) => {
        assert.equal(server.app.restock.worker.isRunning, false, 'no loop to send with');
        assert.equal(await alerts(), 0);
        // The restock waits for whichever worker comes: one turn sends it.
        await server.app.restock.worker.runUntilIdle();
        assert.equal(await alerts(), 1);
      });
    });
  });

  describe(`stock per location on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    let t: TestApp;
    before(async () => {
      t = await startTestApp(dialect);
    });
    after(() => t.close());

    it("adjusts a known total by a location's change, and sums locations when the variant was sold out", async () => {
      const { inventory } = t.app.restock;
      const shop = uniqueDomain('levels');
      const ids = { productId: product(), variantId: variant() };
      const item = `gid://shopify/InventoryItem/${++serial}`;
      const source = { kind: 'shopify-webhook' as const, ref: 'test', verified: true };
      const level = async (location: string, available: number) =>
        (await inventory.reportLevel(shop, { inventoryItemId: item, locationId: `gid://shopify/Location/${location}`, available }, source))!.available;

      await inventory.reportStock(shop, [{ ...ids, inventoryItemId: item, available: 0 }], source);
      assert.equal(await level('1', 3), 3, 'sold out everywhere: the one location with stock is the total');
      // A product payload carries the platform's total over every location, some never heard of.
      await inventory.reportStock(shop, [{ ...ids, available: 10 }], source);
      assert.equal(await level('1', 1), 8, 'the total moves by the change of location 1 (3 → 1)');
      assert.equal(await level('2', 2), 8, 'a location never heard of cannot lower a known total');
      await inventory.reportStock(shop, [{ ...ids, available: 0 }], source);
      assert.equal(await level('3', 5), 8, 'sold out: the known locations are summed (1 + 2 + 5)');
    });
  });
}
