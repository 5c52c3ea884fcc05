/**
 * Planning a batch a page at a time: a waiting list far larger than a page is read, queued and
 * committed in pages, never held whole, and still every subscriber is alerted exactly once, the
 * store's own first and third parties after, each in signup order; a batch ends where its size
 * says, whatever the page size; and a worker stopped between pages lets go of the restock, so
 * another finishes it.
 */
import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from './fixtures/suites.ts';
import { dialectSkip, startTestApp, testDialects, type TestApp } from './fixtures/app.ts';
import { call, expectStatus, registerAnonymousAgent, storeWithAgent, uniqueEmail, type StoreAgent } from './fixtures/agents.ts';
import { failOnLeakedHandles } from './fixtures/leaks.ts';
import type { MailMessage, MailTransport } from '../src/core/mail/transport.ts';
import { NotificationSenders } from '../src/dispatch/senders.ts';
import { DispatchRepository, type NotificationRow, type RestockRow } from '../src/dispatch/repository.ts';
import { DispatchWorker } from '../src/dispatch/worker.ts';

failOnLeakedHandles();

const SUBSCRIBE = '/api/v1/alerts/subscribe';
const PAGE = 4;
let serial = 0;

/** Takes every mail at once and keeps what it was given. */
class KeepingTransport implements MailTransport {
  readonly kind = 'smtp' as const;
  readonly given: MailMessage[] = [];
  async send(message: MailMessage): Promise<void> {
    this.given.push(message);
  }
  async close(): Promise<void> {}
}

/** The ledger store, recording the size of each page the planner queues, with a hook after each. */
class PageRecordingRepository extends DispatchRepository {
  readonly pages: number[] = [];
  afterPage: ((page: number) => Promise<unknown>) | undefined;

  override async queueBatch(owner: string, restock: Pick<RestockRow, 'id'>, rows: NotificationRow[], changes: Partial<RestockRow>): Promise<boolean> {
    const queued = await super.queueBatch(owner, restock, rows, changes);
    this.pages.push(rows.length);
    await this.afterPage?.(this.pages.length);
    return queued;
  }
}

