/**
 * Fault tests for the dispatch worker, run as real `restock worker` processes against a real
 * SMTP server on loopback: a worker killed mid-batch, a mail server that goes away for a while,
 * two workers sharing one PostgreSQL ledger. What must hold: no alert is lost, the ledger ends
 * with one `sent` row per subscription, and a crash sends at most the leased window twice.
 */
import assert from 'node:assert/strict';
import { after, describe, it, type TestContext } from './fixtures/suites.ts';
import { dialectSkip, startTestApp, testDialects, type TestApp } from './fixtures/app.ts';
import { call, expectStatus, storeWithAgent, type StoreAgent } from './fixtures/agents.ts';
import { failOnLeakedHandles } from './fixtures/leaks.ts';
import { startAlertSink, startWorkerProcess, type AlertSink, type ReceivedAlert, type WorkerProcess } from './fixtures/worker-process.ts';
import { newId } from '../src/core/ids.ts';
import type { SubscriptionsTable } from '../src/core/db/schema.ts';

failOnLeakedHandles();

/** Shared by the in-test app and the worker processes, so both sign unsubscribe links alike. */
const SECRET = 'dispatch-fault-tests-secret-0123456789abcdef';
const APP_ENV = { FREQUENCY_CAP_MINUTES: '0', BATCH_MULTIPLIER: '1', BATCH_INTERVAL_SECONDS: '0', RESTOCK_SECRET: SECRET };
const SUBSCRIBE = '/api/v1/alerts/subscribe';

/** Every worker process this file starts; whatever a failed test left running is killed at the end. */
const workers = new Set<WorkerProcess>();
after(async () => {
  await Promise.all([...workers].map((worker) => worker.kill()));
});

let serial = 0;

function spawnWorker(t: TestApp, smtpUrl: string, env: Record<string, string> = {}): WorkerProcess {
  const worker = startWorkerProcess({
    DATABASE_URL: t.testDatabase.url,
    SMTP_URL: smtpUrl,
    BASE_URL: 'http://restock.test',
    RESTOCK_SECRET: SECRET,
    FREQUENCY_CAP_MINUTES: '0',
    BATCH_MULTIPLIER: '1',
    BATCH_INTERVAL_SECONDS: '0',
    DISPATCH_LEASE_SECONDS: '5',
    DISPATCH_POLL_MS: '50',
    RECONCILE_INTERVAL_MINUTES: '0',
    ...env,
  });
  workers.add(worker);
  void worker.exited.then(() => workers.delete(worker));
  return worker;
}

/** The sink URL with an EHLO name, so the sink can tell which worker sent what. */
const named = (sink: AlertSink, name: string) => `${sink.url}?name=${name}`;

interface Waiting {
  store: StoreAgent;
  productId: string;
  variantId: string;
  title: string;
  emails: string[];
  subscriptions: string[];
}

/**
 * A store with its bound agent and `count` shoppers waiting for one variant. The first signs up
 * through the API; the others are inserted with the very shape that row has (only id, address
 * and an earlier, strictly increasing signup time differ), which is far faster than thousands
 * of requests.
 */
async function waitingShoppers(t: TestApp, count: number): Promise<Waiting> {
  const store = await storeWithAgent(t.app, t.database, 'faults');
  expectStatus(
    await call(t.app, 'PATCH', `/api/v1/stores/${store.domain}`, {
      token: store.token,
      body: { batchMultiplier: 1, batchIntervalSeconds: 0, frequencyCapMinutes: 0 },
    }),
    200,
  );
  const n = ++serial;
  const productId = `gid://shopify/Product/${9_100_000 + n}`;
  const variantId = `gid://shopify/ProductVariant/${9_200_000 + n}`;
  const title = `Fault widget ${n}`;
  const firstEmail = `fault-${n}-0@example.com`;
  const first = expectStatus(await call(t.app, 'POST', SUBSCRIBE, { token: store.token, body: { productId, variantId, email: firstEmail, shop: store.domain } }), 200);
  const template = await t.database.db.selectFrom('subscriptions').selectAll().where('id', '=', first.subscriptionId).executeTakeFirstOrThrow();
  assert.equal(template.status, 'active');
  assert.equal(template.store_domain, store.domain);

  const base = Date.parse(template.created_at) - count * 1000;
  const rows: SubscriptionsTable[] = [];
  for (let i = 1; i < count; i++) {
    const at = new Date(base + i * 1000).toISOString();
    rows.push({ ...template, id: newId('sub'), email: `fault-${n}-${i}@example.com`, email_key: `fault-${n}-${i}@example.com`, created_at: at, updated_at: at });
  }
  for (let i = 0; i < rows.length; i += 500) {
    await t.database.write((trx) => trx.insertInto('subscriptions').values(rows.slice(i, i + 500)).execute());
  }
  return {
    store,
    productId,
    variantId,
    title,
    emails: [firstEmail, ...rows.map((r) => r.email)],
    subscriptions: [template.id, ...rows.map((r) => r.id)],
  };
}

