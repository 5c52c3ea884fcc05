import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomInt, randomUUID } from 'node:crypto';
import os from 'node:os';
import { after, before, describe, it } from './fixtures/suites.ts';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import type { LightMyRequestResponse } from 'fastify';
import { SignJWT, createLocalJWKSet, decodeJwt, decodeProtectedHeader, generateKeyPair, jwtVerify, type JWK } from 'jose';
import {
  None,
  ResponseBodyError,
  WWWAuthenticateChallengeError,
  allowInsecureRequests,
  discoveryRequest,
  genericTokenEndpointRequest,
  processDiscoveryResponse,
  processGenericTokenEndpointResponse,
  processResourceDiscoveryResponse,
  processRevocationResponse,
  protectedResourceRequest,
  resourceDiscoveryRequest,
  revocationRequest,
  type AuthorizationServer,
  type Client,
  type ResourceServer,
} from 'oauth4webapi';
import { ID_JAG_TOKEN_TYPE } from '../src/agents/identity-assertions.ts';
import { JWT_BEARER_GRANT } from '../src/agents/metadata.ts';
import { createTestDatabase, dialectSkip, startTestApp, testConfig, testDialects, type TestApp } from './fixtures/app.ts';
import { failOnLeakedHandles } from './fixtures/leaks.ts';
import { bearerChallenge, registerAgent, startListeningApp, startProcess, type ListeningApp, type ServiceProcess } from './fixtures/oauth.ts';
import { REDIS_URL, deleteKeys, redisAvailable } from './fixtures/redis.ts';

failOnLeakedHandles();

const BIN = fileURLToPath(new URL('../bin/restock.js', import.meta.url));
const redisUp = await redisAvailable();
const client: Client = { client_id: 'agent-client' };
// The service listens on plain http on loopback; the client library refuses that unless told.
// A test-only allowance: every other check of the library (issuer, resource, content type,
// JSON shape) still runs, and a deployment's BASE_URL is https.
const insecure = { [allowInsecureRequests]: true };

interface AgentAuth {
  skill: string;
  register_uri: string;
  claim_uri: string;
  revocation_uri: string;
  identity_types_supported: string[];
  anonymous: { credential_types_supported: string[]; claim_uri: string; rate_limit: { requests_per_minute: number } };
  identity_assertion: {
    assertion_types_supported: string[];
    verified_email: { credential_types_supported: string[]; claim_uri: string };
  } & Record<string, { credential_types_supported: string[]; revocation_uri: string; trusted_issuers: string[] }>;
}

async function discover(baseUrl: string, algorithm: 'oauth2' | 'oidc'): Promise<AuthorizationServer> {
  const issuer = new URL(baseUrl);
  return processDiscoveryResponse(issuer, await discoveryRequest(issuer, { algorithm, ...insecure }));
}

async function discoverResource(baseUrl: string): Promise<{ metadata: ResourceServer; url: string }> {
  const resource = new URL(baseUrl);
  const response = await resourceDiscoveryRequest(resource, insecure);
  return { metadata: await processResourceDiscoveryResponse(resource, response), url: response.url };
}

/** The challenge a protected-resource call was refused with, as an OAuth client library reads it. */
async function refusal(request: Promise<Response>) {
  try {
    const response = await request;
    assert.fail(`expected a WWW-Authenticate challenge, got ${response.status}`);
  } catch (err) {
    if (!(err instanceof WWWAuthenticateChallengeError)) throw err;
    assert.equal(err.cause.length, 1);
    const [challenge] = err.cause;
    assert.equal(challenge!.scheme, 'bearer');
    return { status: err.status, parameters: challenge!.parameters, body: await err.response.json(), contentType: err.response.headers.get('content-type') };
  }
}

/** A token-endpoint error as the client library surfaces it. */
async function assertOAuthError(request: Promise<unknown>, error: string, reason?: string) {
  await assert.rejects(request, (err: unknown) => {
    assert.ok(err instanceof ResponseBodyError, `expected a ResponseBodyError, got ${String(err)}`);
    assert.equal(err.status, 400);
    assert.equal(err.error, error);
    assert.ok(err.error_description, 'error_description explains it');
    assert.equal(err.cause.reason, reason);
    return true;
  });
}

