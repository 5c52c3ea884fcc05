/**
 * A store names its own mail server; the service then connects there on the store's behalf.
 * From an attacker's side that setting is a way to run the mail library with options of their
 * choosing (finding 1), to reach the service's own network and read what answers there (finding
 * 2), and to forge mail headers (finding 11). And whoever can read a store's outbox must not
 * read a credential in it (finding 5). These apps run without TENANT_OUTBOUND_ALLOW, as
 * production does, except where a test says it allows loopback to stand for the internet.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import type { LightMyRequestResponse } from 'fastify';
import { SecretBox } from '../../src/core/sealed-secrets.ts';
import { isAllowedDestination, parseOutboundAllowList, STRICT_OUTBOUND } from '../../src/core/net/outbound-guard.ts';
import { storeSettingsPatch } from '../../src/stores/schemas.ts';
import { after, before, describe, it } from '../fixtures/suites.ts';
import { call, expectProblem, expectStatus, storeWithAgent, uniqueEmail, type StoreAgent } from '../fixtures/agents.ts';
import { dialectSkip, startTestApp, testDialects, type TestApp } from '../fixtures/app.ts';
import { failOnLeakedHandles } from '../fixtures/leaks.ts';
import { startSmtpSink, type SmtpSink } from '../fixtures/smtp-sink.ts';

failOnLeakedHandles();

const STRICT = { TENANT_OUTBOUND_ALLOW: '', RESTOCK_ENCRYPTION_KEY: randomBytes(32).toString('base64'), FREQUENCY_CAP_MINUTES: '0', BATCH_INTERVAL_SECONDS: '0' };

/** Query strings and parts the mail library would read as its own options, or that we never read. */
const INJECTIONS = [
  '/?pool=false&sendmail=true&path=/bin/sh&args=-c&args=id',
  '?transport=sendmail',
  '?secure=false&ignoreTLS=true',
  '?tls.rejectUnauthorized=false',
  '?proxy=http://127.0.0.1:8080',
  '?name=mail.example.com',
  '?connectionTimeout=1',
  '?logger=true&debug=true',
  '/some/path',
  '#fragment',
];

/** Hosts inside every range no tenant may reach, as a store would type them. */
const INTERNAL_HOSTS = [
  '127.0.0.1',
  '127.255.255.254',
  '0.0.0.0',
  '10.1.2.3',
  '100.64.0.1',
  '169.254.169.254',
  '172.16.0.1',
  '172.31.255.255',
  '192.168.0.10',
  '192.0.0.8',
  '198.18.0.1',
  '224.0.0.1',
  '255.255.255.255',
  '[::1]',
  '[::]',
  '[fe80::1]',
  '[fc00::1]',
  '[fd00:ec2::254]',
  '[ff02::1]',
  '[::ffff:127.0.0.1]',
  '[::ffff:a9fe:a9fe]',
  '[::ffff:10.0.0.1]',
  '[64:ff9b::7f00:1]',
  '[2002:7f00:1::]',
  '[2001:db8::1]',
  'localhost',
  'LOCALHOST.',
  'mail.localhost',
  'metadata.google.internal',
  'printer.local',
  'intranet',
];

function patchSmtp(t: TestApp, store: StoreAgent, smtpUrl: string): Promise<LightMyRequestResponse> {
  return call(t.app, 'PATCH', `/api/v1/stores/${store.domain}`, { token: store.token, body: { smtpUrl } });
}

describe('finding 2: which addresses a tenant may reach', () => {
  it('finding 2: every private, loopback, link-local, CGNAT, metadata and reserved range is refused, in IPv4, IPv6 and their mapped forms', () => {
    for (const host of INTERNAL_HOSTS.filter((h) => net.isIP(h.replace(/^\[(.*)\]$/, '$1')) !== 0)) {
      assert.equal(isAllowedDestination(host.replace(/^\[(.*)\]$/, '$1'), STRICT_OUTBOUND), false, host);
    }
    for (const address of ['93.184.215.14', '8.8.8.8', '2606:4700:4700::1111', '2a00:1450:4001:82a::200e', '::ffff:8.8.8.8', '64:ff9b::808:808']) {
      assert.equal(isAllowedDestination(address, STRICT_OUTBOUND), true, address);
    }
  });

  it('finding 2: the operator’s allow-list opens exactly the blocks it names', () => {
    const policy = parseOutboundAllowList('127.0.0.1/32, ::1/128');
    assert.equal(isAllowedDestination('127.0.0.1', policy), true);
    assert.equal(isAllowedDestination('::1', policy), true);
    assert.equal(isAllowedDestination('127.0.0.2', policy), false);
    assert.equal(isAllowedDestination('169.254.169.254', policy), false);
    assert.throws(() => parseOutboundAllowList('127.0.0.1'), /not a CIDR block/);
    assert.throws(() => parseOutboundAllowList('10.0.0.0/33'), /not a CIDR block/);
  });
});

