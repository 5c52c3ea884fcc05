/**
 * Network addresses (finding 7): IPv6 forms that translate to IPv4 or are reserved for a special
 * purpose are judged as what they reach, so no webhook or push endpoint reaches an internal host
 * through them.
 *
 * Addresses and subscriptions (issue 18, findings 8, 9 and the second half of 6): one address
 * in several cases is one shopper everywhere; a subscription belongs to whoever made it and its
 * id says nothing of when; agents not bound to a store never take its allowance ahead of its own
 * shoppers, and hold a bounded number of its subscriptions. Each test failed on the code before
 * its fix.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { Migrator, type Kysely, type Migration } from 'kysely';
import { after, before, describe, it } from '../fixtures/suites.ts';
import { dialectSkip, startTestApp, testDialects, type TestApp } from '../fixtures/app.ts';
import { call, expectProblem, expectStatus, registerAnonymousAgent, storeWithAgent, uniqueEmail, type StoreAgent } from '../fixtures/agents.ts';
import { failOnLeakedHandles } from '../fixtures/leaks.ts';
import { pgAdmin, pgUrlFor } from '../fixtures/services.ts';
import { SubscriptionRepository } from '../../src/alerts/repository.ts';
import { THIRD_PARTY_LIMIT_PER_STORE } from '../../src/alerts/service.ts';
import { Database } from '../../src/core/db/database.ts';
import type { Dialect } from '../../src/core/db/dialect.ts';
import { migrations } from '../../src/core/db/migrations/index.ts';
import { DispatchRepository } from '../../src/dispatch/repository.ts';
import { checkNewDestination } from '../../src/core/net/destination.ts';
import { isAllowedDestination, STRICT_OUTBOUND } from '../../src/core/net/outbound-guard.ts';
import { checkPushEndpoint } from '../../src/push/subscription.ts';

failOnLeakedHandles();

/** IPv6 addresses that reach no host on the internet, or an internal one, whatever follows their prefix. */
const TRANSLATED_OR_SPECIAL = [
  // SIIT's IPv4-translated form (::ffff:0:a.b.c.d), unlike the IPv4-mapped ::ffff:a.b.c.d.
  '::ffff:0:127.0.0.1',
  '::ffff:0:7f00:1',
  '::ffff:0:a9fe:a9fe',
  '::ffff:0:8.8.8.8',
  // Local-use NAT64 (RFC 8215): its translator serves the operator's own IPv4 network.
  '64:ff9b:1::7f00:1',
  '64:ff9b:1::a00:1',
  '64:ff9b:1:a00:1::',
  '64:ff9b:1::808:808',
  // Well-known NAT64 (RFC 6052) and 6to4 carrying an internal IPv4 address.
  '64:ff9b::127.0.0.1',
  '64:ff9b::a9fe:a9fe',
  '64:ff9b::c0a8:1',
  '64:ff9b::0.0.0.0',
  '2002:a00:1::1',
  '2002:c0a8:101::',
  '2002:a9fe:a9fe::1',
  '2002:7f00:1:1:1:1:1:1',
  // Well-known NAT64 outside its /96, and IPv4-compatible (::a.b.c.d, deprecated).
  '64:ff9b:0:0:1::808:808',
  '::8.8.8.8',
  // Teredo (its server and client addresses are IPv4 in disguise) and the rest of 2001::/23.
  '2001:0:4136:e378:8000:63bf:3fff:fdd2',
  '2001::1',
  '2001:1::1',
  '2001:2::1',
  '2001:3::1',
  '2001:4:112::1',
  '2001:10::1',
  '2001:20::1',
  '2001:30::1',
  // Documentation (2001:db8::/32, 3fff::/20), discard-only, the dummy prefix, SRv6 SIDs.
  '2001:db8::1',
  '3fff::1',
  '3fff:fff:ffff::1',
  '100::1',
  '100:0:0:1::1',
  '5f00::1',
  // Unique local, link-local (with and without a zone), site-local, multicast, reserved.
  'fd00:ec2::254',
  'fe80::1',
  'fe80::1%lo',
  'fec0::1',
  'ff05::1',
  '200::1',
  '4000::1',
];

