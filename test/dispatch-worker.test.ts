/**
 * The dispatch worker's loop and its stop, with the worker built here from the app's parts so a
 * test can hold its transport or see inside a turn: a wake-up that comes during a turn is not
 * lost, and a stopping worker gives back the allowance and leases of alerts it never sent.
 */
import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from './fixtures/suites.ts';
import { dialectSkip, startTestApp, testDialects, type TestApp } from './fixtures/app.ts';
import { call, expectStatus, storeWithAgent, uniqueEmail, type StoreAgent } from './fixtures/agents.ts';
import { failOnLeakedHandles } from './fixtures/leaks.ts';
import { eventually } from './fixtures/network.ts';
import type { MailMessage, MailTransport } from '../src/core/mail/transport.ts';
import { NotificationSenders } from '../src/dispatch/senders.ts';
import { DispatchRepository, type ClaimedNotification } from '../src/dispatch/repository.ts';
import { DispatchWorker } from '../src/dispatch/worker.ts';
import { mailWindow } from '../src/dispatch/sender.ts';

failOnLeakedHandles();

const SUBSCRIBE = '/api/v1/alerts/subscribe';
const HOUR_MS = 3600_000;
let serial = 0;

/** A mail server stand-in: records what it is given, and can hold every send until let go. */
class HeldTransport implements MailTransport {
  readonly kind = 'smtp' as const;
  readonly given: MailMessage[] = [];
  private gate: Promise<void> | undefined;
  private open: (() => void) | undefined;

  hold(): void {
    this.gate = new Promise((resolve) => (this.open = resolve));
  }

  release(): void {
    this.open?.();
    this.gate = undefined;
  }

  /** Sends answered (accepted) so far. */
  answered = 0;

  async send(message: MailMessage): Promise<void> {
    this.given.push(message);
    await this.gate;
    this.answered++;
  }

  async close(): Promise<void> {}
}

/** The ledger store, with a hook run once inside the next claim of alerts: in the middle of a turn. */
class ClaimHookRepository extends DispatchRepository {
  duringNextClaim: (() => Promise<unknown>) | undefined;

  override async claimNotifications(owner: string, now: string, leaseUntil: string, limit: number): Promise<ClaimedNotification[]> {
    const claimed = await super.claimNotifications(owner, now, leaseUntil, limit);
    const hook = this.duringNextClaim;
    this.duringNextClaim = undefined;
    await hook?.();
    return claimed;
  }
}

/** Resolves when `stopping` does; fails when it has not within `ms` (a stop that hangs). */
async function stopsWithin(stopping: Promise<void>, ms = 15_000): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const hung = new Promise<string>((resolve) => (timer = setTimeout(() => resolve('still running'), ms)));
  try {
    assert.equal(await Promise.race([stopping.then(() => 'stopped'), hung]), 'stopped', `stop() returns within ${ms} ms`);
  } finally {
    clearTimeout(timer);
  }
}

