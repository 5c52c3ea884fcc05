import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from './fixtures/suites.ts';
import type { LightMyRequestResponse } from 'fastify';
import { SignJWT, decodeJwt, decodeProtectedHeader, exportSPKI, generateKeyPair, importJWK, type CryptoKey, type JWK } from 'jose';
import { ID_JAG_TOKEN_TYPE } from '../src/agents/identity-assertions.ts';
import { JWT_BEARER_GRANT } from '../src/agents/metadata.ts';
import { RETIREMENT_SLACK_MS } from '../src/agents/signing-keys.ts';
import { dialectSkip, startTestApp, testDialects, type TestApp } from './fixtures/app.ts';
import { startIdentityProvider, type TestIdentityProvider } from './fixtures/identity-provider.ts';
import { failOnLeakedHandles } from './fixtures/leaks.ts';
import { bearerChallenge, registerAgent, startProcess, storedSigningKeys, type ServiceProcess } from './fixtures/oauth.ts';

failOnLeakedHandles();

const BASE_URL = 'http://restock.test';
const RESOURCE_METADATA = `${BASE_URL}/.well-known/oauth-protected-resource`;
const SUBSCRIBE = '/api/v1/alerts/subscribe';

const now = () => Math.floor(Date.now() / 1000);
const b64json = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');
const withoutUndefined = (record: Record<string, unknown>) =>
  Object.fromEntries(Object.entries(record).filter(([, value]) => value !== undefined));

/** A JWT with `alg: none` and an empty signature, as an attacker would write one by hand. */
const unsigned = (header: Record<string, unknown>, payload: Record<string, unknown>) => `${b64json(header)}.${b64json(payload)}.`;

/** The same header and signature over a payload with some claims changed. */
function tampered(token: string, changes: Record<string, unknown>): string {
  const [header, payload, signature] = token.split('.') as [string, string, string];
  const claims = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'));
  return `${header}.${b64json({ ...claims, ...changes })}.${signature}`;
}

/** RFC 6750 refusal at a protected route: status, problem+json and a Bearer challenge that agree. */
function assertRefused(res: LightMyRequestResponse, expected: { status: number; slug: string; error?: string }) {
  assert.equal(res.statusCode, expected.status, res.body);
  assert.match(res.headers['content-type'] as string, /^application\/problem\+json/);
  const body = res.json();
  assert.equal(body.type, `${BASE_URL}/problems/${expected.slug}`);
  assert.equal(body.status, expected.status);
  assert.equal(body.error, expected.error);
  const challenge = bearerChallenge(res.headers['www-authenticate']);
  assert.equal(challenge.realm, 'restock');
  assert.equal(challenge.error, expected.error);
  assert.equal(challenge.resource_metadata, RESOURCE_METADATA);
  if (expected.error) assert.ok(challenge.error_description, 'an error comes with a description');
  return { body, challenge };
}

const assertInvalidToken = (res: LightMyRequestResponse) => assertRefused(res, { status: 401, slug: 'invalid-token', error: 'invalid_token' });

async function jwksKids(app: ServiceProcess['app']): Promise<string[]> {
  const res = await app.inject({ method: 'GET', url: '/.well-known/jwks.json' });
  return res.json().keys.map((key: JWK) => key.kid);
}

/** What the forgeries are made from: a genuine token and the keys around it. */
interface Forge {
  genuine: string;
  claims: Record<string, unknown>;
  kid: string;
  /** The service's own signing key, taken from its database: near-misses signed with it must still fail. */
  key: CryptoKey;
  publicJwk: JWK;
  publicKey: CryptoKey;
  strangerKey: CryptoKey;
  idp: TestIdentityProvider;
}

function signed(f: Forge, changes: { header?: Record<string, unknown>; claims?: Record<string, unknown>; key?: CryptoKey } = {}): Promise<string> {
  const header = withoutUndefined({ alg: 'ES256', typ: 'at+jwt', kid: f.kid, ...changes.header });
  return new SignJWT(withoutUndefined({ ...f.claims, ...changes.claims }))
    .setProtectedHeader(header as { alg: string })
    .sign(changes.key ?? f.key);
}