function assertRateLimited(res: LightMyRequestResponse, limit: number, windowSeconds: number) {
  assert.equal(res.statusCode, 429, res.body);
  assert.match(res.headers['content-type'] as string, /^application\/problem\+json/);
  const retryAfter = Number(res.headers['retry-after']);
  assert.ok(Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= windowSeconds, `Retry-After: ${res.headers['retry-after']}`);
  assert.equal(res.headers['ratelimit-limit'], String(limit));
  assert.equal(res.headers['ratelimit-remaining'], '0');
  assert.ok(Number(res.headers['ratelimit-reset']) <= windowSeconds, `RateLimit-Reset: ${res.headers['ratelimit-reset']}`);
  assert.match(res.headers['ratelimit-policy'] as string, new RegExp(`\\b${limit};w=${windowSeconds}\\b`));
  const body = res.json();
  assert.equal(body.type, 'http://restock.test/problems/rate-limited');
  assert.equal(body.status, 429);
}

const kidOf = (token: string) => decodeProtectedHeader(token).kid!;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const me = (instance: ServiceProcess, token: string) =>
  instance.app.inject({ method: 'GET', url: '/api/agent/me', headers: { authorization: `Bearer ${token}` } });

async function jwksKids(instance: ServiceProcess): Promise<string[]> {
  const res = await instance.app.inject({ method: 'GET', url: '/.well-known/jwks.json' });
  return res.json().keys.map((key: JWK) => key.kid).sort();
}

/** `restock keys rotate`, as an operator runs it next to the running processes. Returns the new kid. */
async function rotateKeysWithCommand(databaseUrl: string): Promise<string> {
  const { stdout } = await promisify(execFile)(process.execPath, [BIN, 'keys', 'rotate'], {
    env: { PATH: process.env.PATH, HOME: process.env.HOME, DATABASE_URL: databaseUrl, DATA_DIR: os.tmpdir(), LOG_LEVEL: 'silent' },
    timeout: 60_000,
  });
  const kid = /New signing key (\S+)\./.exec(stdout)?.[1];
  assert.ok(kid, stdout);
  return kid;
}