for (const dialect of testDialects()) {
  describe(`a store's mail server, as an attacker sets it, on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    let t: TestApp;
    let store: StoreAgent;
    before(async () => {
      t = await startTestApp(dialect, STRICT);
      store = await storeWithAgent(t.app, t.database, 'attacker');
    });
    after(() => t.close());

    it('finding 1: every URL-shaped store setting is checked here', () => {
      // A new setting that names a server must join the injection tests below.
      const urlShaped = Object.keys(storeSettingsPatch.shape).filter((key) => /url|uri|host|endpoint|webhook|server/i.test(key));
      assert.deepEqual(urlShaped, ['smtpUrl']);
    });

    it("finding 1: options in a store's SMTP URL are refused, through the API, and nothing changes", async () => {
      const before = await t.tableDigests();
      for (const injection of INJECTIONS) {
        const problem = expectProblem(await patchSmtp(t, store, `smtp://user:pass@mail.example.com${injection}`), 400, 'validation-failed');
        assert.equal(problem.errors[0].pointer, '/body/smtpUrl', injection);
        assert.ok(!JSON.stringify(problem).includes('pass@'), 'the URL and its password are not repeated');
      }
      assert.deepEqual(await t.tableDigests(), before);
    });

    it('finding 2: a mail server on an internal address is refused when it is set', async () => {
      const before = await t.tableDigests();
      for (const host of INTERNAL_HOSTS) {
        const problem = expectProblem(await patchSmtp(t, store, `smtp://${host}:2525`), 400, 'validation-failed');
        assert.equal(problem.errors[0].pointer, '/body/smtpUrl', host);
      }
      assert.deepEqual(await t.tableDigests(), before);
      for (const host of ['mail.example.com', '93.184.215.14', '[2606:4700:4700::1111]']) {
        expectStatus(await patchSmtp(t, store, `smtps://user:pass@${host}:465`), 200);
      }
      expectStatus(await call(t.app, 'PATCH', `/api/v1/stores/${store.domain}`, { token: store.token, body: { smtpUrl: null } }), 200);
    });

    it('finding 2: a name that resolves to an internal address is refused when connecting, plain or implicit TLS, and nothing reaches the server', async () => {
      const accepted: net.Socket[] = [];
      const server = net.createServer((socket) => {
        accepted.push(socket);
        socket.end('220 local-service-banner ready\r\n');
      });
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      try {
        const { port } = server.address() as net.AddressInfo;
        for (const scheme of ['smtp', 'smtps']) {
          const shop = await storeWithAgent(t.app, t.database, 'rebind');
          // As a row written before the check, or a name whose DNS answer changed since: `localhost` resolves to loopback.
          await sealDirectly(t, shop.domain, `${scheme}://localhost:${port}`);
          const outcome = await restockAndOutcome(t, shop);
          assert.match(outcome, /internal network address/, scheme);
          assert.doesNotMatch(outcome, /banner|127\.0\.0\.1|::1|localhost/);
        }
        assert.equal(accepted.length, 0, 'no connection reached the internal server');
      } finally {
        await new Promise((resolve) => server.close(resolve));
      }
    });

    it('finding 5: sign-in links and claim codes never appear in a store’s outbox, through the API or the dashboard', async () => {
      const owner = store.owner;
      assert.equal((await t.app.inject({ method: 'POST', url: '/dashboard/sign-in', headers: { 'content-type': 'application/x-www-form-urlencoded' }, payload: `shop=${store.domain}` })).statusCode, 200);
      const signInMail = await t.database.db.selectFrom('mail_outbox').selectAll().where('recipient', '=', owner).where('purpose', '=', 'dashboard-sign-in').executeTakeFirst();
      assert.ok(signInMail, 'the link was mailed');
      const listed = expectStatus(await call(t.app, 'GET', `/api/v1/stores/${store.domain}/outbox`, { token: store.token }), 200);
      const purposes = (listed.items as Array<{ purpose: string; text: string }>).map((item) => item.purpose);
      assert.ok(!purposes.includes('dashboard-sign-in') && !purposes.includes('agent-claim-code'), purposes.join(','));
      assert.ok(!JSON.stringify(listed).includes('/dashboard/sign-in/'), 'no link in any listed mail');

      // The owner's own dashboard (embedded mode shows the outbox) lists and opens nothing of it either.
      const link = /http:\/\/restock\.test(\/dashboard\/sign-in\/[A-Za-z0-9_-]+)/.exec(signInMail.text_body)![1]!;
      const used = await t.app.inject({ method: 'POST', url: link, headers: { 'content-type': 'application/x-www-form-urlencoded' }, payload: '' });
      const cookie = [used.headers['set-cookie'] ?? []].flat().find((line) => line.startsWith('restock_dashboard='))!.split(';')[0]!;
      const page = await t.app.inject({ method: 'GET', url: '/dashboard/outbox', headers: { cookie } });
      assert.equal(page.statusCode, 200);
      assert.ok(!page.body.includes('/dashboard/sign-in/') && !page.body.includes(signInMail.id), 'the dashboard lists no credential mail');
      assert.equal((await t.app.inject({ method: 'GET', url: `/dashboard/outbox/${signInMail.id}`, headers: { cookie } })).statusCode, 404);
    });
  });

  describe(`what a store's mail server answers, on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    // Loopback stands for the internet here, as the operator's allow-list lets it.
    let t: TestApp;
    let sink: SmtpSink;
    before(async () => {
      sink = await startSmtpSink();
      t = await startTestApp(dialect, { ...STRICT, TENANT_OUTBOUND_ALLOW: '127.0.0.1/32' });
    });
    after(async () => {
      await t.close();
      await sink.close();
    });

    it('finding 2: a server that is not a mail server, or refuses, is summarised in our words, never echoed', async () => {
      const server = net.createServer((socket) => socket.end('INFO {"server_id":"NSECRETBANNER","version":"2.10.7","auth_required":true}\r\n'));
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      try {
        const shop = await storeWithAgent(t.app, t.database, 'banner');
        expectStatus(await patchSmtp(t, shop, `smtp://127.0.0.1:${(server.address() as net.AddressInfo).port}`), 200);
        const outcome = await restockAndOutcome(t, shop);
        assert.match(outcome, /mail server/);
        assert.doesNotMatch(outcome, /SECRETBANNER|INFO|server_id|version/);
      } finally {
        await new Promise((resolve) => server.close(resolve));
      }
    });

    it('finding 11: a sender name ending in a backslash still makes one well-formed From and MAIL FROM', async () => {
      const shop = await storeWithAgent(t.app, t.database, 'sender');
      expectStatus(await call(t.app, 'PATCH', `/api/v1/stores/${shop.domain}`, { token: shop.token, body: { smtpUrl: sink.url, senderName: 'Shop \\' } }), 200);
      const title = `Backslash ${randomBytes(3).toString('hex')}`;
      await subscribeAndRestock(t, shop, title);
      const mail = await sink.waitFor((m) => m.subject.includes(title));
      assert.equal(mail.envelopeFrom, 'alerts@restock.localhost');
      assert.match(mail.headers.from!, /^"Shop \\\\" <alerts@restock\.localhost>$/);
    });
  });
}