/** The classic key-confusion forgery: HMAC keyed with the bytes of our public key. */
function hmacWith(f: Forge, secret: string): Promise<string> {
  return new SignJWT(f.claims).setProtectedHeader({ alg: 'HS256', typ: 'at+jwt', kid: f.kid }).sign(new TextEncoder().encode(secret));
}

/** Each forgery, and what the refusal must say stopped it: the check meant for it, not some later one. */
const accessTokenAttacks: Array<[string, RegExp, (f: Forge) => Promise<string> | string]> = [
  ['alg none, with the claims and kid of a genuine token', /ES256/, (f) => unsigned({ alg: 'none', typ: 'at+jwt', kid: f.kid }, f.claims)],
  ['HS256 keyed with our public JWK as published', /ES256/, (f) => hmacWith(f, JSON.stringify(f.publicJwk))],
  ['HS256 keyed with our public key in PEM', /ES256/, async (f) => hmacWith(f, await exportSPKI(f.publicKey))],
  ['signed with our key but typ JWT', /typ/, (f) => signed(f, { header: { typ: 'JWT' } })],
  ['signed with our key but no typ', /typ/, (f) => signed(f, { header: { typ: undefined } })],
  ['signed with our key but typ of an ID-JAG', /typ/, (f) => signed(f, { header: { typ: 'oauth-id-jag+jwt' } })],
  ['signed with our key but for another resource (aud)', /aud/, (f) => signed(f, { claims: { aud: 'https://api.elsewhere.example' } })],
  ['signed with our key but from another issuer', /iss/, (f) => signed(f, { claims: { iss: 'https://issuer.elsewhere.example' } })],
  ['signed with our key but expired', /expired/, (f) => signed(f, { claims: { iat: now() - 7200, exp: now() - 60 } })],
  ['signed with our key but not valid for an hour (nbf)', /nbf/, (f) => signed(f, { claims: { nbf: now() + 3600 } })],
  ['signed with our key but issued an hour from now (iat)', /iat|future/, (f) => signed(f, { claims: { iat: now() + 3600, exp: now() + 7200 } })],
  ['signed with our key but without jti', /jti/, (f) => signed(f, { claims: { jti: undefined } })],
  ['signed with our key but without scope', /scope/, (f) => signed(f, { claims: { scope: undefined } })],
  ['signed with our key but without kid', /current key/, (f) => signed(f, { header: { kid: undefined } })],
  ['tampered: scope widened, signature kept', /signature/, (f) => tampered(f.genuine, { scope: 'api:read api:write inventory:alerts' })],
  ['tampered: another agent as subject, signature kept', /signature/, (f) => tampered(f.genuine, { sub: 'agt_someoneelse', client_id: 'agt_someoneelse' })],
  ['signed by a stranger key under our kid', /signature/, (f) => signed(f, { key: f.strangerKey })],
  ['signed by a stranger key under a kid we never made', /current key/, (f) => signed(f, { key: f.strangerKey, header: { kid: 'key_forged' } })],
  ['not a JWT at all', /not a JWT/, () => 'not-a-jwt'],
  ['an ID-JAG addressed to us by a trusted issuer', /current key/, (f) => f.idp.mint()],
];

/** What the ID-JAG forgeries are made from. */
interface GrantForge {
  idp: TestIdentityProvider;
  /** An identity provider this service does not trust. */
  stranger: TestIdentityProvider;
  idpKid: string;
  idpJwk: JWK;
  strangerKey: CryptoKey;
  accessToken: string;
}

function assertionBy(g: GrantForge, header: Record<string, unknown>, key: CryptoKey | Uint8Array): Promise<string> {
  return new SignJWT({ client_id: 'agent-client' })
    .setProtectedHeader(header as { alg: string })
    .setIssuer(g.idp.issuer)
    .setSubject('user-forged')
    .setAudience(BASE_URL)
    .setJti(randomUUID())
    .setIssuedAt()
    .setExpirationTime('5m')
    .sign(key);
}

