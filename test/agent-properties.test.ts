/**
 * Property tests over the identity endpoints: whatever body reaches registration, claim, the
 * token and revocation endpoints, and whatever `Authorization` header reaches a scoped route,
 * the answer is below 500, carries no stack trace, is a problem (or RFC 6749 error) with the
 * right shape, and a refused request stores nothing. Most generated requests are valid (real
 * claim tokens and codes, ID-JAGs signed by a trusted test issuer, real access tokens), so the
 * handlers' work is checked too: the agent, claim or revocation is stored as asked, and the
 * credential handed out works with the scopes the rules grant.
 *
 *   RESTOCK_PROPERTY_RUNS=1000 npm test -- test/agent-properties.test.ts
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from './fixtures/suites.ts';
import fc from 'fast-check';
import type { LightMyRequestResponse } from 'fastify';
import { failOnLeakedHandles } from './fixtures/leaks.ts';
import { bad, ok, propertyParams, STACK, type Tagged } from './fixtures/properties.ts';
import { dialectSkip, startTestApp, testDialects, type TestApp } from './fixtures/app.ts';
import { codeIn, createStore, uniqueDomain, uniqueEmail, wrongCode } from './fixtures/agents.ts';
import { startIdentityProvider, type TestIdentityProvider } from './fixtures/identity-provider.ts';

failOnLeakedHandles();

const params = propertyParams();
const RUNS = params.numRuns;

const ID_JAG = 'urn:ietf:params:oauth:token-type:id-jag';
const JWT_BEARER = 'urn:ietf:params:oauth:grant-type:jwt-bearer';
const BASE_URL = 'http://restock.test';

/** What an agent holds before its claim, and what a claim adds when the owner names their store (docs/agents.md). */
const PRE_CLAIM = ['api:read', 'api:write'];
const STORE_SCOPES = ['inventory:alerts'];
const KNOWN_SCOPES = [...PRE_CLAIM, ...STORE_SCOPES];

/** Scopes granted for a request: the known names asked for among those allowed, or all allowed when none is asked. */
function granted(requested: string | undefined, allowed: string[]): string[] {
  const asked = [...new Set((requested ?? '').split(' ').filter((name) => KNOWN_SCOPES.includes(name)))];
  return asked.length === 0 ? allowed : allowed.filter((scope) => asked.includes(scope));
}

// ---------------------------------------------------------------------------------------------
// Generated fields, each tagged valid or not, so the expected answer is known before sending.
// ---------------------------------------------------------------------------------------------

/** Left out of the body. */
const ABSENT = undefined;

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

/** A field valid most of the time, else one of its near misses. */
function field(valid: fc.Arbitrary<unknown>, invalid: fc.Arbitrary<unknown>, validWeight = 6): fc.Arbitrary<Tagged> {
  return fc.oneof({ weight: validWeight, arbitrary: valid.map(ok) }, { weight: 1, arbitrary: invalid.map(bad) });
}
const optional = (arb: fc.Arbitrary<unknown>) => fc.oneof(fc.constant(ABSENT), arb);

/** The body the tagged fields make, and whether every field in it is valid. */
function assemble(fields: Record<string, Tagged>): { body: Record<string, unknown>; valid: boolean } {
  const body: Record<string, unknown> = {};
  for (const [name, tagged] of Object.entries(fields)) if (tagged.value !== ABSENT) body[name] = tagged.value;
  return { body, valid: Object.values(fields).every((tagged) => tagged.valid) };
}

const scopeField = field(
  optional(fc.constantFrom('api:read', 'api:read api:write', 'inventory:alerts', 'api:write inventory:alerts', 'api:read unknown:thing', 'nothing:known')),
  fc.constantFrom('', 'api:read  api:write', ' api:read', 'a"b', 's'.repeat(201), 5),
);
const validEmail = fc
  .tuple(fc.stringMatching(/^[a-z0-9][a-z0-9._+-]{0,12}$/).filter((local) => !/\.\.|\.$/.test(local)), fc.constantFrom('example.com', 'Example.ORG'))
  .map(([local, domain]) => `${local}@${domain}`);