/** Public addresses, in every form that carries one. */
const PUBLIC = ['2606:4700:4700::1111', '2a00:1450:4001:82a::200e', '2600::1', '2c0f:f248::1', '::ffff:8.8.8.8', '64:ff9b::8.8.8.8', '64:ff9b::808:808', '2002:808:808::1'];

describe('finding 7: IPv6 translation prefixes and special-purpose ranges', () => {
  it('finding 7: SIIT, local-use NAT64, Teredo and every special-purpose IPv6 range is refused; NAT64 and 6to4 are judged by the IPv4 address they carry', () => {
    for (const address of TRANSLATED_OR_SPECIAL) assert.equal(isAllowedDestination(address, STRICT_OUTBOUND), false, address);
    for (const address of PUBLIC) assert.equal(isAllowedDestination(address, STRICT_OUTBOUND), true, address);
  });

  it('finding 7: a webhook or push endpoint naming a translation prefix is refused', () => {
    for (const address of TRANSLATED_OR_SPECIAL.filter((a) => !a.includes('%') && !a.includes('.'))) {
      assert.ok('refused' in checkNewDestination(`https://[${address}]/hook`, STRICT_OUTBOUND), address);
      assert.ok('refused' in checkPushEndpoint(`https://[${address}]/wpush/v2/x`, STRICT_OUTBOUND), address);
    }
    // As the WHATWG parser writes them: ::ffff:0:127.0.0.1 becomes [::ffff:0:7f00:1].
    assert.equal(new URL('https://[::ffff:0:127.0.0.1]/').hostname, '[::ffff:0:7f00:1]');
    assert.ok('refused' in checkNewDestination('https://[::ffff:0:127.0.0.1]/hook', STRICT_OUTBOUND));
    assert.ok('url' in checkNewDestination('https://[64:ff9b::808:808]/hook', STRICT_OUTBOUND));
  });
});

const SUBSCRIBE = '/api/v1/alerts/subscribe';
let serial = 0;
const product = () => `gid://shopify/Product/${31_000_000 + ++serial}`;
const variant = () => `gid://shopify/ProductVariant/${32_000_000 + ++serial}`;

/** The same address with its case changed: `jane.x@example.com` → `Jane.X@Example.com`. */
function otherCase(email: string): string {
  return email.replace(/(^|[.@])([a-z])/g, (_, sep: string, letter: string) => sep + letter.toUpperCase());
}

function widget(t: TestApp, body: { shop: string; productId: string; variantId?: string | null; email: string }) {
  return t.app.inject({ method: 'POST', url: '/storefront/v1/subscribe', headers: { 'content-type': 'application/json' }, payload: JSON.stringify(body) });
}

function report(t: TestApp, store: StoreAgent, items: Array<Record<string, unknown>>) {
  return call(t.app, 'POST', `/api/v1/stores/${store.domain}/inventory`, { token: store.token, body: { items } });
}

/** Restock alerts the store put in the local outbox, by recipient. */
async function alertsTo(t: TestApp, store: StoreAgent): Promise<string[]> {
  const rows = await t.database.db.selectFrom('mail_outbox').select('recipient').where('store_domain', '=', store.domain).where('purpose', '=', 'restock-alert').execute();
  return rows.map((row) => row.recipient);
}

/** One subscribe_alert tool call over the MCP endpoint (stateless: no session to open first). */
async function mcpSubscribe(t: TestApp, token: string, args: Record<string, unknown>): Promise<{ isError?: boolean; structuredContent: Record<string, unknown> }> {
  const res = await t.app.inject({
    method: 'POST',
    url: '/mcp',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    payload: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'subscribe_alert', arguments: args } }),
  });
  assert.equal(res.statusCode, 200, res.body);
  return res.json().result;
}

function subscriptionRow(t: TestApp, id: string) {
  return t.database.db.selectFrom('subscriptions').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
}

