// Longer than most files on purpose: the whole push channel (keys on both databases, encryption checked by decryption, every answer a push service gives, the guard, the service worker and the parser) in one file.
/**
 * Web push: the VAPID key pair made once and kept (both databases), messages encrypted by the
 * `web-push` library and decrypted by the push service stand-in with the browser's own keys
 * (RFC 8291 done again with node:crypto), the push service's answers mapped to what dispatch
 * does next, endpoints a browser names held to https and the outbound guard, the service worker
 * on both paths, and the subscription parser the storefront uses.
 */
import assert from 'node:assert/strict';
import net from 'node:net';
import vm from 'node:vm';
import Fastify from 'fastify';
import { serializerCompiler, validatorCompiler } from 'fastify-type-provider-zod';
import webpush from 'web-push';
import { Database } from '../src/core/db/database.ts';
import { installErrorHandling } from '../src/core/http/errors.ts';
import { parseOutboundAllowList, STRICT_OUTBOUND, type OutboundPolicy } from '../src/core/net/outbound-guard.ts';
import { STOREFRONT_PROXIES } from '../src/platforms.ts';
import { PushDeliveryError, type PushMessage, type PushPayload } from '../src/push/channel.ts';
import { buildPush, loadServiceWorker } from '../src/push/feature.ts';
import { parsePushSubscription } from '../src/push/schemas.ts';
import { PushService } from '../src/push/service.ts';
import { loadVapidKeys } from '../src/push/vapid.ts';
import { createTestDatabase, dialectSkip, testConfig, testDialects, type TestDatabase } from './fixtures/app.ts';
import { failOnLeakedHandles } from './fixtures/leaks.ts';
import { startPushService, type BrowserSubscription, type PushServiceStandIn } from './fixtures/push-service.ts';
import { after, before, describe, it } from './fixtures/suites.ts';
import { startWebhookReceiver } from './fixtures/webhook-receiver.ts';

failOnLeakedHandles();

/** What the tests' app fixture allows: loopback on 127.0.0.1 stands for the internet. */
const TEST_POLICY = parseOutboundAllowList('127.0.0.1/32');
const PUSH_CONFIG = { subject: 'mailto:alerts@restock.test', ttlSeconds: 3600, timeoutMs: 2000 };

const PAYLOAD: PushPayload = {
  title: 'Back in stock: Wool socks — grey, 42–45',
  body: 'Größe 42–45 is available again at Sock Shop. 🧦',
  url: 'https://sock-shop.example/products/wool-socks?variant=7102&utm_source=restock',
  icon: 'https://cdn.example/socks.png',
  tag: 'alert-sub_123',
  stop: { url: 'https://restock.example/stop/tok.en', label: 'Benachrichtigungen in diesem Browser beenden' },
};

function newService(policy: OutboundPolicy = TEST_POLICY): PushService {
  return new PushService({ keys: webpush.generateVAPIDKeys(), config: PUSH_CONFIG, policy });
}

function message(subscription: Pick<BrowserSubscription, 'endpoint' | 'keys'>, payload: PushPayload = PAYLOAD): PushMessage {
  return { endpoint: subscription.endpoint, keys: subscription.keys, payload, ttlSeconds: 600 };
}

/** The error `send` rejects with, so each test can look at all of it. */
async function refusal(send: Promise<void>): Promise<PushDeliveryError> {
  try {
    await send;
  } catch (err) {
    assert.ok(err instanceof PushDeliveryError, `a PushDeliveryError, not ${String(err)}`);
    return err;
  }
  assert.fail('the send was expected to fail');
}