for (const dialect of testDialects()) {
  describe(`the dispatch worker's loop on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    // Each test has an app of its own: work one test leaves queued must not become another's.
    let t: TestApp;
    beforeEach(async () => {
      t = await startTestApp(dialect, { FREQUENCY_CAP_MINUTES: '0', BATCH_MULTIPLIER: '1', BATCH_INTERVAL_SECONDS: '0', DISPATCH_CLAIM_SIZE: '500' });
    });
    afterEach(() => t.close());

    /** A worker over the app's services, sending through `transport`. */
    function workerWith(transport: MailTransport, options: { store?: DispatchRepository; pollMs?: number } = {}): DispatchWorker {
      const { billing, dispatch, alerts, inventory, stores, conversions, events } = t.app.restock;
      return new DispatchWorker({
        quota: billing,
        followUp: conversions,
        events,
        store: options.store ?? new DispatchRepository(t.database),
        dispatch,
        alerts,
        inventory,
        stores,
        senders: new NotificationSenders(transport, 'Restock <alerts@restock.test>', 1, t.config.tenantOutbound),
        config: { ...t.config.dispatch, ...(options.pollMs === undefined ? {} : { pollMs: options.pollMs }) },
        log: t.app.log,
        jobs: [],
      });
    }

    /** A store with `count` shoppers waiting for one variant, and a way to report it back in stock. */
    async function waiting(count: number) {
      const store: StoreAgent = await storeWithAgent(t.app, t.database, 'loop');
      const ids = { productId: `gid://shopify/Product/${9_500_000 + ++serial}`, variantId: `gid://shopify/ProductVariant/${9_600_000 + serial}` };
      for (let i = 0; i < count; i++) {
        expectStatus(await call(t.app, 'POST', SUBSCRIBE, { token: store.token, body: { ...ids, email: uniqueEmail(`loop${i}`), shop: store.domain } }), 200);
      }
      const restock = async () =>
        expectStatus(
          await call(t.app, 'POST', `/api/v1/stores/${store.domain}/inventory`, { token: store.token, body: { items: [{ ...ids, available: count, productTitle: `Loop widget ${serial}` }] } }),
          200,
        );
      return { store, restock };
    }

    const ledger = (domain: string) => t.database.db.selectFrom('notifications').selectAll().where('store_domain', '=', domain).orderBy('position').execute();
    const allowanceUsed = async (domain: string) => (await t.app.restock.billing.planUsage(domain)).used;

    it('a wake-up during a turn is kept: work queued then goes out without waiting for the poll interval', async () => {
      const w = await waiting(1);
      const transport = new HeldTransport();
      const store = new ClaimHookRepository(t.database);
      let reportedDuringTurn = false;
      // The restock arrives after this turn has looked for restocks to plan, so only the wake-up
      // its report sends can bring the worker back before the hour-long poll interval is over.
      store.duringNextClaim = async () => {
        await w.restock();
        reportedDuringTurn = true;
      };
      const worker = workerWith(transport, { store, pollMs: HOUR_MS });
      worker.start();
      try {
        const sent = async () => (await ledger(w.store.domain)).map((row) => row.status).join() === 'sent';
        await eventually(sent, 'the alert of the restock reported during a turn is sent and recorded', 15_000);
        assert.ok(reportedDuringTurn, 'the restock was reported from inside the turn');
        assert.equal(transport.given.length, 1);
      } finally {
        await worker.stop();
      }
    });

    it('finding 14: a stopping worker gives back the allowance and the leases of alerts it never handed to the transport', async () => {
      // More than the mails the worker keeps outstanding: the rest wait, composed and counted.
      const window = mailWindow(t.config.dispatch.smtpPoolSize);
      const N = 60;
      assert.ok(N > window);
      const w = await waiting(N);
      await w.restock();
      const transport = new HeldTransport();
      transport.hold();
      const first = workerWith(transport);
      first.start();
      let stopped: Promise<void> | undefined;
      try {
        await eventually(async () => transport.given.length === window, `the transport holds ${window} alerts in flight`, 15_000);
        assert.equal(await allowanceUsed(w.store.domain), N, 'the whole claim was counted against the allowance');
        stopped = first.stop();
      } finally {
        transport.release();
        await stopsWithin(stopped ?? first.stop());
      }
      assert.equal(transport.given.length, window, 'nothing more was handed over once stopping');
      assert.equal(await allowanceUsed(w.store.domain), window, 'only the alerts handed to the transport stay counted');

      const rows = await ledger(w.store.domain);
      const sent = rows.filter((row) => row.status === 'sent');
      const back = rows.filter((row) => row.status !== 'sent');
      assert.equal(sent.length, window);
      assert.deepEqual(
        back.map((row) => [row.status, row.lease_owner, row.attempts, row.held_by_plan]),
        back.map(() => ['queued', null, 0, 0]),
        'the others are queued again as before the claim: no lease, no attempt counted, not held',
      );

      // Another worker takes them at once (no lease to wait out) and counts each once.
      const second = new HeldTransport();
      const next = workerWith(second);
      try {
        await next.runUntilIdle();
      } finally {
        await next.stop();
      }
      assert.equal(second.given.length, N - window);
      assert.deepEqual(new Set(second.given.map((m) => m.to)), new Set(back.map((row) => row.email)));
      const after = await ledger(w.store.domain);
      assert.ok(after.every((row) => row.status === 'sent' && row.attempts === 1), 'every alert sent once, on its first attempt');
      assert.equal(await allowanceUsed(w.store.domain), N, 'each alert counted once against the allowance');
    });

    it('a worker stopped while it claims more, with alerts still to hand over, stops once those in flight are answered', async () => {
      const window = mailWindow(t.config.dispatch.smtpPoolSize);
      const N = 60;
      assert.ok(N > window);
      const w = await waiting(N);
      await w.restock();
      const transport = new HeldTransport();
      transport.hold();
      const store = new ClaimHookRepository(t.database);
      const worker = workerWith(transport, { store });
      let stopped: Promise<void> | undefined;
      // The first claim takes all 60; during the next, the worker is told to stop and every send
      // in flight is answered, so none of them is left to wake the worker once the claim returns.
      store.duringNextClaim = async () => {
        store.duringNextClaim = async () => {
          stopped = worker.stop();
          transport.release();
          await eventually(async () => transport.answered === window, `the ${window} alerts in flight are answered`);
        };
      };
      worker.start();
      await eventually(async () => stopped !== undefined, 'the worker is told to stop during its second claim', 15_000);
      await stopsWithin(stopped!);
      const rows = await ledger(w.store.domain);
      const count = (status: string) => rows.filter((row) => row.status === status && row.lease_owner === null).length;
      assert.deepEqual([count('sent'), count('queued')], [window, N - window], 'the answered recorded, the others queued again, no lease left');
      assert.equal(await allowanceUsed(w.store.domain), window);
    });
  });
}
