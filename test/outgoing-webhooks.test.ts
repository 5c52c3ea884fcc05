// Longer than most files on purpose: the whole life of an outgoing webhook (registration, signing,
// retries, disabling, the outbound guard at every hop, tenancy) over both databases.
/**
 * Outgoing webhooks end to end: endpoints registered through the API, events announced through
 * the domain's sink, the worker's job delivering to real HTTP receivers on loopback. Each
 * receiver verifies every delivery it gets with the Standard Webhooks library, with svix's
 * `Webhook` and with the specification's HMAC (test/fixtures/webhook-receiver.ts); one that fails
 * any of them fails the test it arrived in. Loopback stands for the internet where the app's
 * allow-list says so (127.0.0.1/32 only); a second app runs with the strict policy production has.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { Webhook as SvixWebhook } from 'svix';
import type { StoreEvent } from '../src/core/events.ts';
import { LocalChangeBus } from '../src/core/changes/bus.ts';
import { WebhookRepository } from '../src/webhooks/repository.ts';
import { after, afterEach, before, describe, it } from './fixtures/suites.ts';
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
import { dialectSkip, startTestApp, testDialects, type TestApp } from './fixtures/app.ts';
import { failOnLeakedHandles } from './fixtures/leaks.ts';
import { startSmtpSink, type SmtpSink } from './fixtures/smtp-sink.ts';
import { endlessBody, neverAnswer, startWebhookReceiver, type ReceivedWebhook, type WebhookReceiver } from './fixtures/webhook-receiver.ts';

failOnLeakedHandles();

const ENCRYPTION_KEY = randomBytes(32).toString('base64');
const TIMEOUT_MS = 1000;
const SECOND = 1000;
const MINUTE = 60 * SECOND;

let serial = 0;

/** An event as a feature would announce it; ids are unique per test run. */
function event(storeDomain: string, overrides: Partial<StoreEvent> = {}): StoreEvent {
  return {
    storeDomain,
    type: 'alert.sent',
    id: `ntf_${Date.now().toString(36)}${++serial}`,
    occurredAt: new Date().toISOString(),
    data: { notificationId: `ntf_${serial}`, productId: 'gid://shopify/Product/1', email: 'shopper@example.com' },
    ...overrides,
  };
}

/** The body a receiver got, verified as a consumer would: throws unless the signature holds. */
function verified(secret: string, hit: ReceivedWebhook): unknown {
  return new Webhook(secret).verify(hit.body, hit.headers);
}

const hooks = (store: { domain: string }) => `/api/v1/stores/${store.domain}/webhooks`;

async function register(t: TestApp, store: StoreAgent, url: string, eventTypes?: string[]): Promise<{ endpointId: string; secret: string }> {
  return expectStatus(await call(t.app, 'POST', hooks(store), { token: store.token, body: { url, ...(eventTypes ? { eventTypes } : {}) } }), 201);
}

async function deliveries(t: TestApp, store: StoreAgent, endpointId: string) {
  return expectStatus(await call(t.app, 'GET', `${hooks(store)}/${endpointId}/deliveries`, { token: store.token }), 200).items as Array<{
    deliveryId: string;
    eventId: string;
    status: string;
    attempts: number;
    nextAttemptAt: string | null;
    lastError: string | null;
    log: Array<{ attempt: number; attemptedAt: string; statusCode: number | null; error: string | null; durationMs: number }>;
  }>;
}

async function endpoint(t: TestApp, store: StoreAgent, endpointId: string) {
  return expectStatus(await call(t.app, 'GET', `${hooks(store)}/${endpointId}`, { token: store.token }), 200);
}

/** The retry the ledger recorded comes due now: the test moves the queue's clock, not its own. */
async function makeDue(t: TestApp, deliveryId: string): Promise<void> {
  await t.database.db.updateTable('webhook_deliveries').set({ next_attempt_at: new Date(Date.now() - 1).toISOString() }).where('id', '=', deliveryId).execute();
}