function ledger(t: TestApp, store: StoreAgent) {
  return t.database.db.selectFrom('notifications').selectAll().where('store_domain', '=', store.domain).orderBy('position').execute();
}

for (const dialect of testDialects()) {
  describe(`addresses and subscriptions on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    let t: TestApp;
    before(async () => {
      // Batches follow each other at once, so a whole restock runs in one runWorker.
      t = await startTestApp(dialect, { BATCH_INTERVAL_SECONDS: '0' });
    });
    after(() => t.close());

    it('finding 8: a complaint about one case of an address stops mail to every case of it', async () => {
      const store = await storeWithAgent(t.app, t.database, 'complaint');
      const complainer = uniqueEmail('complainer');
      expectStatus(await call(t.app, 'POST', `/api/v1/stores/${store.domain}/suppressions`, { token: store.token, body: { email: complainer, reason: 'complaint' } }), 200);
      // Suppressing another case of it is the same suppression.
      expectStatus(await call(t.app, 'POST', `/api/v1/stores/${store.domain}/suppressions`, { token: store.token, body: { email: otherCase(complainer), reason: 'complaint' } }), 200);
      assert.equal((await t.database.db.selectFrom('suppressions').select('email').where('store_domain', '=', store.domain).execute()).length, 1);

      const ids = { productId: product(), variantId: variant() };
      expectStatus(await widget(t, { shop: store.domain, ...ids, email: otherCase(complainer) }), 201);
      expectStatus(await report(t, store, [{ ...ids, available: 3, productTitle: 'Complaint mug' }]), 200);
      await t.runWorker();

      assert.deepEqual(await alertsTo(t, store), [], 'no case of a complainer is mailed');
      const [row] = await ledger(t, store);
      assert.equal(row?.status, 'skipped');
      assert.match(row?.outcome ?? '', /suppressed for this store \(complaint\)/);

      // Unsuppressing by any case lifts it.
      const lifted = await call(t.app, 'DELETE', `/api/v1/stores/${store.domain}/suppressions/${encodeURIComponent(otherCase(complainer))}`, { token: store.token });
      assert.equal(lifted.statusCode, 204, lifted.body);
      assert.equal((await t.database.db.selectFrom('suppressions').select('email').where('store_domain', '=', store.domain).execute()).length, 0);
    });

    it('finding 8: two cases of one address make one subscription and get one alert per restock', async () => {
      const store = await storeWithAgent(t.app, t.database, 'dedupe');
      const shopper = uniqueEmail('dedupe');
      const ids = { productId: product(), variantId: variant() };
      expectStatus(await widget(t, { shop: store.domain, ...ids, email: shopper }), 201);
      expectStatus(await widget(t, { shop: store.domain, ...ids, email: otherCase(shopper) }), 201);
      // The whole product, in a third case: another subscription, but the same address.
      expectStatus(await widget(t, { shop: store.domain, productId: ids.productId, email: shopper.toUpperCase() }), 201);
      const rows = await t.database.db.selectFrom('subscriptions').selectAll().where('store_domain', '=', store.domain).execute();
      assert.equal(rows.length, 2, 'the variant once, the product once');
      assert.ok(rows.some((row) => row.email === shopper && row.variant_id === ids.variantId), 'kept as first typed');

      expectStatus(await report(t, store, [{ ...ids, available: 5, productTitle: 'Dedupe mug' }]), 200);
      await t.runWorker();
      assert.equal((await alertsTo(t, store)).length, 1, 'one alert for the address');
      for (const row of rows) assert.equal((await subscriptionRow(t, row.id)).status, 'notified');
    });

    it('finding 8: the frequency cap counts every case of an address', async () => {
      const store = await storeWithAgent(t.app, t.database, 'cap');
      const shopper = uniqueEmail('capped');
      const first = { productId: product(), variantId: variant() };
      const second = { productId: product(), variantId: variant() };
      expectStatus(await widget(t, { shop: store.domain, ...first, email: shopper }), 201);
      expectStatus(await widget(t, { shop: store.domain, ...second, email: otherCase(shopper) }), 201);
      // Apart, so the second restock's worker reads the first alert from the ledger.
      expectStatus(await report(t, store, [{ ...first, available: 2, productTitle: 'First mug' }]), 200);
      await t.runWorker();
      expectStatus(await report(t, store, [{ ...second, available: 2, productTitle: 'Second mug' }]), 200);
      await t.runWorker();
      assert.equal((await alertsTo(t, store)).length, 1, 'one alert within the cap window (60 minutes by default)');
      const waiting = (await ledger(t, store)).filter((row) => row.status === 'queued');
      assert.equal(waiting.length, 1);
      assert.equal(waiting[0]!.outcome, 'waiting for the frequency cap');
    });

    it('finding 8: a customer data request and erasure find every case of an address', async () => {
      const store = await storeWithAgent(t.app, t.database, 'gdpr');
      const customer = uniqueEmail('customer');
      const ids = { productId: product(), variantId: variant() };
      expectStatus(await widget(t, { shop: store.domain, ...ids, email: customer }), 201);
      expectStatus(await call(t.app, 'POST', SUBSCRIBE, { token: store.token, body: { productId: ids.productId, email: otherCase(customer), shop: store.domain } }), 200);
      await t.app.restock.dispatch.suppress(store.domain, otherCase(customer), 'bounce', 'seen in a test');

      const held = await t.app.restock.alerts.customerData(store.domain, customer.toUpperCase());
      assert.equal(held.length, 2, 'both subscriptions, whatever case each was typed in');
      assert.equal(await t.app.restock.alerts.eraseCustomer(store.domain, customer.toUpperCase()), 2);
      await t.app.restock.dispatch.eraseCustomer(store.domain, customer);
      assert.equal((await t.database.db.selectFrom('subscriptions').select('id').where('store_domain', '=', store.domain).execute()).length, 0);
      assert.equal((await t.database.db.selectFrom('suppressions').select('email').where('store_domain', '=', store.domain).execute()).length, 0);
    });

    it('finding 9: an agent is handed only its own subscription, never the storefront’s or another agent’s', async () => {
      const store = await storeWithAgent(t.app, t.database, 'owner');
      const shopper = uniqueEmail('private');
      const ids = { productId: product(), variantId: variant() };
      expectStatus(await widget(t, { shop: store.domain, ...ids, email: shopper }), 201);
      const [fromWidget] = await t.database.db.selectFrom('subscriptions').selectAll().where('store_domain', '=', store.domain).execute();
      assert.ok(fromWidget);

      const stranger = await registerAnonymousAgent(t.app);
      const other = await registerAnonymousAgent(t.app);
      const body = { ...ids, email: otherCase(shopper), shop: store.domain };
      const mine = expectStatus(await call(t.app, 'POST', SUBSCRIBE, { token: stranger.token, body }), 200).subscriptionId;
      const again = expectStatus(await call(t.app, 'POST', SUBSCRIBE, { token: stranger.token, body: { ...body, email: shopper } }), 200).subscriptionId;
      const theirs = expectStatus(await call(t.app, 'POST', SUBSCRIBE, { token: other.token, body }), 200).subscriptionId;
      const bound = expectStatus(await call(t.app, 'POST', SUBSCRIBE, { token: store.token, body }), 200).subscriptionId;
      assert.notEqual(mine, fromWidget.id, 'the storefront’s subscription is not revealed');
      assert.equal(again, mine, 'the agent’s own live subscription comes back');
      assert.notEqual(theirs, mine, 'another agent gets its own');
      assert.ok(![fromWidget.id, mine, theirs].includes(bound), 'the store’s own agent gets its own too');
      expectStatus(await call(t.app, 'GET', `/api/v1/alerts/${mine}`, { token: stranger.token }), 200);
      expectProblem(await call(t.app, 'GET', `/api/v1/alerts/${fromWidget.id}`, { token: stranger.token }), 404, 'not-found');
      assert.deepEqual(await subscriptionRow(t, fromWidget.id), fromWidget, 'the storefront’s row is untouched');

      // One alert for the address, and every waiting subscription of it ends notified, even the
      // third-party ones the restock never reached: one unit, so only one batch of one goes out
      // before the product sells out again.
      expectStatus(await report(t, store, [{ ...ids, available: 1, productTitle: 'Private mug' }]), 200);
      await t.app.restock.worker.turn();
      expectStatus(await report(t, store, [{ ...ids, available: 0 }]), 200);
      await t.runWorker();
      assert.equal((await alertsTo(t, store)).length, 1);
      for (const id of [fromWidget.id, mine, theirs, bound]) assert.equal((await subscriptionRow(t, id)).status, 'notified', id);
    });

    it('finding 9: subscription ids do not carry their creation time', async () => {
      const store = await storeWithAgent(t.app, t.database, 'ids');
      const ids: string[] = [];
      for (let i = 0; i < 12; i++) {
        ids.push(expectStatus(await call(t.app, 'POST', SUBSCRIBE, { token: store.token, body: { productId: product(), email: uniqueEmail('ids'), shop: store.domain } }), 200).subscriptionId);
      }
      for (const id of ids) assert.match(id, /^sub_[0-9a-hjkmnp-tv-z]{26}$/);
      // A time prefix makes ids made within seconds share their first characters (and sort by
      // creation); random ones share nothing.
      assert.ok(new Set(ids.map((id) => id.slice(4, 7))).size > 1, `ids share a prefix: ${ids.join(' ')}`);
    });
  });

  describe(`third-party subscriptions and the store's allowance on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    const ALLOWANCE = 20;
    let t: TestApp;
    before(async () => {
      t = await startTestApp(dialect, { FREE_ALERTS_PER_MONTH: String(ALLOWANCE), BATCH_INTERVAL_SECONDS: '0' });
    });
    after(() => t.close());

    it('finding 6b: an unbound agent’s subscriptions never take the store’s allowance ahead of its own shoppers, and are capped per store', async () => {
      const store = await storeWithAgent(t.app, t.database, 'allowance');
      const ids = { productId: product(), variantId: variant() };
      const junk = await registerAnonymousAgent(t.app);

      // Over MCP, as the junk arrived; the HTTP API answers the same through the same service.
      let accepted = 0;
      for (let i = 0; i < 120; i++) {
        const result = await mcpSubscribe(t, junk.token, { ...ids, email: `junk-${serial}-${i}@example.com`, shop: store.domain });
        if (!result.isError) accepted++;
        else assert.deepEqual([result.structuredContent.type, result.structuredContent.status, result.structuredContent.limit], ['too-many-subscriptions', 409, THIRD_PARTY_LIMIT_PER_STORE]);
      }
      assert.equal(accepted, THIRD_PARTY_LIMIT_PER_STORE, 'the cap stops the agent at its limit for the store');
      expectProblem(await call(t.app, 'POST', SUBSCRIBE, { token: junk.token, body: { ...ids, email: uniqueEmail('over'), shop: store.domain } }), 409, 'too-many-subscriptions');
      // Its own live subscription still comes back at the cap, and other stores are not affected.
      expectStatus(await call(t.app, 'POST', SUBSCRIBE, { token: junk.token, body: { ...ids, email: `junk-${serial}-0@example.com`, shop: store.domain } }), 200);
      expectStatus(await call(t.app, 'POST', SUBSCRIBE, { token: junk.token, body: { ...ids, email: uniqueEmail('elsewhere') } }), 200);
      // Requests in parallel do not slip past the limit together.
      const hasty = await registerAnonymousAgent(t.app);
      const elsewhere = product();
      const parallel = await Promise.all(
        Array.from({ length: THIRD_PARTY_LIMIT_PER_STORE + 10 }, () =>
          call(t.app, 'POST', SUBSCRIBE, { token: hasty.token, body: { productId: elsewhere, email: uniqueEmail('hasty'), shop: store.domain } }),
        ),
      );
      assert.deepEqual(
        parallel.map((res) => res.statusCode).sort(),
        [...Array(THIRD_PARTY_LIMIT_PER_STORE).fill(200), ...Array(10).fill(409)],
      );
      // The store's own agent is not capped.
      for (let i = 0; i <= THIRD_PARTY_LIMIT_PER_STORE; i++) {
        expectStatus(await call(t.app, 'POST', SUBSCRIBE, { token: store.token, body: { productId: product(), email: uniqueEmail('own'), shop: store.domain } }), 200);
      }

      // A real shopper signs up after all of them.
      const shopper = uniqueEmail('real-shopper');
      expectStatus(await widget(t, { shop: store.domain, ...ids, email: shopper }), 201);

      // 100 units × 2: one batch holds everyone; the allowance (20) does not.
      expectStatus(await report(t, store, [{ ...ids, available: 100, productTitle: 'Allowance mug' }]), 200);
      await t.runWorker();

      const mailed = await alertsTo(t, store);
      assert.ok(mailed.includes(shopper), 'the store’s shopper got the alert');
      assert.equal(mailed.length, ALLOWANCE, 'the allowance was used, third parties after the shopper');
      const rows = await ledger(t, store);
      assert.equal(rows[0]!.email, shopper, 'planned first, though subscribed last');
      assert.equal(rows[0]!.third_party, 0);
      assert.match(rows[1]!.reason, /made by an agent not bound to the store, so after the store's own subscribers/);
      const held = rows.filter((row) => row.held_by_plan === 1);
      assert.equal(held.length, THIRD_PARTY_LIMIT_PER_STORE + 1 - ALLOWANCE);
      assert.ok(held.every((row) => row.third_party === 1 && row.status === 'queued'), 'only third-party alerts wait for the plan');
    });

    it('an unbound agent’s pending subscriptions at a double-opt-in store count towards its cap (each costs a confirmation mail)', async () => {
      const store = await storeWithAgent(t.app, t.database, 'confirming');
      await t.app.restock.stores.updateSettings(store.domain, { doubleOptIn: 'always' });
      const junk = await registerAnonymousAgent(t.app);
      const ids = { productId: product() };
      const answers = [];
      for (let i = 0; i <= THIRD_PARTY_LIMIT_PER_STORE; i++) {
        answers.push(await call(t.app, 'POST', SUBSCRIBE, { token: junk.token, body: { ...ids, email: `pending-${serial}-${i}@example.com`, shop: store.domain } }));
      }
      const statuses = answers.slice(0, -1).map((res) => expectStatus(res, 200).status);
      assert.ok(statuses.every((status) => status === 'pending'), `every accepted one waits for its shopper: ${[...new Set(statuses)].join(', ')}`);
      expectProblem(answers.at(-1)!, 409, 'too-many-subscriptions');
      const again = expectStatus(await call(t.app, 'POST', SUBSCRIBE, { token: junk.token, body: { ...ids, email: `pending-${serial}-0@example.com`, shop: store.domain } }), 200);
      assert.equal(again.subscriptionId, expectStatus(answers[0]!, 200).subscriptionId, 'its own pending subscription comes back at the cap');
    });

    it('finding 6b: across restocks sent together, the store’s own shoppers take the allowance before third parties', async () => {
      const store = await storeWithAgent(t.app, t.database, 'across');
      const junk = await registerAnonymousAgent(t.app);
      const wanted = { productId: product(), variantId: variant() };
      const junked = { productId: product(), variantId: variant() };
      const shoppers: string[] = [];
      for (let i = 0; i < 30; i++) {
        expectStatus(await call(t.app, 'POST', SUBSCRIBE, { token: junk.token, body: { ...junked, email: uniqueEmail('junk'), shop: store.domain } }), 200);
        shoppers.push(uniqueEmail('shopper'));
        expectStatus(await widget(t, { shop: store.domain, ...wanted, email: shoppers[i]! }), 201);
      }
      // Two restocks, planned in one turn and claimed together: their queues interleave by position.
      expectStatus(
        await report(t, store, [
          { ...junked, available: 50, productTitle: 'Junked mug' },
          { ...wanted, available: 50, productTitle: 'Wanted mug' },
        ]),
        200,
      );
      await t.runWorker();
      const mailed = await alertsTo(t, store);
      assert.equal(mailed.length, ALLOWANCE);
      assert.ok(mailed.every((address) => shoppers.includes(address)), 'every alert the allowance paid for went to the store’s shoppers');
      const held = (await ledger(t, store)).filter((row) => row.held_by_plan === 1);
      assert.equal(held.filter((row) => row.third_party === 1).length, 30, 'every third-party alert waits for the plan');
    });
  });

  describe(`finding 7: webhooks to translation prefixes on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    let t: TestApp;
    before(async () => {
      t = await startTestApp(dialect, { TENANT_OUTBOUND_ALLOW: '', RESTOCK_ENCRYPTION_KEY: randomBytes(32).toString('base64'), WEBHOOK_TIMEOUT_MS: '1000' });
    });
    after(() => t.close());

    const hooks = (store: StoreAgent) => `/api/v1/stores/${store.domain}/webhooks`;
    const URLS = ['http://[::ffff:0:7f00:1]/hook', 'http://[64:ff9b:1::7f00:1]/hook', 'http://[64:ff9b::a9fe:a9fe]/latest/meta-data/', 'http://[2002:a00:1::]/hook', 'http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/hook'];

    it('finding 7: a webhook URL naming SIIT, local-use NAT64 or an internal IPv4 behind NAT64, 6to4 or Teredo is refused at registration', async () => {
      const store = await storeWithAgent(t.app, t.database, 'translated');
      const before = await t.tableDigests();
      for (const url of URLS) {
        const problem = expectProblem(await call(t.app, 'POST', hooks(store), { token: store.token, body: { url } }), 400, 'forbidden-webhook-destination');
        assert.equal(problem.errors[0].pointer, '/body/url', url);
      }
      assert.deepEqual(await t.tableDigests(), before);
    });

    it('finding 7: the worker does not connect to a translation prefix a stored URL names', async () => {
      const store = await storeWithAgent(t.app, t.database, 'translated-later');
      const created = expectStatus(await call(t.app, 'POST', hooks(store), { token: store.token, body: { url: 'https://hooks.example.com/restock' } }), 201);
      for (const url of URLS.slice(0, 2)) {
        // As a row written before the check was this strict.
        await t.database.db.updateTable('webhook_endpoints').set({ url }).where('id', '=', created.endpointId).execute();
        const id = `ntf_translated_${++serial}`;
        await t.app.restock.events.announce({ storeDomain: store.domain, type: 'alert.sent', id, occurredAt: new Date().toISOString(), data: { notificationId: id } });
        await t.runWorker();
        const { items } = expectStatus(await call(t.app, 'GET', `${hooks(store)}/${created.endpointId}/deliveries`, { token: store.token }), 200);
        const delivery = items.find((item: { eventId: string }) => item.eventId === id);
        assert.ok(delivery, `a delivery of ${id}`);
        assert.equal(delivery.log[0].statusCode, null, url);
        assert.match(delivery.log[0].error, /must not be a loopback, private, link-local or otherwise internal address/, url);
      }
    });
  });

  describe(`migration 0008 on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    it('finding 8: the migration gives existing rows their keys and one suppression and live subscription per key', async () => {
      const { database, drop } = await databaseAt(dialect, '0007_held_by_plan');
      try {
        const shop = 'legacy.myshopify.com';
        const at = (s: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, s)).toISOString();
        const subscription = (id: string, email: string, agentId: string | null, s: number) => ({
          id, product_id: 'gid://shopify/Product/1', variant_id: null, email, status: 'active', store_domain: shop, agent_id: agentId, created_at: at(s), updated_at: at(s), locale: null,
        });
        await database.write(async (trx) => {
          await trx.insertInto('subscriptions').values([
            subscription('sub_a', 'Jane@example.com', null, 1),
            subscription('sub_b', 'jane@example.com', null, 2),
            subscription('sub_c', 'JANE@example.com', 'agt_stranger', 3),
          ] as never).execute();
          await trx.insertInto('suppressions').values([
            { store_domain: shop, email: 'Complainer@example.com', reason: 'complaint', detail: null, created_at: at(1) },
            { store_domain: shop, email: 'complainer@example.com', reason: 'bounce', detail: null, created_at: at(2) },
          ] as never).execute();
          await trx.insertInto('notifications').values({
            id: 'ntf_a', restock_id: 'rst_a', subscription_id: 'sub_c', store_domain: shop, email: 'JANE@example.com', product_id: 'gid://shopify/Product/1', variant_id: null,
            batch: 1, position: 0, status: 'sent', reason: 'seeded', outcome: 'accepted', attempts: 1, next_attempt_at: at(4), lease_owner: null, lease_until: null,
            created_at: at(4), sent_at: at(4), locale: null, held_by_plan: 0,
          } as never).execute();
        });
        assert.ok((await database.migrate()).includes('0008_address_keys'));

        const subscriptions = await database.db.selectFrom('subscriptions').select(['id', 'email', 'email_key', 'status', 'third_party']).orderBy('id').execute();
        assert.deepEqual(subscriptions, [
          { id: 'sub_a', email: 'Jane@example.com', email_key: 'jane@example.com', status: 'active', third_party: 0 },
          { id: 'sub_b', email: 'jane@example.com', email_key: 'jane@example.com', status: 'cancelled', third_party: 0 },
          { id: 'sub_c', email: 'JANE@example.com', email_key: 'jane@example.com', status: 'active', third_party: 1 },
        ]);
        const suppressions = await database.db.selectFrom('suppressions').select(['email', 'email_key', 'reason']).execute();
        assert.deepEqual(suppressions, [{ email: 'Complainer@example.com', email_key: 'complainer@example.com', reason: 'complaint' }]);
        const dispatch = new DispatchRepository(database);
        assert.deepEqual([...(await dispatch.suppressed(shop, ['complainer@example.com']))], [['complainer@example.com', 'complaint']]);
        assert.deepEqual((await dispatch.sentTo(shop, ['jane@example.com'])).map((row) => row.restock_id), ['rst_a']);
        const notification = await database.db.selectFrom('notifications').select(['email_key', 'third_party']).executeTakeFirstOrThrow();
        assert.deepEqual(notification, { email_key: 'jane@example.com', third_party: 1 });
        // The storefront's live subscription is found by any case of the address.
        const again = await new SubscriptionRepository(database).subscribe(
          { productId: 'gid://shopify/Product/1', variantId: null, email: 'jAnE@example.com' },
          { storeDomain: shop, agentId: null, thirdParty: false },
          at(9),
        );
        assert.equal(again.id, 'sub_a');
      } finally {
        await drop();
      }
    });
  });
}