for (const dialect of testDialects()) {
  describe(`planning a batch in pages on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    let t: TestApp;
    beforeEach(async () => {
      t = await startTestApp(dialect, { FREQUENCY_CAP_MINUTES: '0', BATCH_MULTIPLIER: '1', BATCH_INTERVAL_SECONDS: '0', DISPATCH_CLAIM_SIZE: '500' });
    });
    afterEach(() => t.close());

    function workerWith(transport: MailTransport, store: DispatchRepository): DispatchWorker {
      const { billing, dispatch, alerts, inventory, stores, conversions, events } = t.app.restock;
      return new DispatchWorker(
        {
          quota: billing,
          followUp: conversions,
          events,
          store,
          dispatch,
          alerts,
          inventory,
          stores,
          senders: new NotificationSenders(transport, 'Restock <alerts@restock.test>', 1, t.config.tenantOutbound),
          config: t.config.dispatch,
          log: t.app.log,
          jobs: [],
        },
        { pageSize: PAGE },
      );
    }

    /** One variant of a store, its subscribers made in the order asked, and its restock report. */
    async function variant() {
      const store: StoreAgent = await storeWithAgent(t.app, t.database, 'pages');
      const outsider = await registerAnonymousAgent(t.app);
      const ids = { productId: `gid://shopify/Product/${9_700_000 + ++serial}`, variantId: `gid://shopify/ProductVariant/${9_800_000 + serial}` };
      const emails = new Map<string, 'own' | 'third'>();
      const subscribe = async (kind: 'own' | 'third', name: string) => {
        const email = uniqueEmail(name);
        const token = kind === 'own' ? store.token : outsider.token;
        expectStatus(await call(t.app, 'POST', SUBSCRIBE, { token, body: { ...ids, email, shop: store.domain } }), 200);
        emails.set(email, kind);
        return email;
      };
      const restock = async (available: number) =>
        expectStatus(await call(t.app, 'POST', `/api/v1/stores/${store.domain}/inventory`, { token: store.token, body: { items: [{ ...ids, available }] } }), 200);
      const subscriptions = async () => {
        const rows = await t.database.db.selectFrom('subscriptions').select(['id', 'email', 'third_party', 'created_at']).where('store_domain', '=', store.domain).execute();
        return new Map(rows.map((row) => [row.id, row]));
      };
      const ledger = () => t.database.db.selectFrom('notifications').selectAll().where('store_domain', '=', store.domain).orderBy('position').execute();
      const restockRow = () => t.database.db.selectFrom('restocks').selectAll().where('store_domain', '=', store.domain).executeTakeFirstOrThrow();
      return { store, emails, subscribe, restock, subscriptions, ledger, restockRow };
    }

    /** Subscription ids in the order the rules say: the store's own in signup order, then third parties in signup order. */
    function expectedOrder(subs: Map<string, { id: string; third_party: number; created_at: string }>): string[] {
      const bySignup = [...subs.values()].sort((a, b) => (a.created_at < b.created_at ? -1 : a.created_at > b.created_at ? 1 : a.id < b.id ? -1 : 1));
      return [...bySignup.filter((s) => s.third_party === 0), ...bySignup.filter((s) => s.third_party === 1)].map((s) => s.id);
    }

    it('a waiting list far larger than a page is planned page by page: each subscriber alerted exactly once, own first, then third parties, each in signup order', async () => {
      const v = await variant();
      // Third parties sign up between the store's own shoppers: signup order alone would mix them.
      for (let i = 0; i < 19; i++) await v.subscribe(i % 4 === 1 ? 'third' : 'own', `page${i}`);
      const store = new PageRecordingRepository(t.database);
      let late: string | undefined;
      // A shopper of the store who signs up once the first page is queued still goes ahead of every third party.
      store.afterPage = async (page) => {
        if (page === 1) late = await v.subscribe('own', 'late');
      };
      await v.restock(40);
      const transport = new KeepingTransport();
      const worker = workerWith(transport, store);
      try {
        await worker.runUntilIdle();
      } finally {
        await worker.stop();
      }

      assert.ok(store.pages.length >= Math.ceil(20 / PAGE), `the batch was queued in ${Math.ceil(20 / PAGE)} pages or more (pages: ${store.pages.join(', ')})`);
      assert.ok(
        store.pages.every((size) => size <= PAGE),
        `no page held more than ${PAGE} subscribers (pages: ${store.pages.join(', ')})`,
      );
      const subs = await v.subscriptions();
      assert.equal(subs.size, 20);
      assert.ok(late !== undefined && [...subs.values()].some((s) => s.email === late), 'the late shopper subscribed during the batch');
      const rows = await v.ledger();
      assert.deepEqual(
        rows.map((row) => row.subscription_id),
        expectedOrder(subs),
        "the ledger's positions hold the store's own shoppers in signup order (the late one last of them), then third parties in signup order",
      );
      assert.deepEqual(
        rows.map((row) => row.position),
        rows.map((_, i) => i),
        'positions run 0, 1, 2 … across pages, without a gap or a repeat',
      );
      assert.ok(
        rows.every((row) => row.status === 'sent' && row.attempts === 1 && row.batch === 1),
        `every alert sent on its first attempt, all in batch 1 (${JSON.stringify(rows.map((row) => [row.status, row.attempts, row.batch]))})`,
      );
      const recipients = transport.given.map((message) => message.to);
      assert.equal(recipients.length, 20, 'one mail per subscriber');
      assert.equal(new Set(recipients).size, 20, 'no subscriber mailed twice');
      assert.deepEqual(new Set(recipients), new Set(v.emails.keys()), 'every subscriber mailed');
      const restock = await v.restockRow();
      assert.deepEqual([restock.status, restock.batches, restock.planned, restock.lease_owner], ['done', 1, 20, null], 'the restock is done after one batch of 20, its lease let go');
    });

    it('a batch ends at its size whatever the page size: the next batch starts its own pages', async () => {
      const v = await variant();
      for (let i = 0; i < 19; i++) await v.subscribe('own', `size${i}`);
      const store = new PageRecordingRepository(t.database);
      // 10 in stock × 1: batches of 10, of pages of at most 4.
      await v.restock(10);
      const transport = new KeepingTransport();
      const worker = workerWith(transport, store);
      try {
        await worker.runUntilIdle();
      } finally {
        await worker.stop();
      }
      assert.deepEqual(store.pages, [4, 4, 2, 4, 4, 1], 'batch 1 in pages of 4, 4 and 2; batch 2 the same until the list ran out');
      const rows = await v.ledger();
      assert.deepEqual(
        rows.map((row) => row.batch),
        [...Array(10).fill(1), ...Array(9).fill(2)],
        'the first 10 in signup order went in batch 1, the other 9 in batch 2',
      );
      assert.deepEqual(rows.map((row) => row.subscription_id), expectedOrder(await v.subscriptions()), 'in signup order');
      assert.equal(new Set(transport.given.map((message) => message.to)).size, 19, 'each of the 19 mailed once');
      assert.equal(transport.given.length, 19, 'no one mailed twice');
      const restock = await v.restockRow();
      assert.deepEqual([restock.status, restock.batches, restock.planned], ['done', 2, 19], 'two batches, 19 planned');
    });

    it('a restock reported while a batch goes out page by page is sent before the later pages of that batch, not after all of it', async () => {
      const large = await variant();
      for (let i = 0; i < 16; i++) await large.subscribe('own', `large${i}`);
      const small = await variant();
      const waiting = await small.subscribe('own', 'small');
      const store = new PageRecordingRepository(t.database);
      // The small restock is reported once the large batch's second page is queued: sending has begun.
      store.afterPage = async (page) => {
        if (page === 2) await small.restock(1);
      };
      await large.restock(16);
      const transport = new KeepingTransport();
      const worker = workerWith(transport, store);
      try {
        await worker.runUntilIdle();
      } finally {
        await worker.stop();
      }
      const order = transport.given.map((message) => message.to);
      assert.equal(order.length, 17, 'everyone mailed once');
      const largeOnes = order.flatMap((to, i) => (large.emails.has(String(to)) ? [i] : []));
      assert.ok(order.indexOf(waiting) < largeOnes.at(-PAGE)!, `the small restock's alert went before the large batch's last page (order: ${order.indexOf(waiting)} of ${order.length})`);
    });

    it('a worker stopped between pages lets go of the restock: another finishes it, everyone alerted once, in order', async () => {
      const v = await variant();
      for (let i = 0; i < 18; i++) await v.subscribe(i % 3 === 2 ? 'third' : 'own', `stop${i}`);
      const store = new PageRecordingRepository(t.database);
      await v.restock(18);
      const transport = new KeepingTransport();
      const first = workerWith(transport, store);
      let stopped: Promise<void> | undefined;
      store.afterPage = async (page) => {
        if (page === 2) stopped = first.stop();
      };
      first.start();
      try {
        for (let i = 0; i < 300 && stopped === undefined; i++) await new Promise((resolve) => setTimeout(resolve, 20));
        assert.ok(stopped !== undefined, 'the worker was told to stop after its second page');
      } finally {
        await (stopped ?? first.stop());
      }
      const held = await v.restockRow();
      assert.deepEqual([held.status, held.batches, held.planned, held.lease_owner, held.lease_until], ['dispatching', 1, 8, null, null], 'two pages planned, then the restock let go');

      const second = workerWith(transport, new DispatchRepository(t.database));
      try {
        await second.runUntilIdle();
      } finally {
        await second.stop();
      }
      const rows = await v.ledger();
      assert.deepEqual(rows.map((row) => row.subscription_id), expectedOrder(await v.subscriptions()), 'own first, then third parties, each in signup order');
      assert.ok(
        rows.every((row) => row.status === 'sent'),
        `every alert sent (${JSON.stringify(rows.map((row) => row.status))})`,
      );
      assert.equal(transport.given.length, 18, 'one mail per subscriber');
      assert.equal(new Set(transport.given.map((message) => message.to)).size, 18, 'no subscriber mailed twice');
      const restock = await v.restockRow();
      assert.deepEqual([restock.status, restock.planned], ['done', 18], 'the restock is done with all 18 planned');
    });
  });
}
