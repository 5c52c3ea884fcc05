// Longer than most files on purpose: restock news for the agent that asked, end to end, over HTTP and A2A, on both databases.
/**
 * An agent that subscribes a shopper asks to hear of the subscription's news: a callback URL
 * (signed per Standard Webhooks and RFC 9421), or an A2A push configuration. The news travels
 * through the outgoing-webhooks queue to real receivers on loopback (the app's allow-list admits
 * 127.0.0.1/32 only). Each callback is verified with svix's `Webhook` and with the
 * `http-message-signatures` package, whose keys come from our directory, itself verified by that
 * package; neither shares code with the signer. The A2A push is asked for with the official A2A
 * client and read with its SDK's own wire types.
 */
import assert from 'node:assert/strict';
import { createHash, createPublicKey, randomBytes, type KeyObject } from 'node:crypto';
import { StreamResponse, TaskState } from '@a2a-js/sdk';
import { httpbis, createVerifier } from 'http-message-signatures';
import { Webhook as SvixWebhook } from 'svix';
import { after, before, describe, it } from './fixtures/suites.ts';
import { call, expectProblem, expectStatus, registerAnonymousAgent, storeWithAgent, uniqueEmail, type RegisteredAgent, type StoreAgent } from './fixtures/agents.ts';
import { a2aClient, asTask, skillMessage, withToken } from './fixtures/a2a.ts';
import { dialectSkip, startListeningTestApp, testDialects, type TestApp } from './fixtures/app.ts';
import { failOnLeakedHandles } from './fixtures/leaks.ts';
import { startWebhookReceiver, type ReceivedWebhook, type WebhookReceiver } from './fixtures/webhook-receiver.ts';
import { rotateMessageSigningKey } from '../src/webhooks/feature.ts';
import { MessageSigner } from '../src/webhooks/message-signatures.ts';

failOnLeakedHandles();

const ENCRYPTION_KEY = randomBytes(32).toString('base64');
const SUBSCRIBE = '/api/v1/alerts/subscribe';
const DIRECTORY = '/.well-known/http-message-signatures-directory';
let serial = 0;

/** RFC 7638's thumbprint of an Ed25519 JWK, written out here: the members it names, in order, hashed. */
function thumbprint(jwk: { crv: string; kty: string; x: string }): string {
  return createHash('sha256').update(`{"crv":"${jwk.crv}","kty":"${jwk.kty}","x":"${jwk.x}"}`).digest('base64url');
}

interface DirectoryKey {
  kty: string;
  crv: string;
  x: string;
  kid: string;
}