/** A new database migrated only up to `last`, with legacy rows yet to be written into it. */
async function databaseAt(dialect: Dialect, last: string): Promise<{ database: Database; drop: () => Promise<void> }> {
  let database: Database;
  let cleanup: () => Promise<void>;
  if (dialect === 'sqlite') {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'restock-migration-'));
    database = Database.open({ dialect: 'sqlite', file: path.join(dir, 'restock.db'), synchronous: 'FULL', busyTimeoutMs: 200 });
    cleanup = async () => rmSync(dir, { recursive: true, force: true });
  } else {
    const name = `restock_m_${randomBytes(4).toString('hex')}`;
    await pgAdmin(`create database ${name}`);
    database = Database.open({ dialect: 'postgres', url: pgUrlFor(name), poolMax: 2 });
    cleanup = () => pgAdmin(`drop database if exists ${name} with (force)`);
  }
  const bound: Record<string, Migration> = {};
  for (const [name, migration] of Object.entries(migrations)) bound[name] = { up: (db: Kysely<any>) => migration.up(db, dialect) };
  const { error } = await new Migrator({ db: database.db, provider: { getMigrations: async () => bound } }).migrateTo(last);
  if (error) throw error;
  return {
    database,
    drop: async () => {
      await database.close();
      await cleanup();
    },
  };
}