/** The gap the delivery recorded between its last attempt and the next. */
function recordedDelay(delivery: { nextAttemptAt: string | null; log: Array<{ attemptedAt: string }> }): number {
  return Date.parse(delivery.nextAttemptAt!) - Date.parse(delivery.log.at(-1)!.attemptedAt);
}

function assertAround(actual: number, expected: number, what: string): void {
  assert.ok(actual >= expected * 0.9 - 1 && actual <= expected * 1.1 + 1, `${what}: ${actual} ms, expected ${expected} ms ±10%`);
}

for (const dialect of testDialects()) {
  describe(`outgoing webhooks on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    let t: TestApp;
    let sink: SmtpSink;
    let receiver: WebhookReceiver;

    before(async () => {
      sink = await startSmtpSink();
      receiver = await startWebhookReceiver({ verifySignatures: true });
      t = await startTestApp(dialect, {
        SMTP_URL: sink.url,
        RESTOCK_ENCRYPTION_KEY: ENCRYPTION_KEY,
        // Only the receiver's address stands for the internet; the rest of loopback stays internal.
        TENANT_OUTBOUND_ALLOW: '127.0.0.1/32',
        WEBHOOK_TIMEOUT_MS: String(TIMEOUT_MS),
        WEBHOOK_DISABLE_AFTER_FAILURES: '3',
        WEBHOOK_DISABLE_AFTER_HOURS: '24',
      });
    });
    after(async () => {
      await t.close();
      await receiver.close();
      await sink.close();
    });
    afterEach(() => assert.deepEqual(receiver.takeRefusals(), [], 'every delivery verifies'));

    /** Registers the receiver's `path`, whose deliveries must then verify with the secret handed out. */
    async function registerAt(store: StoreAgent, path: string, eventTypes?: string[]): Promise<{ endpointId: string; secret: string }> {
      const created = await register(t, store, receiver.url(path), eventTypes);
      receiver.expectSignedWith(path, created.secret);
      return created;
    }

    /** A store and an agent its owner claimed for it, the claim code read at the SMTP sink. */
    async function storeWithAgent(name: string): Promise<StoreAgent> {
      const domain = uniqueDomain(name);
      const owner = uniqueEmail(`${name}-owner`);
      await createStore(t.database, domain, owner);
      const agent = await registerAnonymousAgent(t.app);
      expectStatus(await requestCode(t.app, agent.claimToken, owner, domain), 200);
      const mail = await sink.waitFor((m) => m.recipients.includes(owner));
      const claimed = expectStatus(await submitCode(t.app, agent.claimToken, codeIn(mail.text)), 200);
      return { ...agent, token: claimed.credential, domain, owner };
    }

    it('delivers each event signed per Standard Webhooks, with a secret shown once and kept sealed', async () => {
      const store = await storeWithAgent('signed');
      const created = await registerAt(store, '/signed');
      assert.match(created.secret, /^whsec_[A-Za-z0-9+/]+=*$/);
      assert.ok(Buffer.from(created.secret.slice('whsec_'.length), 'base64').length >= 24, 'at least 24 random bytes');
      assert.equal((await endpoint(t, store, created.endpointId)).secret, undefined, 'never shown again');

      const announced = event(store.domain);
      await t.app.restock.events.announce(announced);
      await t.runWorker();

      const hit = await receiver.waitFor('/signed');
      assert.deepEqual(verified(created.secret, hit), { type: 'alert.sent', timestamp: announced.occurredAt, data: announced.data });
      assert.equal(hit.headers['webhook-id'], announced.id);
      assert.equal(hit.headers['content-type'], 'application/json');
      assert.throws(() => new Webhook(`whsec_${randomBytes(32).toString('base64')}`).verify(hit.body, hit.headers), 'another secret does not verify it');
      // svix takes the secret as handed out (whsec_ and base64) and reads the same payload.
      assert.deepEqual(new SvixWebhook(created.secret).verify(hit.body, hit.headers), verified(created.secret, hit));
      assert.equal(hit.refused, undefined);

      // The receiver's check is not vacuous: the same delivery with one signature byte changed is
      // refused by each of its three verifiers.
      const [version, signature] = hit.headers['webhook-signature']!.split(',');
      const bytes = Buffer.from(signature!, 'base64');
      bytes[0]! ^= 1;
      const forged = await fetch(receiver.url('/signed'), {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'webhook-id': hit.headers['webhook-id']!, 'webhook-timestamp': hit.headers['webhook-timestamp']!, 'webhook-signature': `${version},${bytes.toString('base64')}` },
        body: hit.body,
      });
      assert.equal(forged.status, 401);
      const [refusal, ...more] = receiver.takeRefusals();
      assert.deepEqual(more, []);
      assert.match(refusal!, /standardwebhooks: .*; svix: .*; the specification: no v1 signature/);
      const [delivery] = await deliveries(t, store, created.endpointId);
      assert.equal(delivery!.status, 'delivered');
      assert.deepEqual(delivery!.log.map(({ attempt, statusCode, error }) => ({ attempt, statusCode, error })), [{ attempt: 1, statusCode: 200, error: null }]);

      // The secret is nowhere in clear: not in the endpoint's row, not in any other table.
      for (const table of ['webhook_endpoints', 'webhook_deliveries', 'webhook_attempts', 'idempotency_keys'] as const) {
        const rows = await t.database.db.selectFrom(table).selectAll().execute();
        assert.ok(!JSON.stringify(rows).includes(created.secret.slice('whsec_'.length)), `${table} holds the secret in clear`);
      }
    });

    it('makes one delivery of an event announced twice, and none to an endpoint that does not take its type', async () => {
      const store = await storeWithAgent('twice');
      const all = await registerAt(store, '/twice');
      const ordersOnly = await registerAt(store, '/orders-only', ['order.attributed']);
      const announced = event(store.domain, { type: 'subscription.created' });
      await Promise.all([t.app.restock.events.announce(announced), t.app.restock.events.announce(announced)]);
      await t.app.restock.events.announce(announced);
      await t.runWorker();

      assert.equal((await deliveries(t, store, all.endpointId)).length, 1);
      assert.equal((await deliveries(t, store, ordersOnly.endpointId)).length, 0);
      assert.equal(receiver.received.filter((hit) => hit.headers['webhook-id'] === announced.id).length, 1);
      assert.equal(receiver.received.filter((hit) => hit.path === '/orders-only').length, 0);
    });

    it('an endpoint added, changed, disabled or deleted takes effect with the next event, though each process keeps the list between changes', async () => {
      const store = await storeWithAgent('kept');
      const countFor = async (endpointId: string) => (await deliveries(t, store, endpointId)).length;
      // The store has no endpoint yet: that is what its first event leaves in memory.
      await t.app.restock.events.announce(event(store.domain, { id: 'evt_kept_0' }));
      const created = await registerAt(store, '/kept');
      await t.app.restock.events.announce(event(store.domain, { id: 'evt_kept_1' }));
      assert.equal(await countFor(created.endpointId), 1, 'added: the next event is delivered to it');
      const path = `${hooks(store)}/${created.endpointId}`;
      expectStatus(await call(t.app, 'PATCH', path, { token: store.token, body: { eventTypes: ['order.attributed'] } }), 200);
      await t.app.restock.events.announce(event(store.domain, { id: 'evt_kept_2' }));
      assert.equal(await countFor(created.endpointId), 1, 'changed to other types: this one is not for it');
      expectStatus(await call(t.app, 'PATCH', path, { token: store.token, body: { eventTypes: ['alert.sent'] } }), 200);
      expectStatus(await call(t.app, 'PATCH', path, { token: store.token, body: { enabled: false } }), 200);
      await t.app.restock.events.announce(event(store.domain, { id: 'evt_kept_3' }));
      assert.equal(await countFor(created.endpointId), 1, 'disabled: none');
      expectStatus(await call(t.app, 'PATCH', path, { token: store.token, body: { enabled: true } }), 200);
      await t.app.restock.events.announce(event(store.domain, { id: 'evt_kept_4' }));
      assert.equal(await countFor(created.endpointId), 2, 'enabled again: delivered');
      assert.equal((await call(t.app, 'DELETE', path, { token: store.token })).statusCode, 204);
      await t.app.restock.events.announce(event(store.domain, { id: 'evt_kept_5' }));
      const left = await t.database.db.selectFrom('webhook_deliveries').select('id').where('store_domain', '=', store.domain).execute();
      assert.equal(left.length, 0, 'deleted: its deliveries went with it, and none was made');
      await t.runWorker();
    });

    it('retries a failing endpoint on the schedule, then disables it after the threshold and mails the owner', async () => {
      const store = await storeWithAgent('failing');
      receiver.answer('/failing', (_req, res) => res.writeHead(500).end('down'));
      const created = await registerAt(store, '/failing');
      await t.app.restock.events.announce(event(store.domain));
      await t.runWorker();

      // Standard Webhooks' schedule: 5 s, 5 min, 30 min, ... each with jitter; the worker waits for none of it.
      for (const [attempt, expected] of [[1, 5 * SECOND], [2, 5 * MINUTE], [3, 30 * MINUTE]] as const) {
        const [delivery] = await deliveries(t, store, created.endpointId);
        assert.equal(delivery!.status, 'pending');
        assert.equal(delivery!.attempts, attempt);
        assert.equal(delivery!.log.at(-1)!.statusCode, 500);
        assert.equal(delivery!.log.at(-1)!.error, 'answered 500');
        assertAround(recordedDelay(delivery!), expected, `the delay after attempt ${attempt}`);
        await t.runWorker();
        assert.equal((await deliveries(t, store, created.endpointId))[0]!.attempts, attempt, 'not retried before it is due');
        await makeDue(t, delivery!.deliveryId);
        await t.runWorker();
      }

      // Three failures in a row, but within minutes: an outage, not an abandoned endpoint.
      let state = await endpoint(t, store, created.endpointId);
      assert.equal(state.enabled, true);
      assert.equal(state.consecutiveFailures, 4);
      await t.database.db
        .updateTable('webhook_endpoints')
        .set({ failing_since: new Date(Date.now() - 25 * 3600_000).toISOString() })
        .where('id', '=', created.endpointId)
        .execute();
      const [pending] = await deliveries(t, store, created.endpointId);
      await makeDue(t, pending!.deliveryId);
      await t.runWorker();

      state = await endpoint(t, store, created.endpointId);
      assert.equal(state.enabled, false);
      assert.match(state.disabledReason, /^5 consecutive failed attempts since /);
      const [stopped] = await deliveries(t, store, created.endpointId);
      assert.equal(stopped!.status, 'cancelled', 'its pending delivery stops');
      assert.equal(stopped!.attempts, 5);
      const mail = await sink.waitFor((m) => m.recipients.includes(store.owner) && m.subject.includes('webhook endpoint was disabled'));
      assert.ok(mail.text.includes(created.endpointId) && mail.text.includes(receiver.url('/failing')), mail.text);

      // Nothing more is queued for it, and every attempt it did get was signed.
      await t.app.restock.events.announce(event(store.domain));
      assert.equal((await deliveries(t, store, created.endpointId)).length, 1);
      const hits = receiver.received.filter((hit) => hit.path === '/failing');
      assert.equal(hits.length, 5);
      for (const hit of hits) verified(created.secret, hit);
    });

    it('forgets past failures after a success, and when re-enabled', async () => {
      const store = await storeWithAgent('recovering');
      let failures = 2;
      receiver.answer('/recovering', (_req, res) => res.writeHead(failures-- > 0 ? 503 : 204).end());
      const created = await registerAt(store, '/recovering');
      await t.app.restock.events.announce(event(store.domain));
      await t.runWorker();
      await makeDue(t, (await deliveries(t, store, created.endpointId))[0]!.deliveryId);
      await t.runWorker();
      let state = await endpoint(t, store, created.endpointId);
      assert.equal(state.consecutiveFailures, 2);
      assert.ok(state.failingSince);

      await makeDue(t, (await deliveries(t, store, created.endpointId))[0]!.deliveryId);
      await t.runWorker();
      state = await endpoint(t, store, created.endpointId);
      assert.equal(state.consecutiveFailures, 0);
      assert.equal(state.failingSince, null);
      const [delivery] = await deliveries(t, store, created.endpointId);
      assert.equal(delivery!.status, 'delivered');
      assert.deepEqual(delivery!.log.map((entry) => entry.statusCode), [503, 503, 204]);

      // Disabled by the store, then enabled again: deliveries resume from a clean record.
      const path = `${hooks(store)}/${created.endpointId}`;
      assert.equal(expectStatus(await call(t.app, 'PATCH', path, { token: store.token, body: { enabled: false } }), 200).disabledReason, 'disabled by the store');
      await t.app.restock.events.announce(event(store.domain));
      assert.equal((await deliveries(t, store, created.endpointId)).length, 1, 'a disabled endpoint takes no events');
      const enabled = expectStatus(await call(t.app, 'PATCH', path, { token: store.token, body: { enabled: true } }), 200);
      assert.deepEqual([enabled.enabled, enabled.disabledReason, enabled.consecutiveFailures], [true, null, 0]);
    });

    it('disables an endpoint that answers 410 Gone at once', async () => {
      const store = await storeWithAgent('gone');
      receiver.answer('/gone', (_req, res) => res.writeHead(410).end());
      const created = await registerAt(store, '/gone');
      await t.app.restock.events.announce(event(store.domain));
      await t.runWorker();
      const state = await endpoint(t, store, created.endpointId);
      assert.equal(state.enabled, false);
      assert.equal(state.disabledReason, 'the endpoint answered 410 Gone');
      assert.equal((await deliveries(t, store, created.endpointId))[0]!.status, 'cancelled');
    });

    it('follows a redirect to an allowed address, and not one to an internal address, recording the attempt as failed', async () => {
      const internal = await startWebhookReceiver({ host: '127.0.0.2', verifySignatures: true });
      try {
        const store = await storeWithAgent('redirect');
        receiver.answer('/moved', (_req, res) => res.writeHead(307, { location: '/moved-here' }).end());
        const moved = await registerAt(store, '/moved');
        receiver.expectSignedWith('/moved-here', moved.secret);
        receiver.answer('/escape', (_req, res) => res.writeHead(302, { location: internal.url('/stolen') }).end());
        const escaping = await registerAt(store, '/escape');
        receiver.answer('/metadata', (_req, res) => res.writeHead(301, { location: 'http://169.254.169.254/latest/meta-data/' }).end());
        const metadata = await registerAt(store, '/metadata');
        await t.app.restock.events.announce(event(store.domain));
        await t.runWorker();

        verified(moved.secret, await receiver.waitFor('/moved-here'));
        assert.equal((await deliveries(t, store, moved.endpointId))[0]!.status, 'delivered');
        for (const [created, status] of [[escaping, 302], [metadata, 301]] as const) {
          const [delivery] = await deliveries(t, store, created.endpointId);
          assert.equal(delivery!.status, 'pending', 'a failed attempt, retried later');
          assert.equal(delivery!.log[0]!.statusCode, status);
          assert.match(delivery!.log[0]!.error!, /^redirected to a URL that must not be a loopback, private, link-local or otherwise internal address; not followed$/);
        }
        assert.equal(internal.received.length, 0, 'nothing reached the internal address');
        assert.deepEqual(internal.takeRefusals(), []);
      } finally {
        await internal.close();
      }
    });

    it('reads at most 64 KiB of an answer, and gives up on one that does not come in time', async () => {
      const store = await storeWithAgent('bounded');
      const sent = { bytes: 0, closed: false };
      receiver.answer('/endless', endlessBody(sent));
      const endless = await registerAt(store, '/endless');
      receiver.answer('/silent', neverAnswer);
      const silent = await registerAt(store, '/silent');
      await t.app.restock.events.announce(event(store.domain));
      await t.runWorker();

      const [capped] = await deliveries(t, store, endless.endpointId);
      assert.equal(capped!.status, 'delivered', `an endless 200 is read in part, not until the deadline: ${capped!.lastError}`);
      assert.ok(capped!.log[0]!.durationMs < TIMEOUT_MS);
      const [timedOut] = await deliveries(t, store, silent.endpointId);
      assert.equal(timedOut!.status, 'pending');
      assert.deepEqual([timedOut!.log[0]!.statusCode, timedOut!.log[0]!.error], [null, `no complete answer within ${TIMEOUT_MS} ms`]);
      assert.ok(timedOut!.log[0]!.durationMs >= TIMEOUT_MS - 5, `${timedOut!.log[0]!.durationMs} ms`);
      assert.equal(sent.closed, true, 'the endless answer was cut off');
    });

    it("keeps a store's endpoints from another store's agent, changing nothing", async () => {
      const a = await storeWithAgent('tenant-a');
      const b = await storeWithAgent('tenant-b');
      const created = await registerAt(b, '/tenant-b');
      await t.app.restock.events.announce(event(b.domain));
      const before = await t.tableDigests();
      const path = `${hooks(b)}/${created.endpointId}`;
      for (const [method, url, body] of [
        ['GET', hooks(b), undefined],
        ['POST', hooks(b), { url: receiver.url('/not-yours') }],
        ['GET', path, undefined],
        ['PATCH', path, { url: receiver.url('/not-yours') }],
        ['PATCH', path, { enabled: false }],
        ['DELETE', path, undefined],
        ['GET', `${path}/deliveries`, undefined],
        // A's own store path, naming B's endpoint.
        ['GET', `${hooks(a)}/${created.endpointId}`, undefined],
        ['DELETE', `${hooks(a)}/${created.endpointId}`, undefined],
      ] as const) {
        expectProblem(await call(t.app, method, url, { token: a.token, ...(body ? { body } : {}) }), 404, 'not-found');
      }
      assert.deepEqual(await t.tableDigests(), before);
      assert.equal(expectStatus(await call(t.app, 'GET', hooks(b), { token: b.token }), 200).items.length, 1);
    });

    it('holds at most 10 endpoints per store', async () => {
      const store = await storeWithAgent('crowded');
      for (let i = 0; i < 10; i++) await registerAt(store, `/crowded-${i}`);
      const before = await t.tableDigests();
      expectProblem(await call(t.app, 'POST', hooks(store), { token: store.token, body: { url: receiver.url('/crowded-10') } }), 409, 'conflict');
      assert.deepEqual(await t.tableDigests(), before);
      const [first] = expectStatus(await call(t.app, 'GET', hooks(store), { token: store.token }), 200).items;
      assert.equal((await call(t.app, 'DELETE', `${hooks(store)}/${first.endpointId}`, { token: store.token })).statusCode, 204);
      await registerAt(store, '/crowded-10');
    });

    it('keeps the delivery log bounded: finished deliveries past 30 days, or beyond the newest per endpoint, are dropped', async () => {
      const store = await storeWithAgent('pruned');
      const created = await registerAt(store, '/pruned');
      for (let i = 0; i < 4; i++) await t.app.restock.events.announce(event(store.domain));
      await t.runWorker();
      const ids = (await deliveries(t, store, created.endpointId)).map((delivery) => delivery.deliveryId);
      const old = ids.at(-1)!;
      await t.database.db.updateTable('webhook_deliveries').set({ created_at: new Date(Date.now() - 31 * 24 * 3600_000).toISOString() }).where('id', '=', old).execute();
      const repository = new WebhookRepository(t.database, new LocalChangeBus());
      await repository.prune({ before: new Date(Date.now() - 30 * 24 * 3600_000).toISOString(), keepPerEndpoint: 2, limit: 100 });
      const kept = (await deliveries(t, store, created.endpointId)).map((delivery) => delivery.deliveryId);
      assert.deepEqual(kept, ids.slice(0, 2));
      const orphans = await t.database.db.selectFrom('webhook_attempts').select('delivery_id').where('endpoint_id', '=', created.endpointId).execute();
      assert.deepEqual(orphans.map((row) => row.delivery_id).sort(), [...kept].sort(), 'their attempts went with them');
    });
  });

  describe(`outgoing webhooks under the strict outbound policy on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    let t: TestApp;
    let receiver: WebhookReceiver;
    before(async () => {
      receiver = await startWebhookReceiver({ verifySignatures: true });
      t = await startTestApp(dialect, { TENANT_OUTBOUND_ALLOW: '', RESTOCK_ENCRYPTION_KEY: ENCRYPTION_KEY, WEBHOOK_TIMEOUT_MS: String(TIMEOUT_MS) });
    });
    after(async () => {
      await t.close();
      await receiver.close();
    });
    afterEach(() => assert.deepEqual(receiver.takeRefusals(), [], 'nothing reaches the receiver unsigned'));

    it('refuses an internal, credentialed or non-HTTP URL at registration, storing nothing', async () => {
      const store = await storeWithOutboxAgent(t.app, t.database, 'strict');
      const refused = [
        'http://127.0.0.1/hook',
        `http://127.0.0.1:${receiver.port}/hook`,
        'http://10.0.0.1/',
        'http://169.254.169.254/latest/meta-data/',
        'http://localhost/',
        'http://hooks.localhost/',
        'http://metadata.google.internal/',
        'http://[::1]/',
        'http://[::ffff:127.0.0.1]/',
        'http://0x7f.1/',
        'http://2130706433/',
        'ftp://hooks.example.com/',
        'file:///etc/passwd',
        'https://user:secret@hooks.example.com/',
      ];
      const before = await t.tableDigests();
      for (const url of refused) {
        const problem = expectProblem(await call(t.app, 'POST', hooks(store), { token: store.token, body: { url } }), 400, 'forbidden-webhook-destination');
        assert.equal(problem.errors[0].pointer, '/body/url', url);
        assert.ok(!problem.detail.includes('secret'), 'the credentials are not repeated');
      }
      assert.deepEqual(await t.tableDigests(), before);

      const created = await register(t, store, 'https://hooks.example.com/restock?token=abc');
      const before2 = await t.tableDigests();
      expectProblem(await call(t.app, 'PATCH', `${hooks(store)}/${created.endpointId}`, { token: store.token, body: { url: 'http://192.168.1.1/' } }), 400, 'forbidden-webhook-destination');
      assert.deepEqual(await t.tableDigests(), before2);
    });

    it('refuses at delivery a name that resolves to loopback, and nothing reaches it', async () => {
      const store = await storeWithOutboxAgent(t.app, t.database, 'rebind');
      const created = await register(t, store, 'https://hooks.example.com/rebind');
      // As a row written before the check, or a name whose DNS answer changed since: `localhost` resolves to loopback.
      await t.database.db.updateTable('webhook_endpoints').set({ url: `http://localhost:${receiver.port}/rebind` }).where('id', '=', created.endpointId).execute();
      await t.app.restock.events.announce(event(store.domain));
      await t.runWorker();
      const [delivery] = await deliveries(t, store, created.endpointId);
      assert.equal(delivery!.status, 'pending');
      assert.deepEqual(
        [delivery!.log[0]!.statusCode, delivery!.log[0]!.error],
        [null, 'the host resolves to a loopback, private, link-local or otherwise internal address; not connected'],
      );
      assert.equal(receiver.received.length, 0, 'no request reached the loopback receiver');
    });
  });
}