const assertionAttacks: Array<[string, string, (g: GrantForge) => Promise<string> | string]> = [
  ['typ JWT', 'invalid_assertion', (g) => g.idp.mint({}, { typ: 'JWT' })],
  ['typ of an access token', 'invalid_assertion', (g) => g.idp.mint({}, { typ: 'at+jwt' })],
  ['addressed to another service', 'audience_mismatch', (g) => g.idp.mint({ aud: 'https://elsewhere.example' })],
  ['expired two minutes ago', 'expired', (g) => g.idp.mint({ issuedAt: -600, expiresIn: -120 })],
  ['issued ten minutes from now', 'invalid_assertion', (g) => g.idp.mint({ issuedAt: 600, expiresIn: 900 })],
  ['not valid for ten minutes (nbf)', 'invalid_assertion', (g) => g.idp.mint({ notBefore: 600 })],
  ['living longer than a day', 'invalid_assertion', (g) => g.idp.mint({ expiresIn: 2 * 86_400 })],
  ['from an issuer not trusted here', 'issuer_not_enabled', (g) => g.stranger.mint()],
  ['tampered (subject changed), signature kept', 'invalid_signature', async (g) => tampered(await g.idp.mint(), { sub: 'someone-else' })],
  ["signed by a stranger key under the issuer's kid", 'invalid_signature', (g) =>
    assertionBy(g, { alg: 'ES256', typ: 'oauth-id-jag+jwt', kid: g.idpKid }, g.strangerKey)],
  ["HS256 keyed with the issuer's public JWK", 'invalid_signature', (g) =>
    assertionBy(g, { alg: 'HS256', typ: 'oauth-id-jag+jwt', kid: g.idpKid }, new TextEncoder().encode(JSON.stringify(g.idpJwk)))],
  ['alg none', 'invalid_signature', (g) =>
    unsigned({ alg: 'none', typ: 'oauth-id-jag+jwt', kid: g.idpKid }, { iss: g.idp.issuer, sub: 'user-forged', aud: BASE_URL, jti: randomUUID(), iat: now(), exp: now() + 300 })],
  ['an access token of ours', 'invalid_assertion', (g) => g.accessToken],
  ['not a JWT at all', 'invalid_assertion', () => 'not-a-jwt'],
];