/** The restock, through the inventory API as a platform would report it. */
async function reportRestock(t: TestApp, w: Waiting, available: number): Promise<string> {
  const res = expectStatus(
    await call(t.app, 'POST', `/api/v1/stores/${w.store.domain}/inventory`, {
      token: w.store.token,
      body: { items: [{ productId: w.productId, variantId: w.variantId, available, productTitle: w.title }] },
    }),
    200,
  );
  assert.ok(res.items[0].restockId, 'the report starts a restock');
  return res.items[0].restockId;
}

async function ledgerCounts(t: TestApp, storeDomain: string): Promise<Record<string, number>> {
  const rows = await t.database.db
    .selectFrom('notifications')
    .select(['status', (eb) => eb.fn.countAll<number>().as('n')])
    .where('store_domain', '=', storeDomain)
    .groupBy('status')
    .execute();
  return Object.fromEntries(rows.map((r) => [r.status, Number(r.n)]));
}

async function activeCount(t: TestApp, storeDomain: string): Promise<number> {
  const row = await t.database.db
    .selectFrom('subscriptions')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('store_domain', '=', storeDomain)
    .where('status', '=', 'active')
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

/**
 * Polls `probe` (the database has no events to wait on) until it returns something other than
 * undefined. Fails after `timeoutMs` with `what` and `state()`, and as soon as a worker that
 * should be running has exited.
 */
async function waitFor<T>(
  what: string,
  probe: () => Promise<T | undefined>,
  running: WorkerProcess[],
  timeoutMs: number,
  state: () => string = () => '',
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    const dead = running.find((worker) => worker.child.exitCode !== null || worker.child.signalCode !== null);
    if (dead) assert.fail(`a worker exited early (${dead.child.exitCode ?? dead.child.signalCode}):\n${dead.output()}`);
    if (Date.now() > deadline) assert.fail(`not the case within ${timeoutMs} ms: ${what}; ${state()}\n${running.map((r) => r.output()).join('\n')}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/**
 * Waits until every subscription is notified, nothing is queued or leased, and the worker has
 * closed the restock (see waitFor). The restock is closed by the worker's next planning pass after
 * its last alert is recorded, so a test that stopped the worker on the alerts alone could stop it
 * in between and find the restock still dispatching.
 */
async function waitUntilAllNotified(t: TestApp, w: Waiting, running: WorkerProcess[], timeoutMs: number): Promise<void> {
  let counts: Record<string, number> = {};
  let active = 0;
  let restock: string | undefined;
  await waitFor(
    'every subscription notified, nothing queued or leased, the restock done',
    async () => {
      counts = await ledgerCounts(t, w.store.domain);
      active = await activeCount(t, w.store.domain);
      restock = (await t.database.db.selectFrom('restocks').select('status').where('store_domain', '=', w.store.domain).executeTakeFirst())?.status;
      return (active === 0 && !counts.queued && !counts.sending && restock === 'done') || undefined;
    },
    running,
    timeoutMs,
    () => `${active} still active, ledger ${JSON.stringify(counts)}, restock ${restock}`,
  );
}

/** Alerts queued for another try after a failure, counting only those tried at least `attempts` times. */
async function waitingForRetry(t: TestApp, storeDomain: string, attempts: number): Promise<number> {
  const row = await t.database.db
    .selectFrom('notifications')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('store_domain', '=', storeDomain)
    .where('status', '=', 'queued')
    .where('outcome', 'like', 'will retry%')
    .where('attempts', '>=', attempts)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

/** When the leases of the alerts being sent run out (ms since the epoch), one per leased alert. */
async function leaseEnds(t: TestApp, storeDomain: string): Promise<number[]> {
  const rows = await t.database.db
    .selectFrom('notifications')
    .select('lease_until')
    .where('store_domain', '=', storeDomain)
    .where('status', '=', 'sending')
    .execute();
  return rows.map((r) => Date.parse(r.lease_until!));
}

/**
 * The end state that must hold whatever happened on the way: one `sent` ledger row per
 * subscription, every subscription notified, every shopper mailed at least once, each mail
 * naming a ledger row of its recipient. Returns how many mails each ledger row got.
 */
async function assertDeliveredToAll(t: TestApp, w: Waiting, mails: ReceivedAlert[]): Promise<Map<string, number>> {
  const rows = await t.database.db.selectFrom('notifications').selectAll().where('store_domain', '=', w.store.domain).execute();
  assert.equal(rows.length, w.subscriptions.length, 'one ledger row per subscription');
  assert.deepEqual(new Set(rows.map((r) => r.subscription_id)), new Set(w.subscriptions), 'the rows are those of the subscriptions, none twice');
  const unsettled = rows.filter((r) => r.status !== 'sent' || r.sent_at === null || r.lease_owner !== null);
  assert.deepEqual(unsettled.map((r) => `${r.email} ${r.status} ${r.outcome}`), [], 'every row sent, its lease released');

  const statuses = await t.database.db.selectFrom('subscriptions').select('status').where('store_domain', '=', w.store.domain).execute();
  assert.equal(statuses.length, w.subscriptions.length);
  assert.ok(statuses.every((s) => s.status === 'notified'), 'every subscription notified');

  const rowById = new Map(rows.map((r) => [r.id, r]));
  const perRow = new Map<string, number>();
  for (const mail of mails) {
    const row = mail.alertId ? rowById.get(mail.alertId) : undefined;
    assert.ok(row, `a mail that names no ledger row of this store: ${JSON.stringify(mail)}`);
    assert.equal(mail.recipient, row.email, 'the mail went to its row’s address');
    perRow.set(row.id, (perRow.get(row.id) ?? 0) + 1);
  }
  const missed = rows.filter((r) => !perRow.has(r.id)).map((r) => r.email);
  assert.deepEqual(missed, [], 'no shopper left without the alert');
  const [restock] = await t.database.db.selectFrom('restocks').selectAll().where('store_domain', '=', w.store.domain).execute();
  assert.equal(restock!.status, 'done');
  assert.equal(restock!.planned, w.subscriptions.length);
  return perRow;
}

function report(ctx: TestContext, line: string): void {
  ctx.diagnostic(line);
  console.log(`# ${line}`);
}

for (const dialect of testDialects()) {
  describe(`dispatch faults on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    it('a worker killed with SIGKILL mid-batch loses no alert; the restarted one resends at most the leased window', async (ctx) => {
      const N = 1500;
      const CLAIM = 200;
      const t = await startTestApp(dialect, APP_ENV);
      // A relay taking ~4 ms per message per connection: the batch lasts long enough to die in.
      const sink = await startAlertSink({ delayMs: 4 });
      try {
        const w = await waitingShoppers(t, N);
        await reportRestock(t, w, N);
        const env = { DISPATCH_CLAIM_SIZE: String(CLAIM), DISPATCH_POLL_MS: '100', SMTP_POOL_SIZE: '20' };

        const first = spawnWorker(t, named(sink, 'first.worker.test'), env);
        await sink.waitForCount(Math.floor(N / 3), 30_000);
        await first.kill();
        const receivedAtKill = sink.received.length;
        const leasedAtKill = await t.database.db
          .selectFrom('notifications')
          .select(['id', 'lease_owner'])
          .where('store_domain', '=', w.store.domain)
          .where('status', '=', 'sending')
          .execute();
        const atKill = await ledgerCounts(t, w.store.domain);
        assert.ok(receivedAtKill < N, `killed mid-batch (${receivedAtKill} of ${N} out)`);
        // Usually it dies holding leases; on a loaded machine it may die between two claims, holding
        // none. Either way no more than the claim may be resent, which is what is checked below.
        assert.ok(leasedAtKill.length <= CLAIM, `the dead worker held ${leasedAtKill.length} leases, at most the claim size`);
        assert.ok((atKill.queued ?? 0) > 0, 'alerts were still queued when it died');

        // A message wholly received before the kill may still be acknowledged after it (the
        // sink's delay): counted once the dead worker's connections are gone and nothing is pending.
        await sink.quiet(30_000);
        const fromFirst = sink.received.length;
        const second = spawnWorker(t, named(sink, 'second.worker.test'), env);
        await waitUntilAllNotified(t, w, [second], 60_000);
        await second.stop();
        assert.equal(await second.exited, 0, `the worker stops cleanly on SIGTERM:\n${second.output()}`);

        const mails = sink.received;
        const perRow = await assertDeliveredToAll(t, w, mails);
        const duplicates = mails.length - N;
        const twice = [...perRow].filter(([, n]) => n > 1).map(([id]) => id);
        assert.ok([...perRow.values()].every((n) => n <= 2), 'no alert went out more than twice');
        assert.equal(twice.length, duplicates);
        assert.ok(duplicates <= CLAIM, `${duplicates} duplicates, more than the ${CLAIM} a crash may resend`);
        // Only alerts the dead worker held leased can go out twice: never one it had recorded as sent.
        const leased = new Set(leasedAtKill.map((r) => r.id));
        assert.deepEqual(twice.filter((id) => !leased.has(id)), [], 'every duplicate was leased by the killed worker');
        assert.equal(mails.filter((m) => m.client === 'first.worker.test').length, fromFirst, 'nothing came from the killed worker once it was dead');

        report(
          ctx,
          `${dialect}: SIGKILL after ${receivedAtKill}/${N} mails, ${leasedAtKill.length} leases held by the dead worker; ` +
            `the restarted worker delivered the rest; duplicates = ${duplicates} (bound ${CLAIM})`,
        );
      } finally {
        await Promise.all([...workers].map((worker) => worker.kill()));
        await sink.close();
        await t.close();
      }
    });

    it('an SMTP server down for a while: alerts are retried with backoff and each delivered exactly once when it is back', async (ctx) => {
      const N = 300;
      const t = await startTestApp(dialect, APP_ENV);
      let sink = await startAlertSink({ delayMs: 5 });
      const port = sink.port;
      const sinks = [sink];
      try {
        const w = await waitingShoppers(t, N);
        await reportRestock(t, w, N);
        const worker = spawnWorker(t, named(sink, 'worker.test'), {
          DISPATCH_CLAIM_SIZE: '100',
          DISPATCH_RETRY_BASE_MS: '50',
          DISPATCH_MAX_ATTEMPTS: '10',
          SMTP_POOL_SIZE: '10',
        });
        await sink.waitForCount(N / 3, 30_000);
        await sink.crash();
        const deliveredBefore = sink.received.length;
        assert.ok(deliveredBefore < N, 'the server went down mid-way');

        // While it is down the worker keeps at it: failures are queued for a retry, not dropped,
        // and retried with backoff. The server stays down until an alert has failed twice.
        await waitFor(
          'an alert tried twice while the server is down, queued for another try',
          async () => {
            assert.equal((await ledgerCounts(t, w.store.domain)).failed ?? 0, 0, 'nothing given up while the server is down');
            return (await waitingForRetry(t, w.store.domain, 2)) > 0 || undefined;
          },
          [worker],
          30_000,
        );
        const retrying = await waitingForRetry(t, w.store.domain, 1);

        sink = await startAlertSink({ port });
        sinks.push(sink);
        await waitUntilAllNotified(t, w, [worker], 30_000);
        await worker.stop();
        assert.equal(await worker.exited, 0, `the worker stops cleanly on SIGTERM:\n${worker.output()}`);

        const mails = sinks.flatMap((s) => s.received);
        const perRow = await assertDeliveredToAll(t, w, mails);
        assert.equal(mails.length, N, 'each alert delivered exactly once');
        assert.ok([...perRow.values()].every((n) => n === 1));
        const rows = await t.database.db.selectFrom('notifications').select(['id', 'attempts']).where('store_domain', '=', w.store.domain).execute();
        const retried = rows.filter((r) => r.attempts > 1).length;
        assert.ok(retried > 0, 'some alerts needed more than one attempt');
        const beforeOutage = new Set(sinks[0]!.received.map((m) => m.alertId));
        assert.ok(rows.filter((r) => beforeOutage.has(r.id)).every((r) => r.attempts === 1), 'an alert delivered before the outage was never tried again');
        report(
          ctx,
          `${dialect}: ${deliveredBefore}/${N} delivered before the outage, ${retrying} queued for retry while down, ` +
            `max attempts ${Math.max(...rows.map((r) => r.attempts))}; all ${N} delivered once`,
        );
      } finally {
        await Promise.all([...workers].map((worker) => worker.kill()));
        for (const s of sinks) await s.close();
        await t.close();
      }
    });
  });
}

/**
 * A relay that stalls for longer than the lease, with one worker that never dies. Alerts wait
 * in the SMTP pool's queue past their original lease; the worker renews the leases of what it
 * still holds, so neither it nor another worker retakes them and nothing is sent twice.
 */
describe(`a relay that stalls past the lease on ${testDialects()[0]}`, () => {
  it('one live worker sends no alert twice', async (ctx) => {
    const N = 200;
    const t = await startTestApp(testDialects()[0]!, APP_ENV);
    const sink = await startAlertSink();
    try {
      const w = await waitingShoppers(t, N);
      await reportRestock(t, w, N);
      sink.pause();
      const worker = spawnWorker(t, named(sink, 'worker.test'), { DISPATCH_CLAIM_SIZE: '100', SMTP_POOL_SIZE: '5' });
      // The worker leases its window; the first of its messages go to the stalled relay.
      const firstLeaseEnd = await waitFor(
        'the worker leased alerts',
        async () => {
          const ends = await leaseEnds(t, w.store.domain);
          return ends.length > 0 ? Math.max(...ends) : undefined;
        },
        [worker],
        30_000,
      );
      // The relay stays stalled until that lease has run out: unrenewed, its alerts would now be
      // free to take again. The worker must still hold every one of them, under a later lease.
      let ends: number[] = [];
      await waitFor(
        'the first lease has run out and the worker holds its alerts under renewed leases',
        async () => {
          ends = await leaseEnds(t, w.store.domain);
          return (Date.now() > firstLeaseEnd && ends.length > 0 && ends.every((end) => end > firstLeaseEnd)) || undefined;
        },
        [worker],
        30_000,
        () => `${ends.filter((end) => end > firstLeaseEnd).length} of ${ends.length} leases renewed past the first, which ran until ${new Date(firstLeaseEnd).toISOString()}`,
      );
      sink.resume();
      await waitUntilAllNotified(t, w, [worker], 30_000);
      await worker.stop();
      const mails = sink.received;
      await assertDeliveredToAll(t, w, mails);
      report(ctx, `${testDialects()[0]}: relay stalled past the 5 s lease: ${mails.length - N} alerts sent twice by a worker that never died`);
      assert.equal(mails.length, N, 'a live worker sends each alert once');
    } finally {
      await Promise.all([...workers].map((worker) => worker.kill()));
      await sink.close();
      await t.close();
    }
  });
});

if (testDialects().includes('postgres')) {
  describe('two dispatch workers on postgres', () => {
    it('share one restock without sending any alert twice', async (ctx) => {
      const N = 3000;
      const t = await startTestApp('postgres', APP_ENV);
      const sink = await startAlertSink();
      try {
        const w = await waitingShoppers(t, N);
        const env = { DISPATCH_CLAIM_SIZE: '200', SMTP_POOL_SIZE: '20', LOG_LEVEL: 'info' };
        const a = spawnWorker(t, named(sink, 'a.worker.test'), env);
        const b = spawnWorker(t, named(sink, 'b.worker.test'), env);
        // Both running before the restock, so either may plan it and both compete for its alerts.
        await Promise.all([a, b].map((x) => x.waitForLine(/Restock worker is running/, 30_000)));
        await reportRestock(t, w, N);
        await waitUntilAllNotified(t, w, [a, b], 60_000);
        await Promise.all([a.stop(), b.stop()]);

        const mails = sink.received;
        const perRow = await assertDeliveredToAll(t, w, mails);
        assert.equal(mails.length, N, 'no alert sent twice');
        assert.ok([...perRow.values()].every((n) => n === 1));
        assert.equal(new Set(mails.map((m) => m.recipient)).size, N, 'every recipient exactly one mail');
        const byA = mails.filter((m) => m.client === 'a.worker.test').length;
        const byB = mails.filter((m) => m.client === 'b.worker.test').length;
        assert.equal(byA + byB, N);
        assert.ok(byA > 0 && byB > 0, `both workers sent alerts (a: ${byA}, b: ${byB})`);
        report(ctx, `postgres: ${N} alerts by two workers (a: ${byA}, b: ${byB}, SMTP sessions: ${new Set(mails.map((m) => m.session)).size}); no duplicates`);
      } finally {
        await Promise.all([...workers].map((worker) => worker.kill()));
        await sink.close();
        await t.close();
      }
    });
  });
}