for (const dialect of testDialects()) {
  describe(`OAuth with a standard client on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    let s: ListeningApp;
    let as: AuthorizationServer;
    before(async () => {
      s = await startListeningApp(dialect);
      as = await discover(s.baseUrl, 'oauth2');
    });
    after(() => s.close());

    const api = (token: string, method = 'GET', path = '/api/agent/me', body?: unknown) =>
      protectedResourceRequest(
        token,
        method,
        new URL(path, s.baseUrl),
        new Headers(body === undefined ? {} : { 'content-type': 'application/json' }),
        body === undefined ? null : JSON.stringify(body),
        insecure,
      );
    const subscribeBody = () => ({ productId: 'gid://shopify/Product/77', email: `oauth-${randomUUID()}@example.com` });

    async function exchange(assertion: string, scope?: string) {
      const response = await genericTokenEndpointRequest(as, client, None(), JWT_BEARER_GRANT, { assertion, ...(scope ? { scope } : {}) }, insecure);
      assert.equal(response.headers.get('cache-control'), 'no-store');
      return processGenericTokenEndpointResponse(as, client, response);
    }
    const revoke = async (token: string) => processRevocationResponse(await revocationRequest(as, client, None(), token, insecure));

    describe('discovery', () => {
      it('serves RFC 8414 metadata for this issuer, with agent_auth saying how to register, claim and revoke', async () => {
        assert.equal(as.issuer, s.baseUrl);
        assert.equal(as.token_endpoint, `${s.baseUrl}/oauth/token`);
        assert.equal(as.revocation_endpoint, `${s.baseUrl}/oauth/revoke`);
        assert.equal(as.jwks_uri, `${s.baseUrl}/.well-known/jwks.json`);
        assert.deepEqual(as.grant_types_supported, [JWT_BEARER_GRANT]);
        assert.deepEqual(as.token_endpoint_auth_methods_supported, ['none']);
        assert.deepEqual(as.scopes_supported, ['api:read', 'api:write', 'inventory:alerts']);

        const auth = as.agent_auth as unknown as AgentAuth;
        assert.equal(auth.register_uri, `${s.baseUrl}/api/agent/register`);
        assert.equal(auth.claim_uri, `${s.baseUrl}/api/agent/claim`);
        assert.equal(auth.revocation_uri, as.revocation_endpoint);
        assert.deepEqual(auth.identity_types_supported, ['anonymous', 'identity_assertion']);
        assert.deepEqual(auth.anonymous.credential_types_supported, ['bearer_token']);
        assert.equal(auth.anonymous.claim_uri, auth.claim_uri);
        assert.equal(auth.anonymous.rate_limit.requests_per_minute, s.config.agents.rateLimits.anonymous);
        assert.deepEqual(auth.identity_assertion.assertion_types_supported, [ID_JAG_TOKEN_TYPE, 'verified_email']);
        const idJag = auth.identity_assertion[ID_JAG_TOKEN_TYPE]!;
        assert.deepEqual(idJag.credential_types_supported, ['bearer_token'], 'no mtls without an mTLS listener');
        assert.equal(idJag.revocation_uri, as.revocation_endpoint);
        assert.deepEqual(idJag.trusted_issuers, [s.idp.issuer]);
        assert.deepEqual(auth.identity_assertion.verified_email.credential_types_supported, ['bearer_token']);
        assert.equal(auth.identity_assertion.verified_email.claim_uri, auth.claim_uri);

        const skill = await fetch(auth.skill);
        assert.equal(skill.status, 200);
        assert.match(skill.headers.get('content-type')!, /^text\/markdown/);
        assert.ok((await skill.text()).includes(auth.register_uri), 'the skill names the register URI');
      });

      it('says the same in the OpenID configuration', async () => {
        const oidc = await discover(s.baseUrl, 'oidc');
        for (const [name, value] of Object.entries(as)) assert.deepEqual(oidc[name], value, name);
        assert.deepEqual(oidc.id_token_signing_alg_values_supported, ['ES256']);
      });

      it('serves RFC 9728 resource metadata that agrees with the authorization server', async () => {
        const { metadata: rs } = await discoverResource(s.baseUrl);
        assert.equal(rs.resource, s.baseUrl);
        assert.ok(rs.authorization_servers?.includes(as.issuer));
        assert.deepEqual(rs.scopes_supported, as.scopes_supported);
        assert.deepEqual(rs.bearer_methods_supported, ['header']);
        assert.equal(rs.jwks_uri, as.jwks_uri);
      });

      // RFC 9728 §3.3: a document found at `/.well-known/oauth-protected-resource/mcp`, or through
      // the MCP endpoint's 401, must name the URL the client called, or the client must not use it.
      it("serves at the MCP endpoint's own metadata path a document for that resource, which the endpoint's 401 links to", async () => {
        const resource = new URL('/mcp', s.baseUrl);
        const response = await resourceDiscoveryRequest(resource, insecure);
        assert.equal(response.url, `${s.baseUrl}/.well-known/oauth-protected-resource/mcp`);
        const rs = await processResourceDiscoveryResponse(resource, response);
        assert.equal(rs.resource, resource.href);
        assert.ok(rs.authorization_servers?.includes(as.issuer));
        assert.deepEqual(rs.scopes_supported, as.scopes_supported);
        assert.equal(rs.jwks_uri, as.jwks_uri);

        const refused = await fetch(resource, {
          method: 'POST',
          headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
          body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'get_health', arguments: {} } }),
        });
        assert.equal(refused.status, 401);
        await refused.body?.cancel();
        assert.equal(bearerChallenge(refused.headers.get('www-authenticate') ?? undefined).resource_metadata, response.url);
      });

      it('a token asked for the MCP resource (RFC 8707) is issued for the API and accepted at /mcp', async () => {
        const resource = new URL('/mcp', s.baseUrl);
        const response = await genericTokenEndpointRequest(as, client, None(), JWT_BEARER_GRANT, { assertion: await s.idp.mint({ sub: `user-${randomUUID()}` }), resource: resource.href }, insecure);
        const token = await processGenericTokenEndpointResponse(as, client, response);
        assert.equal(decodeJwt(token.access_token).aud, s.baseUrl);
        const called = await protectedResourceRequest(
          token.access_token,
          'POST',
          resource,
          new Headers({ 'content-type': 'application/json', accept: 'application/json, text/event-stream' }),
          JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'get_health', arguments: {} } }),
          insecure,
        );
        assert.equal(called.status, 200);
        const answer = (await called.json()) as { result?: { isError?: boolean } };
        assert.ok(answer.result, JSON.stringify(answer));
        assert.equal(answer.result.isError, undefined, JSON.stringify(answer));
        assert.equal((await api(token.access_token)).status, 200, 'and on the HTTP API');
      });

      it('a 401 from the API points to that same resource metadata', async () => {
        const res = await fetch(new URL('/api/agent/me', s.baseUrl));
        assert.equal(res.status, 401);
        await res.body?.cancel();
        const challenge = bearerChallenge(res.headers.get('www-authenticate') ?? undefined);
        assert.equal(challenge.error, undefined, 'no token sent, no error (RFC 6750 §3.1)');
        assert.equal(challenge.resource_metadata, (await discoverResource(s.baseUrl)).url);
      });

      it('jwks_uri publishes the public key that signs issued tokens, which verify against it as RFC 9068 access tokens', async () => {
        const { token } = await registerAgent(s.app);
        const jwks = (await (await fetch(as.jwks_uri!)).json()) as { keys: JWK[] };
        assert.ok(jwks.keys.some((key) => key.kid === kidOf(token)), 'the kid of the token is published');
        assert.ok(jwks.keys.every((key) => key.d === undefined), 'no private key material');
        const { metadata: rs } = await discoverResource(s.baseUrl);
        const { payload, protectedHeader } = await jwtVerify(token, createLocalJWKSet(jwks), {
          issuer: as.issuer,
          audience: rs.resource,
          typ: 'at+jwt',
          algorithms: ['ES256'],
        });
        assert.equal(protectedHeader.alg, 'ES256');
        assert.equal(payload.scope, 'api:read api:write');
      });
    });

    describe('the token endpoint (RFC 7523 jwt-bearer grant)', () => {
      it('exchanges an ID-JAG for a Bearer access token that works on the API', async () => {
        const token = await exchange(await s.idp.mint({ sub: `user-${randomUUID()}` }));
        assert.equal(token.token_type, 'bearer');
        assert.equal(token.expires_in, s.config.agents.accessTokenTtlSeconds);
        assert.equal(token.scope, 'api:read api:write');

        assert.equal(decodeProtectedHeader(token.access_token).typ, 'at+jwt');
        const claims = decodeJwt(token.access_token);
        assert.equal(claims.iss, as.issuer);
        assert.equal(claims.aud, s.baseUrl);
        assert.match(claims.sub!, /^agt_/);

        const agent = await (await api(token.access_token)).json();
        assert.equal(agent.registration_id, claims.sub);
        assert.equal(agent.method, 'id_jag');
        assert.equal((await api(token.access_token, 'POST', '/api/v1/alerts/subscribe', subscribeBody())).status, 200);
      });

      it('maps one identity to one agent and grants no more than was asked, nor than the provider allowed', async () => {
        const sub = `user-${randomUUID()}`;
        const narrowed = await exchange(await s.idp.mint({ sub }), 'api:read');
        assert.equal(narrowed.scope, 'api:read');
        const again = await exchange(await s.idp.mint({ sub }));
        assert.equal(decodeJwt(again.access_token).sub, decodeJwt(narrowed.access_token).sub, 'the same agent');
        assert.equal(again.scope, 'api:read api:write');
        const capped = await exchange(await s.idp.mint({ sub, scope: 'api:read' }), 'api:read api:write');
        assert.equal(capped.scope, 'api:read');

        const refused = await refusal(api(narrowed.access_token, 'POST', '/api/v1/alerts/subscribe', subscribeBody()));
        assert.equal(refused.status, 403);
        assert.equal(refused.parameters.error, 'insufficient_scope');
        assert.equal(refused.parameters.scope, 'api:write');
      });

      it('refuses a bad assertion with invalid_grant, the reason alongside', async () => {
        await assertOAuthError(exchange(await s.idp.mint({ issuedAt: -600, expiresIn: -120 })), 'invalid_grant', 'expired');
        await assertOAuthError(exchange(await s.idp.mint({ aud: 'https://elsewhere.example' })), 'invalid_grant', 'audience_mismatch');
        const once = await s.idp.mint();
        await exchange(once);
        await assertOAuthError(exchange(once), 'invalid_grant', 'replay_detected');
        const { token } = await registerAgent(s.app);
        await assertOAuthError(exchange(token), 'invalid_grant', 'invalid_assertion');
      });

      it('refuses other grant types with unsupported_grant_type', async () => {
        for (const grant of ['client_credentials', 'authorization_code', 'urn:ietf:params:oauth:grant-type:token-exchange']) {
          const response = await genericTokenEndpointRequest(as, client, None(), grant, { assertion: await s.idp.mint() }, insecure);
          await assertOAuthError(processGenericTokenEndpointResponse(as, client, response), 'unsupported_grant_type');
        }
      });

      it('refuses a jwt-bearer grant without an assertion with invalid_request', async () => {
        const response = await genericTokenEndpointRequest(as, client, None(), JWT_BEARER_GRANT, {}, insecure);
        await assertOAuthError(processGenericTokenEndpointResponse(as, client, response), 'invalid_request');
      });
    });

    describe('revocation (RFC 7009)', () => {
      it('refuses a token with invalid_token as soon as it is revoked', async () => {
        const auth = as.agent_auth as unknown as AgentAuth;
        const registered = await fetch(auth.register_uri, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ type: 'anonymous' }),
        });
        assert.equal(registered.status, 201);
        assert.equal(registered.headers.get('cache-control'), 'no-store');
        const { credential: token } = (await registered.json()) as { credential: string };
        assert.equal((await api(token)).status, 200);

        assert.equal(await revoke(token), undefined);
        const refused = await refusal(api(token));
        assert.equal(refused.status, 401);
        assert.equal(refused.parameters.error, 'invalid_token');
        assert.equal(refused.parameters.resource_metadata, `${s.baseUrl}/.well-known/oauth-protected-resource`);
        assert.match(refused.contentType!, /^application\/problem\+json/);
        assert.equal(refused.body.type, `${s.baseUrl}/problems/invalid-token`);
        assert.equal(await revoke(token), undefined, 'revoking twice is harmless');
      });

      it('answers 200 to revoking garbage or a token it never issued, and revokes nothing else', async () => {
        const bystander = (await registerAgent(s.app)).token;
        const stranger = await new SignJWT({ scope: 'api:read', client_id: 'x' })
          .setProtectedHeader({ alg: 'ES256', typ: 'at+jwt', kid: kidOf(bystander) })
          .setIssuer(s.baseUrl)
          .setAudience(s.baseUrl)
          .setSubject(decodeJwt(bystander).sub!)
          .setJti(decodeJwt(bystander).jti!)
          .setIssuedAt()
          .setExpirationTime('5m')
          .sign((await generateKeyPair('ES256')).privateKey);
        for (const token of ['garbage', await s.idp.mint(), stranger, `${bystander}x`]) {
          assert.equal(await revoke(token), undefined, token);
        }
        assert.equal((await api(bystander)).status, 200, 'a forgery naming its jti did not revoke it');
      });
    });

    describe('revocation seen by another process sharing the database', () => {
      it('a token revoked through one process is refused by the very next request to another', async () => {
        const peer = await s.startPeer();
        try {
          const { token } = await registerAgent(s.app);
          assert.equal((await me(peer, token)).statusCode, 200);
          assert.equal((await me(peer, token)).statusCode, 200, 'now verified and remembered there');
          await revoke(token);
          const res = await me(peer, token);
          assert.equal(res.statusCode, 401);
          assert.equal(bearerChallenge(res.headers['www-authenticate']).error, 'invalid_token');
          assert.match(res.json().detail, /revoked/);
        } finally {
          await peer.close();
        }
      });
    });
  });

  describe(`rate limits for agents on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    const PER_MINUTE = 100;
    let t: TestApp;
    before(async () => {
      t = await startTestApp(dialect, { RATE_LIMIT_ANONYMOUS_PER_MINUTE: String(PER_MINUTE), REGISTRATION_LIMIT_PER_HOUR: '3' });
    });
    after(() => t.close());

    it(`gives a new anonymous agent ${PER_MINUTE} requests a minute and answers the next with 429`, async () => {
      const agent = await registerAgent(t.app, { remoteAddress: '203.0.113.10' });
      assert.equal(agent.response.json().rate_limit.requests_per_minute, PER_MINUTE);
      for (let i = 0; i < PER_MINUTE; i++) {
        const res = await me(t, agent.token);
        assert.equal(res.statusCode, 200);
        assert.equal(res.headers['ratelimit-limit'], String(PER_MINUTE));
        assert.equal(res.headers['ratelimit-remaining'], String(PER_MINUTE - 1 - i));
      }
      assertRateLimited(await me(t, agent.token), PER_MINUTE, 60);
      assert.equal((await me(t, t.token)).statusCode, 200, 'another agent has its own count');
    });

    it('lets one address register 3 agents an hour and answers the 4th with 429, storing nothing', async () => {
      for (let i = 0; i < 3; i++) await registerAgent(t.app, { remoteAddress: '203.0.113.20' });
      const before = await t.tableDigests();
      const refused = await t.app.inject({ method: 'POST', url: '/api/agent/register', remoteAddress: '203.0.113.20', payload: { type: 'anonymous' } });
      assertRateLimited(refused, 3, 3600);
      assert.deepEqual(await t.tableDigests(), before);
      await registerAgent(t.app, { remoteAddress: '203.0.113.21' });
    });

    it('ignores X-Forwarded-For unless the proxy is trusted (TRUST_PROXY), then counts the client address', async () => {
      const register = (app: TestApp['app'], client: string) =>
        app.inject({
          method: 'POST',
          url: '/api/agent/register',
          remoteAddress: '10.9.8.7',
          headers: { 'x-forwarded-for': client },
          payload: { type: 'anonymous' },
        });
      // Untrusted: a client cannot escape its count by inventing addresses.
      for (let i = 0; i < 3; i++) assert.equal((await register(t.app, `192.0.2.${i}`)).statusCode, 201);
      assertRateLimited(await register(t.app, '192.0.2.99'), 3, 3600);

      const behindProxy = await startTestApp(dialect, { REGISTRATION_LIMIT_PER_HOUR: '3', TRUST_PROXY: '10.9.8.7' });
      try {
        for (const client of ['192.0.2.1', '192.0.2.2']) {
          for (let i = 0; i < 3; i++) assert.equal((await register(behindProxy.app, client)).statusCode, 201);
          assertRateLimited(await register(behindProxy.app, client), 3, 3600);
        }
      } finally {
        await behindProxy.close();
      }
    });

    it('counts in Redis, shared by two processes over one database', { skip: redisUp ? false : `Redis not reachable at ${REDIS_URL}` }, async () => {
      const testDatabase = await createTestDatabase(dialect);
      const config = testConfig(testDatabase.url, { REDIS_URL, RATE_LIMIT_ANONYMOUS_PER_MINUTE: String(PER_MINUTE) });
      const one = await startProcess(config);
      const two = await startProcess(config);
      // The service names its keys itself; a fresh agent and a random address keep this run's apart.
      const address = `198.18.${randomInt(256)}.${randomInt(1, 255)}`;
      let agentId: string | undefined;
      try {
        const agent = await registerAgent(one.app, { remoteAddress: address });
        agentId = agent.id;
        for (const instance of [one, two]) {
          for (let i = 0; i < PER_MINUTE / 2; i++) assert.equal((await me(instance, agent.token)).statusCode, 200);
        }
        assertRateLimited(await me(one, agent.token), PER_MINUTE, 60);
        assertRateLimited(await me(two, agent.token), PER_MINUTE, 60);
      } finally {
        await one.close();
        await two.close();
        await testDatabase.drop();
        if (agentId) await deleteKeys(`restock:rate-limit:agent:${agentId}`);
        await deleteKeys(`restock:rate-limit:address:registration:${address}`);
      }
    });
  });

  describe(`signing key rotation on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    it('restock keys rotate: both keys published, new tokens under the new kid, verified by a process that had not loaded it', async () => {
      const running = await startTestApp(dialect);
      const loadedAt = Date.now();
      let restarted: ServiceProcess | undefined;
      try {
        const oldToken = running.token;
        const oldKid = kidOf(oldToken);
        const newKid = await rotateKeysWithCommand(running.testDatabase.url);
        assert.notEqual(newKid, oldKid);

        restarted = await startProcess(running.config);
        assert.deepEqual(await jwksKids(restarted), [oldKid, newKid].sort());
        const fresh = await registerAgent(restarted.app);
        assert.equal(kidOf(fresh.token), newKid);
        assert.equal((await me(restarted, oldToken)).statusCode, 200, 'tokens of the just-rotated key still work');

        // A process re-reads its keys for an unknown kid at most once a second; this one loaded them at start.
        await sleep(1100 - (Date.now() - loadedAt));
        assert.equal((await me(running, fresh.token)).statusCode, 200, 'a kid it had not loaded is looked up');
        assert.deepEqual(await jwksKids(running), [oldKid, newKid].sort(), 'the JWKS publishes a rotation at once');
        assert.equal(kidOf((await registerAgent(running.app)).token), newKid, 'having seen the rotation, it signs with the new key');
        assert.equal((await me(running, oldToken)).statusCode, 200);
      } finally {
        await restarted?.close();
        await running.close();
      }
    });
  });
}