/** A TCP server that only counts who connects to it. */
async function connectionCounter(host: string): Promise<{ port: number; count: () => number; close: () => Promise<void> }> {
  let count = 0;
  const server = net.createServer((socket) => {
    count++;
    socket.destroy();
  });
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  return { port: (server.address() as net.AddressInfo).port, count: () => count, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

describe('sending a push message', () => {
  let standIn: PushServiceStandIn;
  before(async () => {
    standIn = await startPushService();
  });
  after(async () => standIn.close());

  it('encrypts the exact payload for the browser, which decrypts it with its own keys', async () => {
    const service = newService();
    const subscription = standIn.newSubscription(service.publicKey());
    await service.send(message(subscription));
    const received = standIn.messages.filter((m) => m.endpoint === subscription.endpoint);
    assert.equal(received.length, 1, 'one message reached the subscription');
    assert.deepEqual(JSON.parse(received[0]!.plaintext), PAYLOAD, 'the decrypted payload is the one sent, byte for byte in UTF-8');
    assert.equal(received[0]!.ttl, 600, 'the TTL is the message’s');
    assert.equal(received[0]!.subject, PUSH_CONFIG.subject, 'the VAPID sub is the configured contact');
    assert.deepEqual(standIn.undecryptable, [], 'nothing arrived that the browser could not decrypt');
    assert.equal(standIn.answers.at(-1)!.status, 201, 'the push service answered 201 Created');
  });

  it('takes 404 and 410 as the subscription gone for good', async () => {
    const service = newService();
    const subscription = standIn.newSubscription(service.publicKey());
    standIn.gone(subscription.endpoint);
    const gone = await refusal(service.send(message(subscription)));
    assert.deepEqual([gone.status, gone.gone, gone.permanent], [410, true, true], 'a 410 is gone and permanent');

    const unknown = await refusal(service.send(message({ ...subscription, endpoint: `${standIn.origin}/wpush/v2/never-issued` })));
    assert.deepEqual([unknown.status, unknown.gone, unknown.permanent], [404, true, true], 'a 404 is gone and permanent');
  });

  it('tries again later after 429 or a 5xx, and gets through once the push service recovers', async () => {
    const service = newService();
    const subscription = standIn.newSubscription(service.publicKey());
    for (const status of [429, 500, 503]) {
      standIn.failNext(status);
      const failed = await refusal(service.send(message(subscription)));
      assert.deepEqual([failed.status, failed.gone, failed.permanent], [status, false, false], `${status} is transient`);
    }
    await service.send(message(subscription));
    assert.equal(standIn.messages.filter((m) => m.endpoint === subscription.endpoint).length, 1, 'the retry was delivered');
  });

  it('takes a refusal of the message itself (too large, signed with another key) as permanent but not gone', async () => {
    const service = newService();
    const subscription = standIn.newSubscription(service.publicKey());
    const tooLarge = await refusal(service.send(message(subscription, { ...PAYLOAD, body: 'x'.repeat(4200) })));
    assert.deepEqual([tooLarge.status, tooLarge.gone, tooLarge.permanent], [413, false, true], 'a body over 4096 bytes is 413, permanent');

    const otherKey = newService();
    const wrongKey = await refusal(otherKey.send(message(subscription)));
    assert.deepEqual([wrongKey.status, wrongKey.gone, wrongKey.permanent], [401, false, true], 'a VAPID key the browser did not subscribe with is refused for good');
  });

  it('takes a network failure as transient', async () => {
    const closed = await connectionCounter('127.0.0.1');
    await closed.close();
    const service = newService();
    const subscription = standIn.newSubscription(service.publicKey());
    const failed = await refusal(service.send(message({ ...subscription, endpoint: `http://127.0.0.1:${closed.port}/wpush/v2/x` })));
    assert.deepEqual([failed.status, failed.gone, failed.permanent], [undefined, false, false], 'a refused connection is worth another try');
  });

  it('never connects to an internal address a browser names, nor over plain http without the operator’s allow-list', async () => {
    const internal = await connectionCounter('127.0.0.2');
    try {
      const service = newService();
      const subscription = standIn.newSubscription(service.publicKey());
      for (const endpoint of [`https://127.0.0.2:${internal.port}/wpush/v2/x`, `http://127.0.0.2:${internal.port}/wpush/v2/x`, `https://[::ffff:127.0.0.2]:${internal.port}/x`]) {
        const failed = await refusal(service.send(message({ ...subscription, endpoint })));
        assert.deepEqual([failed.status, failed.gone, failed.permanent], [undefined, false, true], `${endpoint} is refused for good`);
      }
      assert.equal(internal.count(), 0, 'no connection reached 127.0.0.2');

      const before = standIn.connections();
      const strict = newService(STRICT_OUTBOUND);
      const strictSubscription = standIn.newSubscription(strict.publicKey());
      const refused = await refusal(strict.send(message(strictSubscription)));
      assert.match(refused.message, /https/, 'production takes https endpoints only');
      assert.equal(standIn.connections(), before, 'the strict service did not connect to the http stand-in');
    } finally {
      await internal.close();
    }
  });

  it('does not follow a redirect with the browser’s payload', async () => {
    const receiver = await startWebhookReceiver();
    try {
      const service = newService();
      const subscription = standIn.newSubscription(service.publicKey());
      receiver.answer('/wpush/moved', (_request, response) => response.writeHead(307, { location: subscription.endpoint }).end());
      const failed = await refusal(service.send(message({ ...subscription, endpoint: receiver.url('/wpush/moved') })));
      assert.deepEqual([failed.status, failed.gone, failed.permanent], [307, false, true], 'a redirect is an answer, not a new destination');
      assert.equal(standIn.messages.filter((m) => m.endpoint === subscription.endpoint).length, 0, 'the redirect target received nothing');
    } finally {
      await receiver.close();
    }
  });
});

describe('reading a browser’s push subscription', () => {
  const valid = () => {
    const keys = webpush.generateVAPIDKeys();
    const browser = { endpoint: 'https://fcm.googleapis.com/fcm/send/dpH5lCsTSSM:APA91bHqjZxM0VImWWqDRN7U0a3AycjUf4O-byuxb_wJsKRaKvV_iKw56s16ekq6FUqoCF7k2nICUpd8fHPxVTgqLunFeVeB9lLCQZyohyAztTH8ZQL9WCxKpA6dvTG_TUIhQUFq_n', keys: { p256dh: keys.publicKey, auth: Buffer.alloc(16, 7).toString('base64url') } };
    return browser;
  };
  const issuesOf = (json: unknown, policy?: OutboundPolicy) => {
    const parsed = parsePushSubscription(json, policy);
    assert.ok(!parsed.success, `refused: ${JSON.stringify(json).slice(0, 120)}`);
    return [...new Set(parsed.error.issues.map((issue) => issue.path.join('/')))];
  };

  it('takes what PushSubscription.toJSON() gives, from a real push service or the stand-in under the test allow-list', async () => {
    assert.ok(parsePushSubscription(valid()).success, 'an FCM subscription parses under the strict policy');
    assert.ok(parsePushSubscription({ ...valid(), expirationTime: null }).success, 'with expirationTime: null as Chrome sends it');
    const standIn = await startPushService();
    try {
      const subscription = standIn.newSubscription(webpush.generateVAPIDKeys().publicKey);
      assert.ok(parsePushSubscription(subscription, TEST_POLICY).success, 'the stand-in’s http endpoint on an allowed address parses');
      assert.deepEqual(issuesOf(subscription, STRICT_OUTBOUND), ['endpoint'], 'but not under the strict policy: production is https only');
    } finally {
      await standIn.close();
    }
  });

  it('refuses endpoints that are not public https URLs', () => {
    const endpoints = [
      'http://push.example.com/send/1',
      'https://127.0.0.2/send/1',
      'https://10.0.0.8/send/1',
      'https://[::1]/send/1',
      'https://localhost/send/1',
      'https://metadata.google.internal/send/1',
      'https://user:secret@push.example.com/send/1',
      'https://push.example.com/send/1#fragment',
      `https://push.example.com/${'a'.repeat(1024)}`,
      'javascript:alert(1)',
      'not a url',
      '',
    ];
    for (const endpoint of endpoints) assert.deepEqual(issuesOf({ ...valid(), endpoint }), ['endpoint'], endpoint);
  });

  it('refuses keys that are not a P-256 point and a 16-byte secret in unpadded base64url', () => {
    const point = Buffer.from(valid().keys.p256dh, 'base64url');
    const offCurve = Buffer.from(point);
    offCurve[64] = offCurve[64]! ^ 1;
    const compressed = Buffer.concat([Buffer.from([0x02 | (point[64]! & 1)]), point.subarray(1, 33)]);
    const badP256dh = [point.subarray(0, 64).toString('base64url'), offCurve.toString('base64url'), compressed.toString('base64url'), point.toString('base64'), `${point.toString('base64url')}=`, ''];
    for (const p256dh of badP256dh) assert.deepEqual(issuesOf({ ...valid(), keys: { ...valid().keys, p256dh } }), ['keys/p256dh'], `p256dh ${p256dh}`);
    for (const auth of [Buffer.alloc(15).toString('base64url'), Buffer.alloc(17).toString('base64url'), 'AAAAAAAAAAAAAAAAAAAAAA==', '']) {
      assert.deepEqual(issuesOf({ ...valid(), keys: { ...valid().keys, auth } }), ['keys/auth'], `auth ${auth}`);
    }
    assert.deepEqual(issuesOf({ endpoint: valid().endpoint }), ['keys'], 'keys are required');
  });
});

describe('the service worker', () => {
  let script: string;
  before(async () => {
    script = (await loadServiceWorker()).toString('utf8');
  });

  /** The script run as a browser runs it, against a `self` that records what it is asked to do. */
  function install() {
    const listeners = new Map<string, (event: unknown) => void>();
    const shown: Array<{ title: string; options: Record<string, unknown> }> = [];
    const opened: string[] = [];
    const self = {
      addEventListener: (type: string, listener: (event: unknown) => void) => listeners.set(type, listener),
      skipWaiting: () => Promise.resolve(),
      registration: { showNotification: (title: string, options: Record<string, unknown>) => (shown.push({ title, options }), Promise.resolve()) },
      clients: { openWindow: (url: string) => (opened.push(url), Promise.resolve(null)) },
    };
    vm.runInNewContext(script, { self, URL });
    const waited: Array<Promise<unknown>> = [];
    const dispatch = (type: string, event: Record<string, unknown>) => listeners.get(type)!({ ...event, waitUntil: (p: Promise<unknown>) => waited.push(p) });
    const push = (data: string) => dispatch('push', { data: { json: () => JSON.parse(data) } });
    const click = (url: unknown, action = '', stop: unknown = null) => {
      let closed = false;
      dispatch('notificationclick', { action, notification: { data: { url, stop }, close: () => (closed = true) } });
      return closed;
    };
    return { shown, opened, push, click, waited };
  }

  it('shows the pushed alert and opens its page when clicked', () => {
    const worker = install();
    worker.push(JSON.stringify(PAYLOAD));
    assert.equal(worker.shown.length, 1, 'one notification shown');
    assert.equal(worker.shown[0]!.title, PAYLOAD.title, 'with the alert’s title');
    assert.deepEqual(
      JSON.parse(JSON.stringify(worker.shown[0]!.options)),
      {
        body: PAYLOAD.body,
        tag: PAYLOAD.tag,
        icon: PAYLOAD.icon,
        data: { url: PAYLOAD.url, stop: PAYLOAD.stop.url },
        actions: [{ action: 'stop', title: PAYLOAD.stop.label }],
      },
      'body, tag, icon, the page to open, and a second button that stops this browser’s alerts',
    );
    assert.ok(worker.click(PAYLOAD.url, '', PAYLOAD.stop.url), 'the notification is closed on click');
    assert.deepEqual(worker.opened, [PAYLOAD.url], 'the product page opens');
    assert.equal(worker.waited.length, 2, 'both the notification and the window are waited for');
    worker.click(PAYLOAD.url, 'stop', PAYLOAD.stop.url);
    assert.deepEqual(worker.opened, [PAYLOAD.url, PAYLOAD.stop.url], 'the second button opens the browser’s stop page');
  });

  it('opens only http(s) pages and ignores pushes that are not alerts', () => {
    const worker = install();
    worker.push(JSON.stringify({ ...PAYLOAD, url: 'javascript:alert(document.cookie)', icon: 'data:image/svg+xml,<svg/>', stop: { url: 'javascript:alert(2)', label: 'x' } }));
    assert.deepEqual(JSON.parse(JSON.stringify(worker.shown[0]!.options.data)), { url: null, stop: null }, 'a javascript: URL is dropped from the notification');
    assert.equal(worker.shown[0]!.options.actions, undefined, 'no button to a javascript: URL');
    worker.click('https://ok.example/', 'stop', 'javascript:alert(3)');
    assert.equal(worker.shown[0]!.options.icon, undefined, 'a data: icon is dropped');
    for (const url of ['javascript:alert(1)', 'data:text/html,<script>alert(1)</script>', 'file:///etc/passwd', null, 42]) worker.click(url);
    assert.deepEqual(worker.opened, [], 'nothing opened');
    worker.push('not json');
    worker.push(JSON.stringify({ title: 7 }));
    assert.equal(worker.shown.length, 1, 'pushes that are not alerts show nothing');
  });
});

for (const dialect of testDialects()) {
  describe(`push on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    let testDatabase: TestDatabase;
    before(async () => {
      testDatabase = await createTestDatabase(dialect);
    });
    after(async () => testDatabase.drop());

    const open = () => Database.open(testConfig(testDatabase.url).database);
    const storedVapid = async (database: Database) => database.db.selectFrom('service_secrets').selectAll().where('name', '=', 'vapid').execute();

    it('makes the VAPID key pair once, shared by processes starting together, and keeps it across restarts', async () => {
      const first = open();
      const second = open();
      let keys: Awaited<ReturnType<typeof loadVapidKeys>>[];
      try {
        assert.deepEqual(await storedVapid(first), [], 'no pair before the first start');
        keys = await Promise.all([loadVapidKeys(first), loadVapidKeys(second), loadVapidKeys(first)]);
      } finally {
        await first.close();
        await second.close();
      }
      assert.equal(new Set(keys.map((k) => `${k.publicKey}.${k.privateKey}`)).size, 1, 'every start got the same pair');
      assert.equal(keys.filter((k) => k.made).length, 1, 'exactly one start made it');
      assert.equal(Buffer.from(keys[0]!.publicKey, 'base64url').length, 65, 'an uncompressed P-256 public key');

      const reopened = open();
      try {
        const again = await loadVapidKeys(reopened);
        assert.deepEqual([again.publicKey, again.privateKey, again.made], [keys[0]!.publicKey, keys[0]!.privateKey, false], 'the same pair after a restart, not made again');
        assert.equal((await storedVapid(reopened)).length, 1, 'one row in service_secrets');
      } finally {
        await reopened.close();
      }
    });

    it('serves the service worker on our origin and through the app proxy, and the public key', async () => {
      const config = testConfig(testDatabase.url);
      const database = Database.open(config.database);
      const app = Fastify({ logger: false });
      try {
        app.setValidatorCompiler(validatorCompiler);
        app.setSerializerCompiler(serializerCompiler);
        installErrorHandling(app, config.baseUrl, config.bodyLimitBytes);
        const push = await buildPush({ config, database, log: app.log, storefrontProxies: STOREFRONT_PROXIES });
        for (const routes of push.routes ?? []) await app.register(routes);
        await app.ready();

        const script = (await loadServiceWorker()).toString('utf8');
        for (const url of ['/push/sw.js', '/shopify/proxy/push/sw.js?shop=sock-shop.myshopify.com&path_prefix=%2Fapps%2Frestock&timestamp=1&signature=00']) {
          const res = await app.inject({ method: 'GET', url });
          assert.equal(res.statusCode, 200, `${url}: ${res.body.slice(0, 200)}`);
          assert.equal(res.headers['content-type'], 'text/javascript; charset=utf-8', `${url} is served as JavaScript`);
          assert.match(res.headers['cache-control'] as string, /max-age=300/, `${url} is cached briefly`);
          assert.equal(res.body, script, `${url} is the script as built`);
        }

        const key = await app.inject({ method: 'GET', url: '/push/v1/key', headers: { origin: 'https://sock-shop.example' } });
        assert.equal(key.statusCode, 200, key.body);
        assert.equal(key.headers['access-control-allow-origin'], '*', 'any store’s page may read it');
        const stored = JSON.parse((await storedVapid(database))[0]!.value) as { publicKey: string };
        assert.deepEqual(key.json(), { publicKey: stored.publicKey }, 'the stored VAPID public key');
        assert.equal(push.service.publicKey(), stored.publicKey, 'the one the service signs with');
      } finally {
        await app.close();
        await database.close();
      }
    });

    it('refuses to start with a damaged key pair rather than sign with it', async () => {
      const database = open();
      try {
        await loadVapidKeys(database);
        const [row] = await storedVapid(database);
        const pair = JSON.parse(row!.value) as { publicKey: string; privateKey: string };
        const other = webpush.generateVAPIDKeys();
        await database.write((trx) => trx.updateTable('service_secrets').set({ value: JSON.stringify({ ...pair, privateKey: other.privateKey }) }).where('name', '=', 'vapid').execute());
        await assert.rejects(loadVapidKeys(database), /damaged/, 'halves that do not belong together stop start-up');
        await database.write((trx) => trx.updateTable('service_secrets').set({ value: row!.value }).where('name', '=', 'vapid').execute());
      } finally {
        await database.close();
      }
    });
  });
}