for (const dialect of testDialects()) {
  describe(`restock news for the agent that asked, on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    let t: TestApp;
    let base: string;
    let receiver: WebhookReceiver;

    before(async () => {
      receiver = await startWebhookReceiver();
      ({ t, base } = await startListeningTestApp(dialect, {
        RESTOCK_ENCRYPTION_KEY: ENCRYPTION_KEY,
        TENANT_OUTBOUND_ALLOW: '127.0.0.1/32',
        WEBHOOK_TIMEOUT_MS: '1000',
      }));
    });
    after(async () => {
      await t.close();
      await receiver.close();
    });

    /** Our key directory, fetched over HTTP as a receiver would, each key kept only if its own signature on the response holds. */
    async function directoryKeys(): Promise<Map<string, KeyObject>> {
      const url = `${base}${DIRECTORY}`;
      const res = await fetch(url, { headers: { accept: 'application/http-message-signatures-directory+json' } });
      assert.equal(res.status, 200);
      assert.equal(res.headers.get('content-type'), 'application/http-message-signatures-directory+json');
      const body = await res.text();
      const { keys } = JSON.parse(body) as { keys: DirectoryKey[] };
      assert.ok(keys.length >= 1);
      const byId = new Map<string, KeyObject>();
      for (const key of keys) {
        assert.deepEqual([key.kty, key.crv], ['OKP', 'Ed25519']);
        assert.equal(key.kid, thumbprint(key), 'the kid is the JWK thumbprint');
        assert.equal((key as { d?: string }).d, undefined, 'no private half');
        byId.set(key.kid, createPublicKey({ key: { kty: key.kty, crv: key.crv, x: key.x }, format: 'jwk' }));
      }
      const headers = Object.fromEntries(res.headers.entries());
      assert.equal(headers['content-digest'], `sha-256=:${createHash('sha256').update(body).digest('base64')}:`, 'Content-Digest is the body’s');
      const seen = new Set<string>();
      const verified = await httpbis.verifyMessage(
        {
          all: true,
          requiredFields: ['@authority', 'content-digest'],
          requiredParams: ['created', 'expires', 'keyid', 'alg', 'tag'],
          keyLookup: async (params) => {
            assert.equal(params.tag, 'http-message-signatures-directory');
            const key = byId.get(String(params.keyid));
            if (!key) return null;
            seen.add(String(params.keyid));
            return { id: String(params.keyid), algs: ['ed25519'], verify: createVerifier(key, 'ed25519') };
          },
        },
        { status: res.status, headers },
        { method: 'GET', url, headers: {} },
      );
      assert.equal(verified, true, 'the directory response verifies');
      assert.deepEqual([...seen].sort(), [...byId.keys()].sort(), 'one signature per key');
      return byId;
    }

    /** The delivery verified per RFC 9421 with the directory's keys, by a verifier we did not write. */
    async function verifyMessageSignature(hit: ReceivedWebhook, path: string): Promise<void> {
      const keys = await directoryKeys();
      assert.equal(hit.headers['content-digest'], `sha-256=:${createHash('sha256').update(hit.body).digest('base64')}:`, 'Content-Digest is the body’s');
      assert.equal(hit.headers['signature-agent'], `sig1="${new URL(base).origin}"`, 'Signature-Agent names our directory’s origin');
      const verified = await httpbis.verifyMessage(
        {
          requiredFields: ['@method', '@target-uri', 'content-type', 'content-digest', 'webhook-id'],
          requiredParams: ['created', 'expires', 'keyid', 'alg'],
          keyLookup: async (params) => {
            const key = keys.get(String(params.keyid));
            return key ? { id: String(params.keyid), algs: ['ed25519'], verify: createVerifier(key, 'ed25519') } : null;
          },
        },
        { method: 'POST', url: receiver.url(path), headers: hit.headers },
      );
      assert.equal(verified, true, 'the RFC 9421 signature verifies');
    }

    /** An unbound agent's subscription with a callback at `path`, for a product the store reported sold out. */
    async function subscribeWithCallback(agent: RegisteredAgent, store: StoreAgent, path: string, email = uniqueEmail('shopper')) {
      const productId = `gid://shopify/Product/${700 + ++serial}`;
      const variantId = `gid://shopify/ProductVariant/${900 + serial}`;
      expectStatus(await call(t.app, 'POST', `/api/v1/stores/${store.domain}/inventory`, { token: store.token, body: { items: [{ productId, variantId, available: 0, productTitle: 'Blue mug' }] } }), 200);
      const answer = expectStatus(await call(t.app, 'POST', SUBSCRIBE, { token: agent.token, body: { productId, variantId, email, shop: store.domain, callbackUrl: receiver.url(path) } }), 200);
      return { ...answer, productId, variantId, email } as { subscriptionId: string; status: string; callbackSecret?: string; productId: string; variantId: string; email: string };
    }

    /** Waits until `count` deliveries reached `path`, running the worker (sends, then deliveries) between looks. */
    async function received(path: string, count: number): Promise<ReceivedWebhook[]> {
      for (let round = 0; round < 20; round++) {
        await t.runWorker();
        const hits = receiver.received.filter((hit) => hit.path === path);
        if (hits.length >= count) return hits;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      const ledger = await t.database.db.selectFrom('notifications').select(['subscription_id', 'status', 'kind']).execute();
      const queued = await t.database.db.selectFrom('webhook_deliveries').select(['endpoint_id', 'event_type', 'status', 'last_error']).execute();
      assert.fail(`${count} deliveries did not reach ${path}: ${receiver.received.filter((hit) => hit.path === path).length} did; ledger ${JSON.stringify(ledger)}; queue ${JSON.stringify(queued)}`);
    }

    it('serves the key directory, signed per key, with thumbprint key ids', async () => {
      const keys = await directoryKeys();
      assert.equal(keys.size, 1);
    });

    it('rotates the signing key as `restock keys rotate --http-signatures` does: the new key signs, the former stays in the directory', async () => {
      const before = [...(await directoryKeys()).keys()];
      const newKeyid = await rotateMessageSigningKey(t.config, t.database);
      assert.ok(!before.includes(newKeyid));
      // A fresh look at the keys, as a process does within a minute of the rotation.
      const fresh = new MessageSigner(t.database, base);
      await fresh.refresh();
      assert.deepEqual(fresh.directory().keys.map((key) => key.kid).sort(), [...before, newKeyid].sort());
      const signed = fresh.signRequest('POST', new URL('https://example.com/hook'), { 'content-type': 'application/json', 'webhook-id': 'msg_1' }, '{}');
      assert.match(signed['signature-input']!, new RegExp(`keyid="${newKeyid}"`));
    });

    it("tells the agent its subscription's news, signed per Standard Webhooks and RFC 9421: back in stock, sent, clicked, converted", async () => {
      const store = await storeWithAgent(t.app, t.database, 'news');
      const agent = await registerAnonymousAgent(t.app);
      const sub = await subscribeWithCallback(agent, store, '/news');
      assert.equal(sub.status, 'active');
      assert.match(sub.callbackSecret ?? '', /^whsec_[A-Za-z0-9+/]+=*$/, 'the secret, this once');
      const secret = sub.callbackSecret!;
      // The same agent's next callback is signed with the same secret, which is not shown again.
      const again = await subscribeWithCallback(agent, store, '/news-2');
      assert.equal(again.callbackSecret, undefined);

      expectStatus(await call(t.app, 'POST', `/api/v1/stores/${store.domain}/inventory`, { token: store.token, body: { items: [{ productId: sub.productId, variantId: sub.variantId, available: 5, productTitle: 'Blue mug' }] } }), 200);
      const hits = await received('/news', 2);
      const events = hits.map((hit) => new SvixWebhook(secret).verify(hit.body, hit.headers) as { type: string; data: Record<string, unknown> });
      // Delivered in parallel: in either order.
      assert.deepEqual(events.map((event) => event.type).sort(), ['alert.sent', 'subscription.restocked']);
      for (const event of events) {
        assert.equal(event.data.subscriptionId, sub.subscriptionId);
        assert.equal(event.data.shop, store.domain);
        assert.equal(event.data.productId, sub.productId);
        assert.equal(event.data.email, undefined, 'no address travels');
      }
      for (const hit of hits) await verifyMessageSignature(hit, '/news');
      assert.throws(() => new SvixWebhook(`whsec_${randomBytes(32).toString('base64')}`).verify(hits[0]!.body, hits[0]!.headers), 'another secret does not verify it');
      // A changed body no longer verifies under RFC 9421 either (its digest is signed).
      await assert.rejects(verifyMessageSignature({ ...hits[0]!, headers: { ...hits[0]!.headers, 'content-digest': `sha-256=:${createHash('sha256').update('{}').digest('base64')}:` }, body: '{}' }, '/news'));

      // The shopper clicks the alert's link, then buys: both reach the agent.
      const alertId = String(events.find((event) => event.type === 'alert.sent')!.data.alertId);
      const mail = await t.database.db.selectFrom('mail_outbox').selectAll().where('recipient', '=', sub.email).execute();
      const link = mail.map((row) => /https?:\/\/[^\s"<>]*\/r\/[^\s"<>]+/.exec(`${row.text_body ?? ''} ${row.html_body ?? ''}`)?.[0]).find(Boolean);
      assert.ok(link, 'the alert carries a tracked link');
      const { pathname, search } = new URL(link!);
      const followed = await t.app.inject({ method: 'GET', url: `${pathname}${search}`, headers: { 'user-agent': 'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 Chrome/126.0 Safari/537.36' } });
      assert.equal(followed.statusCode, 302, followed.body);
      const order = { orderId: `news-${serial}`, email: sub.email, placedAt: new Date().toISOString(), currency: 'USD', lines: [{ lineId: 'l1', productId: sub.productId, variantId: sub.variantId, quantity: 1, amountMinor: 2500 }] };
      expectStatus(await call(t.app, 'POST', `/api/v1/stores/${store.domain}/orders`, { token: store.token, body: order }), 200);
      const later = (await received('/news', 4)).slice(2);
      const more = later.map((hit) => new SvixWebhook(secret).verify(hit.body, hit.headers) as { type: string; data: Record<string, unknown> });
      assert.deepEqual(
        more.map((event) => event.type).sort(),
        ['alert.clicked', 'order.attributed'],
      );
      for (const event of more) assert.equal(event.data.alertId, alertId);
      const attributed = more.find((event) => event.type === 'order.attributed')!;
      assert.equal(attributed.data.attribution, 'direct');
      assert.equal(attributed.data.amount, undefined, 'no amounts');
      for (const hit of later) await verifyMessageSignature(hit, '/news');
      // The other subscription heard nothing of this one.
      assert.equal(receiver.received.filter((hit) => hit.path === '/news-2').length, 0);
    });

    it('signs store webhooks with RFC 9421 too', async () => {
      const store = await storeWithAgent(t.app, t.database, 'storehook');
      const endpoint = expectStatus(await call(t.app, 'POST', `/api/v1/stores/${store.domain}/webhooks`, { token: store.token, body: { url: receiver.url('/store-hook') } }), 201);
      await t.app.restock.events.announce({ storeDomain: store.domain, type: 'subscription.created', id: `evt_store${++serial}`, occurredAt: new Date().toISOString(), data: { subscriptionId: 'sub_x' } });
      const [hit] = await received('/store-hook', 1);
      new SvixWebhook(endpoint.secret).verify(hit!.body, hit!.headers);
      await verifyMessageSignature(hit!, '/store-hook');
    });

    it('retries a callback its receiver refused, on the store webhooks’ schedule', async () => {
      const store = await storeWithAgent(t.app, t.database, 'retry');
      const agent = await registerAnonymousAgent(t.app);
      let answer = 503;
      receiver.answer('/flaky', (_request, response) => void response.writeHead(answer).end());
      const sub = await subscribeWithCallback(agent, store, '/flaky');
      await t.app.restock.events.announce(sentEvent(store.domain, sub));
      await received('/flaky', 2);
      const [delivery] = await t.database.db.selectFrom('webhook_deliveries').selectAll().where('event_type', '=', 'alert.sent').where('endpoint_id', 'in', t.database.db.selectFrom('subscription_callbacks').select('endpoint_id').where('subscription_id', '=', sub.subscriptionId)).execute();
      assert.equal(delivery!.status, 'pending');
      assert.equal(delivery!.attempts, 1);
      assert.ok(Date.parse(delivery!.next_attempt_at!) > Date.now(), 'due again later');
      answer = 200;
      await t.database.db.updateTable('webhook_deliveries').set({ next_attempt_at: new Date(Date.now() - 1).toISOString() }).where('status', '=', 'pending').where('endpoint_id', '=', delivery!.endpoint_id).execute();
      await received('/flaky', 4);
      const settled = await t.database.db.selectFrom('webhook_deliveries').select(['status', 'attempts']).where('id', '=', delivery!.id).executeTakeFirstOrThrow();
      assert.deepEqual(settled, { status: 'delivered', attempts: 2 });
    });

    it('refuses an internal or plain-http callback at subscribe time, with problem+json, and stores nothing', async () => {
      const store = await storeWithAgent(t.app, t.database, 'refused');
      const agent = await registerAnonymousAgent(t.app);
      const before = await t.tableDigests();
      for (const callbackUrl of ['http://10.1.2.3/hook', 'https://169.254.169.254/latest', 'https://[::1]/hook', 'http://shop.example.com/hook', 'https://user:pw@example.com/hook', 'ftp://example.com/']) {
        const res = await call(t.app, 'POST', SUBSCRIBE, { token: agent.token, body: { productId: 'gid://shopify/Product/1', email: uniqueEmail(), shop: store.domain, callbackUrl } });
        const problem = expectProblem(res, 400, 'forbidden-webhook-destination');
        assert.deepEqual(problem.errors.map((e: { pointer: string }) => e.pointer), ['/body/callbackUrl'], callbackUrl);
      }
      assert.deepEqual(await t.tableDigests(), before);
      const rows = await t.database.db.selectFrom('webhook_endpoints').select('id').where('agent_id', '=', agent.registrationId).execute();
      assert.deepEqual(rows, []);
    });

    it('pushes the A2A task, completed, to the push URLs the official client gave, when the product is back', async () => {
      const store = await storeWithAgent(t.app, t.database, 'a2a-push');
      const agent = await registerAnonymousAgent(t.app);
      const client = await a2aClient(base);
      assert.equal((await client.getAgentCard()).capabilities?.pushNotifications, true);
      const productId = `gid://shopify/Product/${700 + ++serial}`;
      const variantId = `gid://shopify/ProductVariant/${900 + serial}`;
      expectStatus(await call(t.app, 'POST', `/api/v1/stores/${store.domain}/inventory`, { token: store.token, body: { items: [{ productId, variantId, available: 0, productTitle: 'Red mug' }] } }), 200);
      const input = { productId, variantId, email: uniqueEmail('a2a'), shop: store.domain };
      const pushConfig = (url: string, extra: { token?: string; authentication?: { scheme: string; credentials: string } } = {}) => ({ tenant: '', id: '', taskId: '', url, token: extra.token ?? '', authentication: extra.authentication });
      const send = (url: string) =>
        client.sendMessage(
          { tenant: '', message: skillMessage('subscribeAlert', input), configuration: { acceptedOutputModes: [], taskPushNotificationConfig: pushConfig(url, { token: 'push-token-1' }), returnImmediately: false }, metadata: undefined },
          withToken(agent.token),
        );
      // An internal push URL is refused before anything runs or is stored.
      const digest = await t.tableDigests();
      await assert.rejects(send('http://10.0.0.7/push'), /taskPushNotificationConfig\.url/);
      assert.deepEqual(await t.tableDigests(), digest);

      const task = asTask(await send(receiver.url('/a2a-push')));
      assert.equal(task.status?.state, TaskState.TASK_STATE_WORKING, 'waits for its news');
      const answer = task.artifacts[0]?.parts[0]?.content;
      assert.equal(answer?.$case, 'data');
      const subscriptionId = (answer.value as { subscriptionId: string }).subscriptionId;
      // A second configuration, set later on the same task, with credentials instead of a token.
      await client.createTaskPushNotificationConfig({ ...pushConfig(receiver.url('/a2a-push-2'), { authentication: { scheme: 'Bearer', credentials: 'push-credentials' } }), taskId: task.id }, withToken(agent.token));
      assert.equal((await client.getTask({ tenant: '', id: task.id }, withToken(agent.token))).status?.state, TaskState.TASK_STATE_WORKING);

      expectStatus(await call(t.app, 'POST', `/api/v1/stores/${store.domain}/inventory`, { token: store.token, body: { items: [{ productId, variantId, available: 3, productTitle: 'Red mug' }] } }), 200);
      const [hit] = await received('/a2a-push', 1);
      const [second] = await received('/a2a-push-2', 1);
      assert.equal(hit!.headers['x-a2a-notification-token'], 'push-token-1');
      assert.equal(second!.headers.authorization, 'Bearer push-credentials');
      assert.equal(hit!.headers['content-type'], 'application/a2a+json');
      for (const [one, path] of [[hit!, '/a2a-push'], [second!, '/a2a-push-2']] as const) {
        await verifyMessageSignature(one, path);
        const pushed = StreamResponse.fromJSON(JSON.parse(one.body));
        assert.equal(pushed.payload?.$case, 'task', one.body);
        const done = pushed.payload.value;
        assert.equal(done.id, task.id);
        assert.equal(done.status?.state, TaskState.TASK_STATE_COMPLETED);
        assert.deepEqual(done.artifacts[0]?.parts[0]?.content, answer, 'the subscription, as answered');
        const news = done.artifacts[1]?.parts[0]?.content;
        assert.equal(news?.$case, 'data');
        assert.equal((news.value as { type: string }).type, 'subscription.restocked');
        assert.equal((news.value as { subscriptionId: string }).subscriptionId, subscriptionId);
      }
      assert.equal(receiver.received.filter((one) => one.path === '/a2a-push').length, 1, 'one push: the alert.sent that follows is not the task’s news');
    });

    it("keeps each agent's and each store's news to itself", async () => {
      const store = await storeWithAgent(t.app, t.database, 'apart');
      const other = await storeWithAgent(t.app, t.database, 'apart-other');
      const alice = await registerAnonymousAgent(t.app);
      const bob = await registerAnonymousAgent(t.app);
      const storeHook = expectStatus(await call(t.app, 'POST', `/api/v1/stores/${store.domain}/webhooks`, { token: store.token, body: { url: receiver.url('/apart-store') } }), 201);
      const otherHook = expectStatus(await call(t.app, 'POST', `/api/v1/stores/${other.domain}/webhooks`, { token: other.token, body: { url: receiver.url('/apart-other-store') } }), 201);
      const aliceSub = await subscribeWithCallback(alice, store, '/apart-alice');
      // Bob subscribes the same shopper to the same product, with a callback of his own; the store's own agent too.
      expectStatus(await call(t.app, 'POST', SUBSCRIBE, { token: bob.token, body: { productId: aliceSub.productId, variantId: aliceSub.variantId, email: aliceSub.email, shop: store.domain, callbackUrl: receiver.url('/apart-bob') } }), 200);
      expectStatus(await call(t.app, 'POST', SUBSCRIBE, { token: store.token, body: { productId: aliceSub.productId, variantId: aliceSub.variantId, email: uniqueEmail(), callbackUrl: receiver.url('/apart-own') } }), 200);
      await t.app.restock.events.announce(sentEvent(store.domain, aliceSub));
      await received('/apart-alice', 2);
      await received('/apart-store', 1);
      for (const path of ['/apart-bob', '/apart-own', '/apart-other-store']) assert.equal(receiver.received.filter((hit) => hit.path === path).length, 0, path);
      // The store's endpoint got the store's event, never the agent's.
      const storeTypes = receiver.received.filter((hit) => hit.path === '/apart-store').map((hit) => JSON.parse(hit.body).type as string);
      assert.ok(!storeTypes.includes('subscription.restocked'));
      // The store's own endpoints list nothing of the agents'.
      const listed = expectStatus(await call(t.app, 'GET', `/api/v1/stores/${store.domain}/webhooks`, { token: store.token }), 200);
      assert.deepEqual(listed.items.map((item: { endpointId: string }) => item.endpointId), [storeHook.endpointId]);
      assert.ok(otherHook.endpointId);
      // Bob cannot read Alice's subscription, nor hear of it by naming it.
      expectProblem(await call(t.app, 'GET', `/api/v1/alerts/${aliceSub.subscriptionId}`, { token: bob.token }), 404, 'not-found');
    });
  });
}

/** `alert.sent` as the dispatch worker announces it for a subscription. */
function sentEvent(storeDomain: string, sub: { subscriptionId: string; productId: string; variantId: string; email: string }) {
  const alertId = `ntf_${Date.now().toString(36)}${++serial}`;
  const sentAt = new Date().toISOString();
  return {
    storeDomain,
    type: 'alert.sent' as const,
    id: `evt_${alertId}`,
    occurredAt: sentAt,
    data: { alertId, kind: 'alert', channel: 'email', restockId: 'rst_1', subscriptionId: sub.subscriptionId, productId: sub.productId, variantId: sub.variantId, email: sub.email, sentAt },
  };
}

