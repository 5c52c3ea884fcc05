import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from './fixtures/suites.ts';
import { buildAlerts } from '../src/alerts/feature.ts';
import type { SubscriptionService } from '../src/alerts/service.ts';
import type { Config } from '../src/config.ts';
import { Database } from '../src/core/db/database.ts';
import { eventId, type EventSink, type StoreEvent } from '../src/core/events.ts';
import { openMailTransport, type MailMessage, type MailTransport } from '../src/core/mail/transport.ts';
import { TokenSigner } from '../src/core/signed-token.ts';
import pino from 'pino';
import { buildNotices, type DigestFigures, type NoticeService, type NoticesDeps } from '../src/notices/feature.ts';
import { storeService } from '../src/stores/feature.ts';
import { STORE_DOMAINS } from '../src/platforms.ts';
import type { StoreService } from '../src/stores/service.ts';
import { createTestDatabase, dialectSkip, testConfig, testDialects, type TestDatabase } from './fixtures/app.ts';
import { failOnLeakedHandles } from './fixtures/leaks.ts';
import { startSmtpSink, type SinkMessage, type SmtpSink } from './fixtures/smtp-sink.ts';
import { LocalChangeBus } from '../src/core/changes/bus.ts';

failOnLeakedHandles();

const DAY_MS = 24 * 3600 * 1000;
const product = (n: number) => `gid://shopify/Product/${n}`;
const variant = (n: number) => `gid://shopify/ProductVariant/${n}`;

/** The outgoing webhooks' place, recorded: their delivery is tested with the webhooks. */
class RecordingSink implements EventSink {
  readonly events: StoreEvent[] = [];
  async announce(...events: StoreEvent[]): Promise<void> {
    this.events.push(...events);
  }
  of(storeDomain: string): StoreEvent[] {
    return this.events.filter((event) => event.storeDomain === storeDomain);
  }
}

/** A transport that refuses the next `failures` mails, as a mail server that is down would. */
class FlakyTransport implements MailTransport {
  readonly kind = 'smtp' as const;
  failures = 0;
  constructor(private readonly inner: MailTransport) {}
  async send(message: MailMessage): Promise<void> {
    if (this.failures > 0) {
      this.failures--;
      throw new Error('mail server unavailable');
    }
    await this.inner.send(message);
  }
  async close(): Promise<void> {}
}