const invalidEmail = fc.constantFrom('no-at-sign', 'a@', '@example.com', 'a b@example.com', `${'a'.repeat(250)}@example.com`, '', 7, null);

/** How a generated ID-JAG is made: signed by the trusted issuer and fresh, or refused for a reason. */
type AssertionKind = 'fresh' | 'expired' | 'wrong-audience' | 'garbage' | 'replayed';
const assertionKind = fc.oneof(
  { weight: 6, arbitrary: fc.constant<AssertionKind>('fresh') },
  { weight: 1, arbitrary: fc.constantFrom<AssertionKind>('expired', 'wrong-audience', 'garbage', 'replayed') },
);

const registration = fc.oneof(
  fc
    .record({
      type: fc.constant(ok('anonymous')),
      scope: scopeField,
      requested_credential_type: field(optional(fc.constant('bearer_token')), fc.constantFrom('mtls', 'x509', 5)),
      assertion: field(fc.constant(ABSENT), fc.constantFrom('someone@example.com', 'a.b.c'), 10),
    })
    .map((fields) => ({ method: 'anonymous' as const, ...assemble(fields), assertion: undefined as AssertionKind | undefined })),
  fc
    .record({
      type: field(fc.constant('identity_assertion'), fc.constantFrom('Identity_Assertion', 'verified_email', 5)),
      assertion_type: field(fc.constant('verified_email'), fc.constantFrom(ABSENT, 'email', 'urn:verified_email')),
      assertion: field(validEmail, invalidEmail),
      store: field(optional(fc.constant(uniqueDomain('claimed'))), fc.constantFrom('store_example.com', '-x.myshopify.com', '127.0.0.1', 5)),
      requested_credential_type: field(optional(fc.constant('bearer_token')), fc.constant('mtls')),
      scope: scopeField,
    })
    .map((fields) => ({ method: 'verified_email' as const, ...assemble(fields), assertion: undefined as AssertionKind | undefined })),
  fc
    .record({
      type: field(fc.constant('identity_assertion'), fc.constant('anonymous')),
      assertion_type: field(fc.constant(ID_JAG), fc.constantFrom(ABSENT, 'urn:ietf:params:oauth:token-type:jwt')),
      scope: scopeField,
      kind: assertionKind,
    })
    .map(({ kind, ...fields }) => ({ method: 'id_jag' as const, ...assemble(fields), valid: assemble(fields).valid && kind === 'fresh', assertion: kind })),
  // Bodies of no shape at all: the answer and what it stored are checked whatever they turn out to be.
  fc
    .dictionary(fc.oneof(fc.constantFrom('type', 'assertion_type', 'assertion', 'requested_credential_type', 'scope', 'store'), fc.string({ maxLength: 8 })), oddValue, { maxKeys: 6 })
    .map((body) => ({ method: 'unknown' as const, body: body as Record<string, unknown>, valid: undefined as boolean | undefined, assertion: undefined as AssertionKind | undefined })),
);

const authorizationJunk = fc.oneof(
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
  if (type.startsWith('text/html')) return;
  assert.match(type, /^application\/(problem\+)?json/, label);
  const body = res.json() as Record<string, unknown>;
  assert.equal(typeof body.title, 'string', label);
  assert.equal(body.status, res.statusCode, label);
  if (type.startsWith('application/json')) assert.equal(typeof body.error, 'string', `RFC 6749 error: ${label}`);
}

function form(fields: Record<string, unknown>): string {
  const out = new URLSearchParams();
  for (const [name, value] of Object.entries(fields)) out.append(name, typeof value === 'string' ? value : JSON.stringify(value));
  return out.toString();
}

/** Tables whose digests differ between two snapshots. */
function changedTables(before: Record<string, string>, after: Record<string, string>): string[] {
  return Object.keys(after).filter((table) => after[table] !== before[table]);
}