/** Stores a URL as a row written before the settings checked it would hold it. */
async function sealDirectly(t: TestApp, domain: string, smtpUrl: string): Promise<void> {
  const sealed = await SecretBox.fromKey(STRICT.RESTOCK_ENCRYPTION_KEY).seal(smtpUrl);
  await t.database.db.updateTable('stores').set({ smtp_url_sealed: sealed }).where('domain', '=', domain).execute();
}

async function subscribeAndRestock(t: TestApp, store: StoreAgent, title: string) {
  const ids = { productId: `gid://shopify/Product/${Date.now()}${randomBytes(2).readUInt16BE()}`, variantId: null };
  expectStatus(await call(t.app, 'POST', '/api/v1/alerts/subscribe', { token: store.token, body: { productId: ids.productId, email: uniqueEmail('shopper'), shop: store.domain } }), 200);
  expectStatus(await call(t.app, 'POST', `/api/v1/stores/${store.domain}/inventory`, { token: store.token, body: { items: [{ productId: ids.productId, available: 3, productTitle: title }] } }), 200);
  await t.runWorker();
}

/** Subscribes one shopper, restocks, runs the worker, and returns what the ledger says of the alert. */
async function restockAndOutcome(t: TestApp, store: StoreAgent): Promise<string> {
  await subscribeAndRestock(t, store, `Probe ${randomBytes(3).toString('hex')}`);
  const row = await t.database.db.selectFrom('notifications').select(['outcome', 'status']).where('store_domain', '=', store.domain).executeTakeFirstOrThrow();
  assert.notEqual(row.status, 'sent');
  return row.outcome ?? '';
}
