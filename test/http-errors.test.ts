import assert from 'node:assert/strict';
import { after, before, describe, it } from './fixtures/suites.ts';
import type { LightMyRequestResponse } from 'fastify';
import { failOnLeakedHandles } from './fixtures/leaks.ts';
import { dialectSkip, startTestApp, testDialects, type TestApp } from './fixtures/app.ts';

failOnLeakedHandles();

const SUBSCRIBE = '/api/v1/alerts/subscribe';
const valid = JSON.stringify({ productId: 'gid://shopify/Product/9', email: 'errors@example.com' });

function assertProblem(res: LightMyRequestResponse, status: number, slug: string) {
  assert.equal(res.statusCode, status, res.body);
  assert.match(res.headers['content-type'] as string, /^application\/problem\+json/);
  const problem = res.json();
  assert.equal(problem.type, `http://restock.test/problems/${slug}`);
  assert.equal(problem.status, status);
  assert.equal(typeof problem.title, 'string');
  assert.equal(typeof problem.detail, 'string');
  assert.equal(problem.requestId, res.headers['x-request-id']);
  assert.doesNotMatch(res.body, /\n\s+at |\.ts:\d+/, 'no stack trace');
  return problem;
}

// HTTP framing does not depend on the database; one dialect is enough here.
const dialect = testDialects()[0]!;

describe(`HTTP errors (${dialect})`, { skip: dialectSkip(dialect) }, () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp(dialect);
  });
  after(() => t.close());

  it('unknown routes answer 404 problem+json', async () => {
    assertProblem(await t.inject({ method: 'GET', url: '/nope' }), 404, 'not-found');
    assertProblem(await t.inject({ method: 'GET', url: '/api/v1/nothing/here' }), 404, 'not-found');
  });

  it('a known path asked with a method it does not answer is 405 problem+json with Allow', async () => {
    const before = await t.tableDigests();
    const put = await t.inject({ method: 'PUT', url: SUBSCRIBE, payload: valid });
    assertProblem(put, 405, 'method-not-allowed');
    // GET and DELETE reach /api/v1/alerts/:subscriptionId with the id "subscribe", as the router does.
    assert.equal(put.headers.allow, 'DELETE, GET, HEAD, POST');
    const register = await t.inject({ method: 'GET', url: '/api/agent/register' });
    assertProblem(register, 405, 'method-not-allowed');
    assert.match(String(register.headers.allow), /\bPOST\b/);
    // A path with a parameter: every method registered for the pattern is allowed.
    const patch = await t.inject({ method: 'PATCH', url: '/api/v1/alerts/sub_123' });
    assertProblem(patch, 405, 'method-not-allowed');
    assert.equal(patch.headers.allow, 'DELETE, GET, HEAD');
    assert.deepEqual(await t.tableDigests(), before);
  });

  it('a body over 16 KiB answers 413 and stores nothing', async () => {
    const before = await t.tableDigests();
    const big = JSON.stringify({ productId: 'gid://shopify/Product/9', email: 'big@example.com', pad: 'x'.repeat(16 * 1024) });
    const problem = assertProblem(
      await t.inject({ method: 'POST', url: SUBSCRIBE, payload: big, headers: { 'content-type': 'application/json' } }),
      413,
      'payload-too-large',
    );
    assert.equal(problem.limitBytes, 16384);
    assert.deepEqual(await t.tableDigests(), before);
  });

  it('a body just under the limit is read', async () => {
    const body = JSON.stringify({ productId: 'gid://shopify/Product/9', email: 'edge@example.com', pad: '' });
    const padded = body.replace('"pad":""', `"pad":"${'x'.repeat(16 * 1024 - body.length)}"`);
    assert.equal(Buffer.byteLength(padded), 16 * 1024);
    const res = await t.inject({ method: 'POST', url: SUBSCRIBE, payload: padded, headers: { 'content-type': 'application/json' } });
    assert.equal(res.statusCode, 200);
  });

  for (const type of ['text/plain', 'application/xml', 'application/x-www-form-urlencoded']) {
    it(`${type} answers 415`, async () => {
      assertProblem(await t.inject({ method: 'POST', url: SUBSCRIBE, payload: valid, headers: { 'content-type': type } }), 415, 'unsupported-media-type');
    });
  }

  it('JSON with a charset is accepted', async () => {
    const res = await t.inject({ method: 'POST', url: SUBSCRIBE, payload: valid, headers: { 'content-type': 'application/json; charset=utf-8' } });
    assert.equal(res.statusCode, 200);
  });

  const malformed: Array<[string, string]> = [
    ['truncated JSON', '{"productId": "gid://shopify/Product/9", '],
    ['a trailing comma', '{"email": "a@example.com",}'],
    ['single quotes', "{'email': 'a@example.com'}"],
    ['an empty body', ''],
    ['NaN', '{"email": NaN}'],
  ];
  for (const [name, payload] of malformed) {
    it(`${name} answers 400`, async () => {
      const res = await t.inject({ method: 'POST', url: SUBSCRIBE, payload, headers: { 'content-type': 'application/json' } });
      assert.equal(res.statusCode, 400, res.body);
      assert.match(res.json().type, /problems\/(malformed-request|validation-failed)$/);
    });
  }

  it('a POST with no body and no content type is a validation failure', async () => {
    const problem = assertProblem(await t.inject({ method: 'POST', url: SUBSCRIBE }), 400, 'validation-failed');
    assert.equal(problem.errors[0].pointer, '/body');
  });

  it('prototype pollution keys are refused', async () => {
    const res = await t.inject({
      method: 'POST', url: SUBSCRIBE, headers: { 'content-type': 'application/json' },
      payload: '{"productId":"gid://shopify/Product/9","email":"p@example.com","__proto__":{"admin":true}}',
    });
    assert.equal(res.statusCode, 400);
    assert.equal(({} as Record<string, unknown>).admin, undefined);
  });

  it('echoes a sane X-Request-Id and replaces an unsafe one', async () => {
    const kept = await t.inject({ method: 'GET', url: '/api/health', headers: { 'x-request-id': 'abc-123' } });
    assert.equal(kept.headers['x-request-id'], 'abc-123');
    const replaced = await t.inject({ method: 'GET', url: '/api/health', headers: { 'x-request-id': 'a b<script>' } });
    assert.match(replaced.headers['x-request-id'] as string, /^[0-9a-f-]{36}$/);
  });

  it('problem types are explained at their URI', async () => {
    const problem = (await t.inject({ method: 'GET', url: '/nope' })).json();
    const res = await t.inject({ method: 'GET', url: new URL(problem.type).pathname });
    assert.equal(res.statusCode, 200);
    assert.match(res.body, /Not found/);
  });
});