for (const dialect of testDialects()) {
  describe(`identity endpoints under arbitrary input on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    let t: TestApp;
    let idp: TestIdentityProvider;
    /** ID-JAGs already exchanged once: what a replay sends. */
    const used: string[] = [];
    let subjects = 0;

    before(async () => {
      idp = await startIdentityProvider({ audience: BASE_URL });
      t = await startTestApp(dialect, { AGENT_TRUSTED_ISSUERS: JSON.stringify([idp.trusted]) });
    });
    after(async () => {
      await t.close();
      await idp.close();
    });

    async function assertionOf(kind: AssertionKind): Promise<string> {
      const sub = `subject-${++subjects}`;
      switch (kind) {
        case 'fresh':
          return idp.mint({ sub });
        case 'expired':
          return idp.mint({ sub, issuedAt: -600, expiresIn: -120 });
        case 'wrong-audience':
          return idp.mint({ sub, aud: 'https://elsewhere.example' });
        case 'garbage':
          return 'eyJhbGciOiJub25lIn0.e30.';
        case 'replayed':
          return used.at(-1) ?? (await consumed());
      }
    }

    /** An assertion exchanged once already, so that sending it again is a replay. */
    async function consumed(): Promise<string> {
      const assertion = await idp.mint({ sub: `subject-${++subjects}` });
      const res = await t.app.inject({ method: 'POST', url: '/oauth/token', payload: form({ grant_type: JWT_BEARER, assertion }), headers: { 'content-type': 'application/x-www-form-urlencoded' } });
      assert.equal(res.statusCode, 200, res.body);
      used.push(assertion);
      return assertion;
    }

    const me = (token: string) => t.app.inject({ method: 'GET', url: '/api/agent/me', headers: { authorization: `Bearer ${token}` } });

    /** The credential works on a scoped route, as this agent, with these scopes in force. */
    async function assertCredential(token: string, agentId: string, scopes: string[], what: string) {
      const res = await me(token);
      if (!scopes.includes('api:read')) {
        assert.equal(res.statusCode, 403, `${what}: without api:read: ${res.body}`);
        return;
      }
      assert.equal(res.statusCode, 200, `${what}: ${res.body}`);
      assert.equal(res.json().registration_id, agentId, what);
      assert.deepEqual([...res.json().token_scopes].sort(), [...scopes].sort(), what);
    }

    async function claimMail(email: string) {
      const rows = await t.database.db.selectFrom('mail_outbox').selectAll().where('recipient', '=', email).where('purpose', '=', 'agent-claim-code').execute();
      return rows;
    }

    it('registration answers every body below 500, refuses exactly the invalid ones storing nothing, and stores the agent an accepted one asked for', async (ctx) => {
      const seen: Record<string, number> = {};
      const count = (what: string) => (seen[what] = (seen[what] ?? 0) + 1);
      await fc.assert(
        fc.asyncProperty(registration, async ({ method, body, valid, assertion }) => {
          if (assertion !== undefined) body.assertion = await assertionOf(assertion);
          const what = `register ${JSON.stringify(body).slice(0, 300)}`;
          const before = await t.tableDigests();
          const res = await t.app.inject({ method: 'POST', url: '/api/agent/register', payload: body });
          assertShape(res, what);
          if (valid !== undefined) assert.equal(res.statusCode, valid ? 201 : 400, `${what}: ${res.body.slice(0, 300)}`);
          count(`${method} ${res.statusCode}`);
          if (res.statusCode >= 400) {
            assert.deepEqual(await t.tableDigests(), before, `a refused registration changed the database: ${what}`);
            return;
          }
          assert.equal(res.statusCode, 201, what);
          const answer = res.json();
          const agent = await t.database.db.selectFrom('agents').selectAll().where('id', '=', answer.registration_id).executeTakeFirst();
          assert.ok(agent, `no agent stored for ${what}`);
          if (body.assertion_type === 'verified_email') {
            // Method B: nothing usable until the code mailed to the address comes back.
            assert.deepEqual([agent.method, agent.status, answer.credential], ['verified_email', 'pending', undefined], what);
            const email = String(body.assertion).replace(/@(.*)$/, (_, domain: string) => `@${domain.toLowerCase()}`);
            const attempt = await t.database.db.selectFrom('agent_claim_attempts').selectAll().where('agent_id', '=', agent.id).executeTakeFirstOrThrow();
            assert.deepEqual([attempt.email, attempt.store_domain, attempt.status], [email, (body.store as string | undefined) ?? null, 'initiated'], what);
            const mails = await claimMail(email);
            assert.ok(mails.length >= 1, `no code mailed to ${email}`);
            codeIn(mails.at(-1)!.text_body);
            return;
          }
          const scopes = granted(body.scope as string | undefined, PRE_CLAIM);
          assert.deepEqual([agent.method, agent.status], [body.type === 'anonymous' ? 'anonymous' : 'id_jag', 'active'], what);
          assert.deepEqual(answer.scopes, scopes, what);
          await assertCredential(answer.credential, agent.id, scopes, what);
          if (body.assertion_type === ID_JAG) used.push(body.assertion as string);
        }),
        params,
      );
      ctx.diagnostic(`answers over ${RUNS} bodies: ${JSON.stringify(seen)}`);
      // Registrations that never got past validation would test nothing of what is stored.
      const accepted = Object.entries(seen).filter(([key]) => key.endsWith(' 201')).reduce((sum, [, n]) => sum + n, 0);
      const refused = Object.entries(seen).filter(([key]) => key.endsWith(' 400')).reduce((sum, [, n]) => sum + n, 0);
      assert.ok(accepted >= RUNS * 0.25 && refused >= RUNS * 0.1, JSON.stringify(seen));
      for (const method of ['anonymous', 'verified_email', 'id_jag']) assert.ok((seen[`${method} 201`] ?? 0) >= 3, `${method} accepted too rarely: ${JSON.stringify(seen)}`);
    });

    it('the claim endpoint sends a code for a real claim token, completes the claim with it (binding the owner\'s store), and refuses the rest storing nothing but a wrong try', async (ctx) => {
      const ownedStore = uniqueDomain('owned');
      const owner = uniqueEmail('owner');
      await createStore(t.database, ownedStore, owner);
      const stepOne = fc.record({
        claim_token: field(fc.constant('(real)'), fc.constantFrom(ABSENT, 'ct_not-a-real-token', '', 't'.repeat(201), 5)),
        email: field(fc.oneof(fc.constant(owner), validEmail), invalidEmail),
        store: field(optional(fc.constantFrom(ownedStore, uniqueDomain('strangers'))), fc.constantFrom('store_example.com', 5)),
      });
      const code = fc.oneof(
        { weight: 4, arbitrary: fc.constantFrom('right', ' right ') },
        { weight: 1, arbitrary: fc.constantFrom('wrong', 'malformed', 'none') },
      );
      const seen = { initiated: 0, refused: 0, claimed: 0, claimedForStore: 0, notOwner: 0, wrongCode: 0 };
      await fc.assert(
        fc.asyncProperty(stepOne, code, async (fields, otp) => {
          const registered = (await t.app.inject({ method: 'POST', url: '/api/agent/register', payload: { type: 'anonymous' } })).json();
          const { body, valid } = assemble(fields);
          if (body.claim_token === '(real)') body.claim_token = registered.claim_token;
          const what = `claim ${JSON.stringify(body)}`;
          const before = await t.tableDigests();
          const res = await t.app.inject({ method: 'POST', url: '/api/agent/claim', payload: body });
          assertShape(res, what);
          assert.equal(res.statusCode, valid ? 200 : 400, `${what}: ${res.body.slice(0, 300)}`);
          if (!valid) {
            seen.refused++;
            assert.deepEqual(await t.tableDigests(), before, `a refused claim changed the database: ${what}`);
            return;
          }
          seen.initiated++;
          const email = String(body.email).replace(/@(.*)$/, (_, domain: string) => `@${domain.toLowerCase()}`);
          const attempt = await t.database.db.selectFrom('agent_claim_attempts').selectAll().where('id', '=', res.json().claim_attempt_id).executeTakeFirstOrThrow();
          assert.deepEqual([attempt.agent_id, attempt.email, attempt.store_domain, attempt.status], [registered.registration_id, email, (body.store as string | undefined) ?? null, 'initiated'], what);
          const mail = (await claimMail(email)).sort((a, b) => a.created_at.localeCompare(b.created_at)).at(-1);
          assert.ok(mail, `no code mailed to ${email}`);
          const sentCode = codeIn(mail.text_body);

          const given = { right: sentCode, ' right ': ` ${sentCode} `, wrong: wrongCode(sentCode), malformed: sentCode.slice(1), none: ABSENT }[otp];
          const second = { claim_token: registered.claim_token, ...(given === ABSENT ? {} : { otp: given }) };
          const beforeCode = await t.tableDigests();
          const completed = await t.app.inject({ method: 'POST', url: '/api/agent/claim', payload: second });
          assertShape(completed, `${what} then ${JSON.stringify(second)}`);
          const agent = await t.database.db.selectFrom('agents').selectAll().where('id', '=', registered.registration_id).executeTakeFirstOrThrow();
          const label = `${what} then ${otp}: ${completed.statusCode} ${completed.body.slice(0, 300)}`;
          if (otp === 'none') {
            // The claim token alone asks for another code to the same address.
            assert.equal(completed.statusCode, 200, label);
            assert.equal(completed.json().status, 'initiated', label);
            return;
          }
          if (otp === 'malformed' || otp === 'wrong') {
            assert.equal(completed.statusCode, 400, label);
            // A wrong try is counted (that is what stops guessing); nothing else changes.
            const changed = changedTables(beforeCode, await t.tableDigests());
            assert.deepEqual(changed, otp === 'wrong' ? ['agent_claim_attempts'] : [], label);
            assert.deepEqual([agent.status, agent.email], ['active', null], label);
            if (otp === 'wrong') seen.wrongCode++;
            return;
          }
          const forStore = body.store as string | undefined;
          if (forStore !== undefined && (forStore !== ownedStore || email !== owner)) {
            // Only the store's owner may bind an agent to it.
            assert.equal(completed.statusCode, 403, label);
            assert.deepEqual(await t.tableDigests(), beforeCode, label);
            seen.notOwner++;
            return;
          }
          assert.equal(completed.statusCode, 200, label);
          const claimed = completed.json();
          const scopes = [...PRE_CLAIM, ...(forStore ? STORE_SCOPES : [])];
          assert.deepEqual([claimed.status, claimed.store ?? null, [...claimed.scopes].sort()], ['claimed', forStore ?? null, [...scopes].sort()], label);
          assert.deepEqual([agent.email, agent.store_domain, agent.scopes.split(' ').sort().join(' ')], [email, forStore ?? null, [...scopes].sort().join(' ')], label);
          await assertCredential(claimed.credential, agent.id, scopes, label);
          seen.claimed++;
          if (forStore) seen.claimedForStore++;
        }),
        params,
      );
      ctx.diagnostic(`over ${RUNS} claims: ${JSON.stringify(seen)}`);
      assert.ok(seen.initiated >= RUNS * 0.3 && seen.refused >= RUNS * 0.1, JSON.stringify(seen));
      assert.ok(seen.claimed >= RUNS * 0.1 && seen.claimedForStore >= 1 && seen.notOwner >= 1 && seen.wrongCode >= 1, JSON.stringify(seen));
    });

    it('the claim endpoint answers bodies of no shape (JSON or form) below 500 and changes nothing when refused', async () => {
      const claimBody = fc.dictionary(fc.oneof(fc.constantFrom('claim_token', 'email', 'store', 'otp'), fc.string({ maxLength: 8 })), oddValue, { maxKeys: 6 });
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
        { ...params, numRuns: Math.ceil(RUNS / 3) },
      );
    });

    it('the token endpoint exchanges exactly the valid requests for a working token, in RFC 6749 shape otherwise, storing nothing when refusing', async (ctx) => {
      const request = fc.record({
        grant_type: field(fc.constant(JWT_BEARER), fc.constantFrom(ABSENT, 'password', 'client_credentials', '', `${JWT_BEARER} `)),
        // The token endpoint reads any scope string (RFC 6749 lets it grant less); only its length is limited.
        scope: field(optional(fc.constantFrom('api:read', 'api:read api:write', 'inventory:alerts', '', 'api:read  api:write', 'a"b', 'nothing:known')), fc.constant('s'.repeat(201))),
        kind: fc.oneof({ weight: 6, arbitrary: fc.constant<AssertionKind | 'absent'>('fresh') }, { weight: 1, arbitrary: fc.constantFrom<AssertionKind | 'absent'>('expired', 'wrong-audience', 'garbage', 'replayed', 'absent') }),
      });
      const seen: Record<number, number> = {};
      await fc.assert(
        fc.asyncProperty(request, async ({ kind, ...fields }) => {
          const { body, valid } = assemble(fields);
          if (kind !== 'absent') body.assertion = await assertionOf(kind);
          const expected = valid && kind === 'fresh' ? 200 : 400;
          const what = `/oauth/token ${form(body).slice(0, 300)}`;
          const before = await t.tableDigests();
          const res = await t.app.inject({ method: 'POST', url: '/oauth/token', payload: form(body), headers: { 'content-type': 'application/x-www-form-urlencoded' } });
          assertShape(res, what);
          assert.equal(res.statusCode, expected, `${what}: ${res.body.slice(0, 300)}`);
          seen[res.statusCode] = (seen[res.statusCode] ?? 0) + 1;
          if (expected !== 200) {
            assert.deepEqual(await t.tableDigests(), before, `${what} changed the database`);
            return;
          }
          used.push(body.assertion as string);
          const token = res.json();
          const scopes = granted(body.scope as string | undefined, PRE_CLAIM);
          assert.deepEqual([token.token_type, token.scope], ['Bearer', scopes.join(' ')], what);
          const agent = await t.database.db.selectFrom('agents').selectAll().where('subject', '=', `subject-${subjects}`).executeTakeFirstOrThrow();
          assert.equal(agent.method, 'id_jag', what);
          await assertCredential(token.access_token, agent.id, scopes, what);
        }),
        params,
      );
      ctx.diagnostic(`answers over ${RUNS} token requests: ${JSON.stringify(seen)}`);
      assert.ok((seen[200] ?? 0) >= RUNS * 0.25 && (seen[400] ?? 0) >= RUNS * 0.1, JSON.stringify(seen));
    });

    it('the revocation endpoint revokes a real token at once, answers 200 for any other token, and refuses malformed requests storing nothing', async (ctx) => {
      const request = fc.record({
        token: field(fc.constantFrom('(active)', '(active)', '(revoked)', 'not-a-token', 'eyJhbGciOiJub25lIn0.e30.'), fc.constantFrom(ABSENT, '', 'x'.repeat(8193))),
        token_type_hint: field(optional(fc.constantFrom('access_token', 'refresh_token', 'whatever')), fc.constant('h'.repeat(101))),
      });
      const seen = { revoked: 0, ignored: 0, refused: 0 };
      let lastRevoked: string | undefined;
      await fc.assert(
        fc.asyncProperty(request, async (fields) => {
          const agent = (await t.app.inject({ method: 'POST', url: '/api/agent/register', payload: { type: 'anonymous' } })).json();
          const { body, valid } = assemble(fields);
          const real = body.token === '(active)' || (body.token === '(revoked)' && lastRevoked !== undefined);
          if (body.token === '(active)') body.token = agent.credential;
          if (body.token === '(revoked)') body.token = lastRevoked ?? 'not-a-token';
          const what = `/oauth/revoke ${form(body).slice(0, 200)}`;
          const before = await t.tableDigests();
          const res = await t.app.inject({ method: 'POST', url: '/oauth/revoke', payload: form(body), headers: { 'content-type': 'application/x-www-form-urlencoded' } });
          assertShape(res, what);
          assert.equal(res.statusCode, valid ? 200 : 400, `${what}: ${res.body.slice(0, 300)}`);
          const changed = changedTables(before, await t.tableDigests());
          if (!valid || !real || body.token === lastRevoked) {
            assert.deepEqual(changed, [], `${what} changed the database`);
            if (valid) seen.ignored++;
            else seen.refused++;
            if (valid && body.token === lastRevoked) assert.equal((await me(body.token as string)).statusCode, 401, what);
            return;
          }
          // Revoked at once, and only that token: the agent itself stays registered.
          assert.deepEqual(changed, ['revoked_tokens'], what);
          assert.equal((await me(body.token as string)).statusCode, 401, what);
          seen.revoked++;
          lastRevoked = body.token as string;
        }),
        params,
      );
      ctx.diagnostic(`over ${RUNS} revocations: ${JSON.stringify(seen)}`);
      assert.ok(seen.revoked >= RUNS * 0.2 && seen.ignored >= 1 && seen.refused >= RUNS * 0.05, JSON.stringify(seen));
    });

    it('a scoped route answers a real token as its agent, a revoked or forged one with 401, a token without the scope with 403, and junk with 400/401', async (ctx) => {
      const register = async (scope?: string) => (await t.app.inject({ method: 'POST', url: '/api/agent/register', payload: { type: 'anonymous', ...(scope ? { scope } : {}) } })).json();
      const active = await Promise.all([register(), register(), register('api:read')]);
      const revoked = await register();
      assert.equal((await t.app.inject({ method: 'POST', url: '/oauth/revoke', payload: form({ token: revoked.credential }), headers: { 'content-type': 'application/x-www-form-urlencoded' } })).statusCode, 200);
      const unscoped = await register('inventory:alerts');
      type Case = { header: string; expected: number[]; agent: string | undefined };
      const header: fc.Arbitrary<Case> = fc.oneof(
        { weight: 3, arbitrary: fc.constantFrom(...active).map((agent) => ({ header: `Bearer ${agent.credential}`, expected: [200], agent: agent.registration_id as string }) as Case) },
        { weight: 1, arbitrary: fc.constant<Case>({ header: `Bearer ${revoked.credential}`, expected: [401], agent: undefined }) },
        { weight: 1, arbitrary: fc.constant<Case>({ header: `Bearer ${unscoped.credential}`, expected: [403], agent: undefined }) },
        // A real token changed in one character is a forgery.
        { weight: 1, arbitrary: fc.tuple(fc.constantFrom(...active), fc.nat()).map(([agent, i]) => ({ header: `Bearer ${flip(agent.credential, i)}`, expected: [401], agent: undefined }) as Case) },
        { weight: 2, arbitrary: authorizationJunk.map((junk) => ({ header: junk, expected: [400, 401], agent: undefined }) as Case) },
      );
      const seen: Record<number, number> = {};
      await fc.assert(
        fc.asyncProperty(header, async ({ header: authorization, expected, agent }) => {
          const res = await t.app.inject({ method: 'GET', url: '/api/agent/me', headers: { authorization } });
          const what = `authorization ${JSON.stringify(authorization.slice(0, 80))}`;
          assertShape(res, what);
          assert.ok(expected.includes(res.statusCode), `${res.statusCode} for ${what}: ${res.body.slice(0, 200)}`);
          seen[res.statusCode] = (seen[res.statusCode] ?? 0) + 1;
          if (res.statusCode === 200) assert.equal(res.json().registration_id, agent, what);
          else if (res.statusCode !== 403) assert.match(String(res.headers['www-authenticate']), /^Bearer realm="restock"/);
        }),
        params,
      );
      ctx.diagnostic(`answers over ${RUNS} headers: ${JSON.stringify(seen)}`);
      assert.ok((seen[200] ?? 0) >= RUNS * 0.2 && (seen[401] ?? 0) >= 1 && (seen[403] ?? 0) >= 1, JSON.stringify(seen));
    });
  });
}

/**
 * The text with one character replaced by another of the base64url alphabet. The last character
 * of a segment is left alone: some of its bits are padding, so changing it may change nothing.
 */
function flip(text: string, at: number): string {
  const inside = [...text].map((_, i) => i).filter((i) => text[i] !== '.' && i + 1 < text.length && text[i + 1] !== '.');
  const i = inside[at % inside.length]!;
  const replacement = text[i] === 'A' ? 'B' : 'A';
  return text.slice(0, i) + replacement + text.slice(i + 1);
}