for (const dialect of testDialects()) {
  describe(`owner notices on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    let testDatabase: TestDatabase;
    let database: Database;
    let config: Config;
    let sink: SmtpSink;
    let smtp: MailTransport;
    let mail: FlakyTransport;
    let stores: StoreService;
    let alerts: SubscriptionService;
    let events: RecordingSink;
    let notices: NoticeService;
    const figureCalls: Array<{ storeDomain: string; from: string; to: string }> = [];
    const titles = new Map<string, string>();

    const figures = async (storeDomain: string, from: string, to: string): Promise<DigestFigures> => {
      figureCalls.push({ storeDomain, from, to });
      return { signups: 12, sent: 9, clicks: 4, orders: 2, revenue: [{ minor: 1999, currency: 'EUR' }, { minor: 1500, currency: 'JPY' }] };
    };

    const build = (overrides: Partial<NoticesDeps> = {}) =>
      buildNotices({
        config,
        database,
        mail,
        stores,
        alerts,
        events,
        figures,
        titles: async (_store, productId) => {
          const productTitle = titles.get(productId);
          return productTitle === undefined ? undefined : { productTitle, variantTitle: null };
        },
        ...overrides,
      });

    before(async () => {
      testDatabase = await createTestDatabase(dialect);
      config = testConfig(testDatabase.url);
      database = Database.open(config.database);
      sink = await startSmtpSink();
      smtp = openMailTransport({ smtpUrl: sink.url, from: 'Restock <alerts@restock.test>', database });
      mail = new FlakyTransport(smtp);
      stores = storeService(config, database, new LocalChangeBus(), STORE_DOMAINS);
      alerts = buildAlerts({
        config,
        database,
        signer: new TokenSigner(randomBytes(32)),
        events: new RecordingSink(),
        settingsOf: (shop) => stores.settingsOf(shop),
        requireStorePlatform: (shop, ids) => stores.requireStorePlatform(shop, ids),
      }).service;
      events = new RecordingSink();
      notices = build().service;
    });
    after(async () => {
      await smtp.close();
      await sink.close();
      await database.close();
      await testDatabase.drop();
    });

    let storeCount = 0;
    /** A store of its own for each test, with these settings. */
    async function newStore(settings: Record<string, unknown>): Promise<{ domain: string; owner: string }> {
      const domain = `notices-${++storeCount}-${randomBytes(3).toString('hex')}.myshopify.com`;
      const owner = `owner-${storeCount}@merchant.test`;
      await stores.createStore(domain, owner);
      await stores.updateSettings(domain, settings);
      return { domain, owner };
    }

    let shopperCount = 0;
    /** A new shopper waiting; resolves to the subscription's id. */
    async function waitFor(domain: string, productId: string, variantId: string | null = null): Promise<string> {
      const row = await alerts.subscribeShopper({ shop: domain, productId, variantId, email: `shopper-${++shopperCount}@example.com` });
      return row.id;
    }

    const mailTo = (owner: string): SinkMessage[] => sink.messages.filter((m) => m.recipients.includes(owner));
    /** Moments a test steps through, a minute apart, from a fixed start. */
    const clock = (start = Date.parse('2030-03-04T09:00:00.000Z')) => {
      let at = start;
      return () => new Date((at += 60_000));
    };

    it('tells the owner once when a waitlist reaches the threshold: not at two, once at three, not again at four', async () => {
      const { domain, owner } = await newStore({ waitlistThreshold: 3 });
      const tick = clock();
      await waitFor(domain, product(1));
      await waitFor(domain, product(1));
      assert.equal(await notices.checkWaitlists(domain, tick()), 0);
      assert.equal(mailTo(owner).length, 0);
      assert.equal(events.of(domain).length, 0);

      await waitFor(domain, product(1));
      const crossedAt = tick();
      assert.equal(await notices.checkWaitlists(domain, crossedAt), 1);
      const [notice] = mailTo(owner);
      assert.ok(notice);
      assert.match(notice.subject, /3 shoppers are waiting for gid:\/\/shopify\/Product\/1/);
      assert.match(notice.text, /threshold of 3 was reached/);
      assert.ok(notice.text.includes('http://restock.test/dashboard'), notice.text);
      assert.ok(notice.html?.includes('href="http://restock.test/dashboard"'));
      assert.deepEqual(events.of(domain), [
        {
          storeDomain: domain,
          type: 'waitlist.threshold',
          id: eventId('waitlist.threshold', domain, product(1), '', crossedAt.toISOString()),
          occurredAt: crossedAt.toISOString(),
          data: { productId: product(1), variantId: null, waiting: 3, threshold: 3 },
        },
      ]);
      const outboxRow = await database.db.selectFrom('waitlist_crossings').selectAll().where('store_domain', '=', domain).executeTakeFirstOrThrow();
      assert.equal(outboxRow.noticed_at, crossedAt.toISOString());

      await waitFor(domain, product(1));
      assert.equal(await notices.checkWaitlists(domain, tick()), 0);
      assert.equal(await notices.checkWaitlists(domain, tick()), 0);
      assert.equal(mailTo(owner).length, 1);
      assert.equal(events.of(domain).length, 1);
    });

    it('a waitlist that falls below the threshold and reaches it again is a new crossing, told again', async () => {
      const { domain, owner } = await newStore({ waitlistThreshold: 3 });
      const tick = clock();
      const ids = [await waitFor(domain, product(2)), await waitFor(domain, product(2)), await waitFor(domain, product(2))];
      assert.equal(await notices.checkWaitlists(domain, tick()), 1);

      // One shopper leaves: two waiting, below the threshold, and the crossing ends.
      await alerts.unsubscribe(alerts.unsubscribeToken(ids[0]!));
      assert.equal(await notices.checkWaitlists(domain, tick()), 0);
      assert.equal(await database.db.selectFrom('waitlist_crossings').selectAll().where('store_domain', '=', domain).executeTakeFirst(), undefined);

      await waitFor(domain, product(2));
      const again = tick();
      assert.equal(await notices.checkWaitlists(domain, again), 1);
      assert.equal(mailTo(owner).length, 2);
      const told = events.of(domain);
      assert.equal(told.length, 2);
      assert.notEqual(told[0]!.id, told[1]!.id, 'each crossing is its own event');
      assert.equal(told[1]!.id, eventId('waitlist.threshold', domain, product(2), '', again.toISOString()));
    });

    it('tells nothing when the store set no threshold, or sets it off again', async () => {
      const { domain, owner } = await newStore({});
      for (let i = 0; i < 4; i++) await waitFor(domain, product(3));
      const tick = clock();
      assert.equal(await notices.checkWaitlists(domain, tick()), 0);

      const turnedOff = await newStore({ waitlistThreshold: 2 });
      await stores.updateSettings(turnedOff.domain, { waitlistThreshold: null });
      for (let i = 0; i < 3; i++) await waitFor(turnedOff.domain, product(3));
      assert.equal(await notices.checkWaitlists(turnedOff.domain, tick()), 0);
      assert.equal(mailTo(owner).length + mailTo(turnedOff.owner).length, 0);
      assert.equal(events.of(domain).length + events.of(turnedOff.domain).length, 0);
    });

    it('counts a variant and the whole product as separate waitlists', async () => {
      const { domain, owner } = await newStore({ waitlistThreshold: 3 });
      const tick = clock();
      for (let i = 0; i < 2; i++) await waitFor(domain, product(4));
      for (let i = 0; i < 2; i++) await waitFor(domain, product(4), variant(41));
      // Four wait for the product in some form, but neither waitlist holds three.
      assert.equal(await notices.checkWaitlists(domain, tick()), 0);

      await waitFor(domain, product(4), variant(41));
      assert.equal(await notices.checkWaitlists(domain, tick()), 1);
      assert.deepEqual(events.of(domain).map((event) => event.data), [{ productId: product(4), variantId: variant(41), waiting: 3, threshold: 3 }]);
      assert.equal(events.of(domain)[0]!.id, eventId('waitlist.threshold', domain, product(4), variant(41), events.of(domain)[0]!.occurredAt));

      await waitFor(domain, product(4));
      assert.equal(await notices.checkWaitlists(domain, tick()), 1);
      assert.deepEqual(events.of(domain)[1]!.data, { productId: product(4), variantId: null, waiting: 3, threshold: 3 });
      assert.equal(mailTo(owner).length, 2);
    });

    it('a notice that could not be mailed is retried on the next look, with the same event id', async () => {
      const { domain, owner } = await newStore({ waitlistThreshold: 2 });
      const tick = clock();
      await waitFor(domain, product(5));
      await waitFor(domain, product(5));
      mail.failures = 1;
      await assert.rejects(notices.checkWaitlists(domain, tick()), /mail server unavailable/);
      assert.equal(mailTo(owner).length, 0);

      assert.equal(await notices.checkWaitlists(domain, tick()), 1);
      assert.equal(mailTo(owner).length, 1);
      const ids = events.of(domain).map((event) => event.id);
      assert.equal(ids.length, 2, 'announced on each attempt');
      assert.equal(ids[0], ids[1], 'under one id, which the webhooks deliver once');
      assert.equal(await notices.checkWaitlists(domain, tick()), 0);
    });

    it('two workers looking at once tell the owner once', async () => {
      const { domain, owner } = await newStore({ waitlistThreshold: 2 });
      await waitFor(domain, product(8));
      await waitFor(domain, product(8));
      const now = clock()();
      const told = await Promise.all([build().service.checkWaitlists(domain, now), build().service.checkWaitlists(domain, now)]);
      assert.deepEqual(told.sort(), [0, 1]);
      assert.equal(mailTo(owner).length, 1);
      assert.equal(events.of(domain).length, 1);
    });

    it('reads the waitlists at or above a threshold page by page, the whole product before its variants', async () => {
      const { domain } = await newStore({});
      for (let i = 0; i < 2; i++) await waitFor(domain, product(9), variant(92));
      for (let i = 0; i < 2; i++) await waitFor(domain, product(9));
      await waitFor(domain, product(9), variant(91));
      for (let i = 0; i < 3; i++) await waitFor(domain, product(10), variant(101));
      const pages = [];
      let after: { productId: string; variantId: string | null } | null = null;
      for (;;) {
        const page: Awaited<ReturnType<SubscriptionService['waitingAtLeast']>> = await alerts.waitingAtLeast(domain, 2, after, 1);
        if (page.length === 0) break;
        pages.push(...page);
        after = page[0]!;
      }
      // Ids in text order ("Product/10" before "Product/9"), as both databases sort them.
      assert.deepEqual(pages, [
        { productId: product(10), variantId: variant(101), waiting: 3 },
        { productId: product(9), variantId: null, waiting: 2 },
        { productId: product(9), variantId: variant(92), waiting: 2 },
      ]);
    });

    it('escapes a product title in the HTML mail and keeps it as it is in the text', async () => {
      const title = '<script>alert("x")</script> Tee & "Co"';
      titles.set(product(6), title);
      const { domain, owner } = await newStore({ waitlistThreshold: 1 });
      await waitFor(domain, product(6));
      assert.equal(await notices.checkWaitlists(domain, clock()()), 1);
      const [notice] = mailTo(owner);
      assert.ok(notice?.html);
      assert.ok(!notice.html.includes('<script>'), notice.html);
      assert.ok(notice.html.includes('&#60;script&#62;alert(&#34;x&#34;)&#60;/script&#62; Tee &#38; &#34;Co&#34;'), notice.html);
      assert.ok(notice.text.includes(`${title} (any variant): 1 waiting`), notice.text);
      assert.equal(events.of(domain)[0]!.data.productTitle, title);
    });

    it('the job visits the stores with a threshold a page at a time, and starts a round at most every interval', async () => {
      const job = build({ timing: { storesPerRun: 2, waitlistEveryMs: 60_000 } }).service;
      const crossing = [await newStore({ waitlistThreshold: 1 }), await newStore({ waitlistThreshold: 1 }), await newStore({ waitlistThreshold: 1 })];
      for (const store of crossing) await waitFor(store.domain, product(7));
      const start = Date.parse('2030-05-01T00:00:00.000Z');
      let visited = 0;
      for (let run = 0, n; (n = await job.noticeWaitlists(new Date(start + run))) > 0; run++) {
        assert.ok(n <= 2, 'a page per run');
        visited += n;
      }
      assert.ok(visited >= 3);
      for (const store of crossing) assert.equal(mailTo(store.owner).length, 1, `${store.domain} told`);
      // Between rounds nothing is visited; the next round comes after the interval.
      assert.equal(await job.noticeWaitlists(new Date(start + 30_000)), 0);
      assert.ok((await job.noticeWaitlists(new Date(start + 61_000))) > 0);
    });

    it('sends the weekly digest once per week with the figures, and none when it is off', async () => {
      const { domain, owner } = await newStore({ weeklyDigest: true });
      const off = await newStore({ weeklyDigest: false });
      const start = new Date('2030-06-03T08:00:00.000Z');
      const at = (days: number) => new Date(start.getTime() + days * DAY_MS);

      assert.equal(await notices.sendDigest(domain, start), true);
      assert.deepEqual(figureCalls.at(-1), { storeDomain: domain, from: at(-7).toISOString(), to: start.toISOString() });
      const [digest] = mailTo(owner);
      assert.ok(digest);
      for (const line of ['Sign-ups: 12', 'Alerts sent: 9', 'Clicks: 4', 'Orders attributed: 2', 'Revenue won back: €19.99, ¥1,500']) {
        assert.ok(digest.text.includes(line), `${line} in ${digest.text}`);
      }
      assert.ok(digest.text.includes('http://restock.test/dashboard'));
      assert.ok(digest.html?.includes('€19.99'));

      assert.equal(await notices.sendDigest(domain, at(1)), false);
      assert.equal(await notices.sendDigest(domain, at(6.9)), false);
      assert.equal(mailTo(owner).length, 1);
      assert.equal(await notices.sendDigest(domain, at(7)), true);
      assert.deepEqual(figureCalls.at(-1), { storeDomain: domain, from: start.toISOString(), to: at(7).toISOString() });
      assert.equal(mailTo(owner).length, 2);

      const calls = figureCalls.length;
      assert.equal(await notices.sendDigest(off.domain, at(7)), false);
      assert.equal(figureCalls.length, calls, 'no figures asked for a store without the digest');
      assert.equal(mailTo(off.owner).length, 0);

      // The job finds the store with the digest on, and sends when due.
      const job = build().service;
      while ((await job.sendDigests(at(14))) > 0);
      assert.equal(mailTo(owner).length, 3);
      assert.equal(mailTo(off.owner).length, 0);
    });
  });
}
