// The plugin's own tests, on its built files (dist/, what `npm pack` ships): its settings, its
// signature, and how it delivers to Restock, against a loopback server standing in for Restock's
// delivery address. Restock's own suite runs the plugin inside a real Vendure server
// (test/vendure.test.ts at the repository's root).
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import http from 'node:http';
import { createRequire } from 'node:module';
import { after, before, describe, it } from 'node:test';

const require = createRequire(import.meta.url);
const { checkOptions } = require('../dist/options.js');
const { signedHeaders } = require('../dist/signature.js');
const { Deliveries } = require('../dist/deliveries.js');
const { disconnectFromRestock } = require('../dist/index.js');

const KEY = Buffer.alloc(32, 7);
const SECRET = `whsec_${KEY.toString('base64')}`;

describe('settings', () => {
  it('takes Restock’s address, the store and the whsec_ secret, and delivers to /webhooks/vendure/<store>', () => {
    const checked = checkOptions({ restockUrl: 'https://restock.example.com/base', store: 'Shop.Example.com', signingSecret: SECRET });
    assert.equal(checked.deliveryUrl.href, 'https://restock.example.com/base/webhooks/vendure/shop.example.com');
    assert.deepEqual(checked.key, KEY);
    assert.equal(checked.timeoutMs, 10_000);
  });

  it('refuses, at start, what would lose alerts later, naming each setting', () => {
    assert.throws(() => checkOptions({ restockUrl: 'ftp://x', store: 'shop.example.com', signingSecret: SECRET }), /restockUrl/);
    assert.throws(() => checkOptions({ restockUrl: 'https://restock.example.com', store: 'not a domain', signingSecret: SECRET }), /store/);
    assert.throws(() => checkOptions({ restockUrl: 'https://restock.example.com', store: 'shop.example.com', signingSecret: 'secret' }), /signingSecret/);
    assert.throws(() => checkOptions({ restockUrl: undefined, store: undefined, signingSecret: undefined }), /restockUrl.*store.*signingSecret/);
    assert.throws(() => checkOptions({ restockUrl: 'https://restock.example.com', store: 'shop.example.com', signingSecret: SECRET, timeoutMs: 5 }), /timeoutMs/);
  });
});

describe('signature', () => {
  it('is Standard Webhooks’ v1: HMAC-SHA256 of id.timestamp.body under the secret’s key, base64', () => {
    const body = '{"type":"catalog.changed"}';
    const headers = signedHeaders(KEY, body, 'msg_1', new Date('2026-11-29T10:00:00Z'));
    assert.equal(headers['webhook-id'], 'msg_1');
    assert.equal(headers['webhook-timestamp'], String(Date.parse('2026-11-29T10:00:00Z') / 1000));
    const expected = createHmac('sha256', KEY).update(`msg_1.${headers['webhook-timestamp']}.${body}`).digest('base64');
    assert.equal(headers['webhook-signature'], `v1,${expected}`);
  });
});

describe('deliveries', () => {
  let server;
  let url;
  const received = [];
  let answers = [];

  before(async () => {
    server = http.createServer((request, response) => {
      let body = '';
      request.on('data', (chunk) => (body += chunk));
      request.on('end', () => {
        received.push({ path: request.url, headers: request.headers, body });
        response.writeHead(answers.shift() ?? 200, { 'content-type': 'application/json' });
        response.end('{}');
      });
    });
    await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${server.address().port}`;
  });
  after(() => new Promise((resolve) => server.close(resolve)));

  const quiet = { warn() {}, error() {} };
  const options = () => checkOptions({ restockUrl: url, store: 'shop.example.com', signingSecret: SECRET, timeoutMs: 2_000 });

  it('posts each message signed, and tries again after a 503 with the same id', async () => {
    received.length = 0;
    answers = [503];
    const deliveries = new Deliveries(options(), quiet);
    deliveries.send({ type: 'variants.changed', variantIds: ['4'] });
    await deliveries.settled();
    assert.equal(received.length, 2);
    assert.equal(received[0].path, '/webhooks/vendure/shop.example.com');
    assert.equal(received[0].headers['webhook-id'], received[1].headers['webhook-id'], 'one id for every try, so Restock takes it once');
    for (const { headers, body } of received) {
      const signature = createHmac('sha256', KEY).update(`${headers['webhook-id']}.${headers['webhook-timestamp']}.${body}`).digest('base64');
      assert.equal(headers['webhook-signature'], `v1,${signature}`);
      assert.deepEqual(JSON.parse(body), { type: 'variants.changed', variantIds: ['4'] });
    }
  });

  it('a refusal (401: a wrong secret) is not tried again, and is logged', async () => {
    received.length = 0;
    answers = [401];
    const logged = [];
    const deliveries = new Deliveries(options(), { warn: (m) => logged.push(m), error: (m) => logged.push(m) });
    deliveries.send({ type: 'catalog.changed' });
    await deliveries.settled();
    assert.equal(received.length, 1);
    assert.ok(logged.some((m) => /401/.test(m)), logged.join('\n'));
  });

  it('stopping ends the waits between tries', async () => {
    received.length = 0;
    answers = [503, 503, 503, 503];
    const deliveries = new Deliveries(options(), quiet);
    deliveries.send({ type: 'catalog.changed' });
    await new Promise((resolve) => setTimeout(resolve, 100));
    deliveries.stop();
    const started = Date.now();
    await deliveries.settled();
    assert.ok(Date.now() - started < 1_000, 'no wait of a second or more after stop');
    assert.equal(received.length, 1);
  });

  it('disconnectFromRestock sends app.uninstalled, signed, and answers Restock’s status', async () => {
    received.length = 0;
    answers = [200];
    assert.equal(await disconnectFromRestock({ restockUrl: url, store: 'shop.example.com', signingSecret: SECRET }), 200);
    assert.deepEqual(JSON.parse(received[0].body), { type: 'app.uninstalled' });
    assert.match(received[0].headers['webhook-signature'], /^v1,/);
  });
});
