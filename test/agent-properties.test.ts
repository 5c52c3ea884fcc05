/**
 * Property tests over the identity endpoints: whatever body reaches registration, claim, the
 * token and revocation endpoints, and whatever `Authorization` header reaches a scoped route,
 * the answer is below 500, carries no stack trace, is a problem (or RFC 6749 error) with the
 * right shape, and a refused request stores nothing.
 *
 *   RESTOCK_PROPERTY_RUNS=1000 npm test -- test/agent-properties.test.ts
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import type { LightMyRequestResponse } from 'fastify';
import { failOnLeakedHandles } from './fixtures/leaks.ts';
import { startTestApp, testDialects, type TestApp } from './fixtures/app.ts';

failOnLeakedHandles();

const RUNS = Number(process.env.RESTOCK_PROPERTY_RUNS ?? 150);
const SEED = process.env.RESTOCK_PROPERTY_SEED === undefined ? undefined : Number(process.env.RESTOCK_PROPERTY_SEED);
const params = { numRuns: RUNS, ...(SEED === undefined ? {} : { seed: SEED }) };
const STACK = /\n\s*at \S|node:internal|node_modules|\.ts:\d+/;
const ID_JAG = 'urn:ietf:params:oauth:token-type:id-jag';

/** Values that sit near the edges of every field: right names with wrong types, odd strings. */
const oddValue = fc.oneof(
  fc.string({ maxLength: 40 }),
  fc.constantFrom('', ' ', 'anonymous', 'identity_assertion', ID_JAG, 'verified_email', 'mtls', 'bearer_token', 'a@b.co', 'x.myshopify.com', '123456', 'api:read api:write', 'eyJhbGciOiJub25lIn0.e30.', 'a.b.c'),
  fc.integer(),
  fc.boolean(),
  fc.constant(null),
  fc.array(fc.string({ maxLength: 5 }), { maxLength: 3 }),
  fc.dictionary(fc.string({ maxLength: 5 }), fc.string({ maxLength: 5 }), { maxKeys: 2 }),
);

function bodyOf(keys: string[]) {
  return fc.dictionary(fc.oneof(fc.constantFrom(...keys), fc.string({ maxLength: 8 })), oddValue, { maxKeys: 6 });
}

const registerBody = bodyOf(['type', 'assertion_type', 'assertion', 'requested_credential_type', 'scope', 'store']);
const claimBody = bodyOf(['claim_token', 'email', 'store', 'otp']);
const tokenForm = bodyOf(['grant_type', 'assertion', 'scope', 'token', 'token_type_hint']);

const authorization = fc.oneof(
  fc.string({ maxLength: 60 }),
  fc.string({ maxLength: 60 }).map((s) => `Bearer ${s}`),
  fc.constantFrom('Bearer', 'Bearer ', 'bearer x', 'Basic dXNlcjpwYXNz', 'Bearer a b', 'Bearer eyJhbGciOiJub25lIn0.e30.', 'Bearer a.b.c', 'Bearer ====', `Bearer ${'a'.repeat(5000)}`),
);

function assertShape(res: LightMyRequestResponse, what: string) {
  const label = `${what}: ${res.statusCode} ${res.body.slice(0, 300)}`;
  assert.ok(res.statusCode < 500, label);
  assert.ok(!STACK.test(res.body), `stack trace: ${label}`);
  if (res.statusCode < 400) return;
  const type = String(res.headers['content-type']);
  assert.match(type, /^application\/(problem\+)?json/, label);
  const body = res.json() as Record<string, unknown>;
  assert.equal(typeof body.title, 'string', label);
  assert.equal(body.status, res.statusCode, label);
  if (type.startsWith('application/json')) assert.equal(typeof body.error, 'string', `RFC 6749 error: ${label}`);
}

function form(fields: Record<string, unknown>): string {
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(fields)) params.append(name, typeof value === 'string' ? value : JSON.stringify(value));
  return params.toString();
}

for (const dialect of testDialects()) {
  describe(`identity endpoints under arbitrary input on ${dialect}`, () => {
    let t: TestApp;
    before(async () => {
      t = await startTestApp(dialect);
    });
    after(() => t.close());

    it('registration answers every body below 500, and a refused one stores nothing', async () => {
      await fc.assert(
        fc.asyncProperty(registerBody, async (body) => {
          const before = await t.tableDigests();
          const res = await t.app.inject({ method: 'POST', url: '/api/agent/register', payload: body });
          assertShape(res, `register ${JSON.stringify(body)}`);
          if (res.statusCode >= 400) assert.deepEqual(await t.tableDigests(), before, 'a refused registration changed the database');
        }),
        params,
      );
    });

    it('the claim endpoint answers every body (JSON or form) below 500 and changes nothing when refused', async () => {
      await fc.assert(
        fc.asyncProperty(claimBody, fc.boolean(), async (body, asForm) => {
          const before = await t.tableDigests();
          const res = await t.app.inject({
            method: 'POST',
            url: '/api/agent/claim',
            payload: asForm ? form(body) : body,
            headers: asForm ? { 'content-type': 'application/x-www-form-urlencoded' } : {},
          });
          assert.ok(res.statusCode < 500 && !STACK.test(res.body), `claim: ${res.statusCode} ${res.body.slice(0, 300)}`);
          if (res.statusCode >= 400) assert.deepEqual(await t.tableDigests(), before, 'a refused claim changed the database');
        }),
        params,
      );
    });

    it('the token and revocation endpoints answer every form in RFC 6749 shape, never 5xx', async () => {
      await fc.assert(
        fc.asyncProperty(tokenForm, fc.constantFrom('/oauth/token', '/oauth/revoke'), async (fields, url) => {
          const before = await t.tableDigests();
          const res = await t.app.inject({ method: 'POST', url, payload: form(fields), headers: { 'content-type': 'application/x-www-form-urlencoded' } });
          assertShape(res, `${url} ${form(fields)}`);
          if (url === '/oauth/token') assert.notEqual(res.statusCode, 200, 'a token for no valid assertion');
          assert.deepEqual(await t.tableDigests(), before, `${url} changed the database`);
        }),
        params,
      );
    });

    it('a scoped route answers any Authorization header with 400/401, never more', async () => {
      await fc.assert(
        fc.asyncProperty(authorization, async (header) => {
          const res = await t.app.inject({ method: 'GET', url: '/api/agent/me', headers: { authorization: header } });
          assertShape(res, `authorization ${JSON.stringify(header.slice(0, 80))}`);
          assert.ok([400, 401].includes(res.statusCode), `${res.statusCode} for ${JSON.stringify(header.slice(0, 80))}`);
          assert.match(String(res.headers['www-authenticate']), /^Bearer realm="restock"/);
        }),
        params,
      );
    });
  });
}