for (const dialect of testDialects()) {
  describe(`attacks on the access-token check on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    let idp: TestIdentityProvider;
    let t: TestApp;
    let f: Forge;
    before(async () => {
      idp = await startIdentityProvider({ audience: BASE_URL });
      t = await startTestApp(dialect, { AGENT_TRUSTED_ISSUERS: JSON.stringify([idp.trusted]) });
      const { keys } = await storedSigningKeys(t.database, t.config);
      const { kid, key } = keys.signingKey();
      const published = (await t.app.inject({ method: 'GET', url: '/.well-known/jwks.json' })).json() as { keys: JWK[] };
      const publicJwk = published.keys.find((jwk) => jwk.kid === kid)!;
      f = {
        genuine: t.token,
        claims: decodeJwt(t.token),
        kid,
        key,
        publicJwk,
        publicKey: (await importJWK(publicJwk, 'ES256')) as CryptoKey,
        strangerKey: (await generateKeyPair('ES256')).privateKey,
        idp,
      };
      assert.equal(decodeProtectedHeader(t.token).kid, kid, 'the forgeries start from the key that signs');
    });
    after(async () => {
      await t.close();
      await idp.close();
    });

    const me = (authorization?: string) =>
      t.app.inject({ method: 'GET', url: '/api/agent/me', headers: authorization === undefined ? {} : { authorization } });
    const subscribe = (authorization?: string) =>
      t.app.inject({
        method: 'POST',
        url: SUBSCRIBE,
        headers: { 'content-type': 'application/json', ...(authorization === undefined ? {} : { authorization }) },
        payload: JSON.stringify({ productId: 'gid://shopify/Product/1', email: `attack-${randomUUID()}@example.com` }),
      });

    it('accepts a token signed the way the forgeries are, but untouched (the control)', async () => {
      const token = await signed(f);
      assert.equal((await me(`Bearer ${token}`)).statusCode, 200);
      assert.equal((await subscribe(`Bearer ${token}`)).statusCode, 200);
    });

    for (const [name, why, forge] of accessTokenAttacks) {
      it(`refuses a token ${name}: 401 invalid_token, nothing stored`, async () => {
        const token = await forge(f);
        const before = await t.tableDigests();
        assert.match(assertInvalidToken(await me(`Bearer ${token}`)).body.detail, why);
        assertInvalidToken(await subscribe(`Bearer ${token}`));
        assert.deepEqual(await t.tableDigests(), before);
      });
    }

    it('refuses a revoked token, which worked a moment before', async () => {
      const { token } = await registerAgent(t.app);
      assert.equal((await me(`Bearer ${token}`)).statusCode, 200);
      const revoked = await t.app.inject({
        method: 'POST',
        url: '/oauth/revoke',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        payload: new URLSearchParams({ token }).toString(),
      });
      assert.equal(revoked.statusCode, 200);
      const { body } = assertInvalidToken(await me(`Bearer ${token}`));
      assert.match(body.detail, /revoked/);
    });

    it('refuses a certificate-bound (mtls) token presented without its certificate', async () => {
      const agentId = (await me(`Bearer ${t.token}`)).json().registration_id;
      const { tokens } = await storedSigningKeys(t.database, t.config);
      const issue = (certThumbprint?: string) => tokens.issue({ agentId, scopes: ['api:read', 'api:write'], ttlSeconds: 600, certThumbprint });
      assert.equal((await me(`Bearer ${(await issue()).token}`)).statusCode, 200, 'the same token unbound is accepted');
      const bound = (await issue('x')).token;
      assert.deepEqual(decodeJwt(bound).cnf, { 'x5t#S256': 'x' });
      const { body } = assertInvalidToken(await me(`Bearer ${bound}`));
      assert.match(body.detail, /certificate/);
    });

    describe('the Authorization header', () => {
      it('missing: 401 with a challenge that names no error and points to the resource metadata', async () => {
        const { body } = assertRefused(await me(), { status: 401, slug: 'unauthorized' });
        assert.equal(body.scope, 'api:read');
      });

      it('another scheme (Basic): 401 without an error code', async () => {
        assertRefused(await me(`Basic ${Buffer.from('agent:secret').toString('base64')}`), { status: 401, slug: 'unauthorized' });
      });

      for (const header of ['Bearer a b', 'Bearer', 'Bearer ', `Bearer ${'x'.repeat(10)},${'y'.repeat(10)}`]) {
        it(`malformed (${JSON.stringify(header)}): 400 invalid_request`, async () => {
          assertRefused(await me(header), { status: 400, slug: 'malformed-request', error: 'invalid_request' });
        });
      }

      it('the scheme name is case-insensitive (RFC 7235)', async () => {
        assert.equal((await me(`bearer ${t.token}`)).statusCode, 200);
        assert.equal((await me(`BEARER ${t.token}`)).statusCode, 200);
      });

      it('a valid token without the scope: 403 insufficient_scope naming api:write', async () => {
        const { token } = await registerAgent(t.app, { scope: 'api:read' });
        assert.equal((await me(`Bearer ${token}`)).statusCode, 200);
        const before = await t.tableDigests();
        const { body, challenge } = assertRefused(await subscribe(`Bearer ${token}`), {
          status: 403,
          slug: 'insufficient-scope',
          error: 'insufficient_scope',
        });
        assert.equal(challenge.scope, 'api:write');
        assert.equal(body.scope, 'api:write');
        assert.deepEqual(await t.tableDigests(), before);
      });
    });
  });

  describe(`attacks with identity assertions (ID-JAG) on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    let t: TestApp;
    let g: GrantForge;
    before(async () => {
      const idp = await startIdentityProvider({ audience: BASE_URL });
      const stranger = await startIdentityProvider({ audience: BASE_URL });
      t = await startTestApp(dialect, { AGENT_TRUSTED_ISSUERS: JSON.stringify([idp.trusted]) });
      const idpJwks = (await (await fetch(idp.jwksUri)).json()) as { keys: JWK[] };
      g = {
        idp,
        stranger,
        idpKid: decodeProtectedHeader(await idp.mint()).kid!,
        idpJwk: idpJwks.keys[0]!,
        strangerKey: (await generateKeyPair('ES256')).privateKey,
        accessToken: t.token,
      };
    });
    after(async () => {
      await t.close();
      await g.idp.close();
      await g.stranger.close();
    });

    const register = (assertion: string) =>
      t.app.inject({
        method: 'POST',
        url: '/api/agent/register',
        payload: { type: 'identity_assertion', assertion_type: ID_JAG_TOKEN_TYPE, assertion },
      });
    const exchange = (assertion: string) =>
      t.app.inject({
        method: 'POST',
        url: '/oauth/token',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        payload: new URLSearchParams({ grant_type: JWT_BEARER_GRANT, assertion }).toString(),
      });

    function assertRegistrationRefused(res: LightMyRequestResponse, error: string) {
      assert.equal(res.statusCode, 400, res.body);
      assert.match(res.headers['content-type'] as string, /^application\/problem\+json/);
      const body = res.json();
      assert.equal(body.type, `${BASE_URL}/problems/invalid-assertion`);
      assert.equal(body.error, error);
    }

    function assertGrantRefused(res: LightMyRequestResponse, reason: string) {
      assert.equal(res.statusCode, 400, res.body);
      assert.match(res.headers['content-type'] as string, /^application\/json/);
      assert.equal(res.headers['cache-control'], 'no-store');
      const body = res.json();
      assert.equal(body.error, 'invalid_grant', 'RFC 6749 names every refused grant invalid_grant');
      assert.equal(body.reason, reason);
      assert.ok(body.error_description);
    }

    it('accepts a genuine assertion once, and calls its second use a replay at both endpoints', async () => {
      const assertion = await g.idp.mint({ sub: `user-${randomUUID()}` });
      assert.equal((await register(assertion)).statusCode, 201);
      const before = await t.tableDigests();
      assertRegistrationRefused(await register(assertion), 'replay_detected');
      assertGrantRefused(await exchange(assertion), 'replay_detected');
      assert.deepEqual(await t.tableDigests(), before);

      const exchanged = await g.idp.mint({ sub: `user-${randomUUID()}` });
      assert.equal((await exchange(exchanged)).statusCode, 200);
      assertGrantRefused(await exchange(exchanged), 'replay_detected');
      assertRegistrationRefused(await register(exchanged), 'replay_detected');
    });

    for (const [name, error, forge] of assertionAttacks) {
      it(`refuses an assertion ${name}: ${error}, nothing stored`, async () => {
        const assertion = await forge(g);
        const before = await t.tableDigests();
        assertRegistrationRefused(await register(assertion), error);
        assertGrantRefused(await exchange(assertion), error);
        assert.deepEqual(await t.tableDigests(), before);
      });
    }
  });

  describe(`a signing key rotated out long ago on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    it("keeps the just-rotated key's tokens working, then refuses them once the key has aged out", async () => {
      const t = await startTestApp(dialect);
      const processes: ServiceProcess[] = [];
      const started = async () => {
        const instance = await startProcess(t.config);
        processes.push(instance);
        return instance;
      };
      const me = (instance: ServiceProcess) =>
        instance.app.inject({ method: 'GET', url: '/api/agent/me', headers: { authorization: `Bearer ${t.token}` } });
      try {
        const oldKid = decodeProtectedHeader(t.token).kid!;
        const { keys, lifetimeMs } = await storedSigningKeys(t.database, t.config);
        const newKid = await keys.rotate();

        assert.equal((await me(t)).statusCode, 200, 'the running process still takes it');
        const restarted = await started();
        assert.equal((await me(restarted)).statusCode, 200, 'a process started after the rotation takes it too');
        assert.deepEqual((await jwksKids(restarted.app)).sort(), [oldKid, newKid].sort());

        // Test-only: pretend the rotation happened longer ago than any token the old key signed can live.
        const longAgo = new Date(Date.now() - lifetimeMs - RETIREMENT_SLACK_MS - 60_000).toISOString();
        await t.database.write((trx) => trx.updateTable('signing_keys').set({ retired_at: longAgo }).where('kid', '=', oldKid).execute());

        const later = await started();
        const { body } = assertInvalidToken(await me(later));
        assert.match(body.detail, /current key/);
        assert.deepEqual(await jwksKids(later.app), [newKid], 'the aged-out key is no longer published');
      } finally {
        for (const instance of processes) await instance.close();
        await t.close();
      }
    });
  });
}
