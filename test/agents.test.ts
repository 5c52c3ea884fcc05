import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import os from 'node:os';
import { after, before, describe, it } from './fixtures/suites.ts';
import { fileURLToPath } from 'node:url';
import { failOnLeakedHandles } from './fixtures/leaks.ts';
import { dialectSkip, startTestApp, testDialects, type TestApp } from './fixtures/app.ts';
import {
  CLAIM,
  ID_JAG,
  ME,
  REGISTER,
  VERIFIED_EMAIL,
  agentOf,
  call,
  codeIn,
  createStore,
  del,
  expectProblem,
  expectStatus,
  get,
  mailedCode,
  post,
  registerAnonymousAgent,
  registerVerified,
  requestCode,
  storeWithAgent,
  submitCode,
  uniqueDomain,
  uniqueEmail,
  wrongCode,
  type StoreAgent,
} from './fixtures/agents.ts';
import { startIdentityProvider, type IdJagClaims, type TestIdentityProvider } from './fixtures/identity-provider.ts';
import { startSmtpSink, type SmtpSink } from './fixtures/smtp-sink.ts';
import { MailOutboxRepository } from '../src/core/mail/outbox-repository.ts';

failOnLeakedHandles();

const PRODUCT = 'gid://shopify/Product/1001';
const SUBSCRIBE = '/api/v1/alerts/subscribe';
const CHECKOUT = '/api/v1/plans/checkout';
const PRE_CLAIM = ['api:read', 'api:write'];
const storeUrl = (domain: string) => `/api/v1/stores/${domain}`;
const subscription = (id: string) => `/api/v1/alerts/${id}`;
const subscribe = (t: TestApp, token: string, extra: Record<string, unknown> = {}) =>
  post(t.app, SUBSCRIBE, { productId: PRODUCT, email: uniqueEmail('shopper'), ...extra }, token);

const BIN = fileURLToPath(new URL('../bin/restock.js', import.meta.url));

/** The operator's command against the test database, in an environment of its own. */
function restock(args: string[], databaseUrl: string): Promise<{ status: number | null; stdout: string; stderr: string }> {
  const env = { PATH: process.env.PATH, HOME: process.env.HOME, DATABASE_URL: databaseUrl, LOG_LEVEL: 'silent' };
  return new Promise((resolve) => {
    execFile(process.execPath, [BIN, ...args], { cwd: os.tmpdir(), env, encoding: 'utf8', timeout: 60_000 }, (err, stdout, stderr) => {
      resolve({ status: err ? (typeof err.code === 'number' ? err.code : null) : 0, stdout, stderr });
    });
  });
}

for (const dialect of testDialects()) {
  describe(`agents on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    let idp: TestIdentityProvider;
    let t: TestApp;
    before(async () => {
      idp = await startIdentityProvider({ audience: 'http://restock.test' });
      t = await startTestApp(dialect, {
        AGENT_TRUSTED_ISSUERS: JSON.stringify([idp.trusted]),
        // The service's own limits (an empty variable means the default), so a claim's upgrade shows.
        RATE_LIMIT_ANONYMOUS_PER_MINUTE: '',
        RATE_LIMIT_VERIFIED_EMAIL_PER_MINUTE: '',
        // Fewer than the default, so the test shows the setting is what counts.
        CLAIM_CODE_MAX_ATTEMPTS: '3',
      });
    });
    after(async () => {
      await t.close();
      await idp.close();
    });

    const limits = () => t.config.agents.rateLimits;

    describe('anonymous registration', () => {
      it('hands out a bearer credential with the pre-claim scopes, the anonymous rate limit and a claim offer', async () => {
        const res = await post(t.app, REGISTER, { type: 'anonymous' });
        const body = expectStatus(res, 201);
        assert.equal(res.headers['cache-control'], 'no-store');
        assert.equal(body.registration_type, 'anonymous');
        assert.match(body.registration_id, /^agt_/);
        assert.equal(body.credential_type, 'bearer_token');
        assert.equal(body.token_type, 'Bearer');
        assert.ok(Date.parse(body.credential_expires) > Date.now(), body.credential_expires);
        assert.deepEqual(body.scopes, PRE_CLAIM);
        assert.equal(limits().anonymous, 100, 'the default anonymous limit');
        assert.deepEqual(body.rate_limit, { requests_per_minute: limits().anonymous });
        assert.match(body.claim_token, /^clm_[A-Za-z0-9_-]{43}$/);
        assert.equal(body.claim_url, `http://restock.test/api/agent/claim?claim_token=${body.claim_token}`);
        assert.ok(Date.parse(body.claim_token_expires) > Date.now());
        assert.deepEqual(body.post_claim_scopes, PRE_CLAIM);
      });

      it('the credential reads /api/agent/me, which reports the limit in force, and subscribes (api:write)', async () => {
        const agent = await registerAnonymousAgent(t.app);
        const res = await get(t.app, ME, agent.token);
        const me = expectStatus(res, 200);
        assert.equal(me.registration_id, agent.registrationId);
        assert.equal(me.method, 'anonymous');
        assert.equal(me.status, 'active');
        assert.deepEqual(me.scopes, PRE_CLAIM);
        assert.deepEqual(me.token_scopes, PRE_CLAIM);
        assert.equal(me.email, null);
        assert.equal(me.store, null);
        assert.equal(me.claimed_at, null);
        assert.deepEqual(me.rate_limit, { requests_per_minute: limits().anonymous });
        assert.equal(res.headers['ratelimit-limit'], String(limits().anonymous));

        assert.equal(expectStatus(await subscribe(t, agent.token), 200).status, 'active');
      });

      it('a requested scope narrows the grant, and inventory:alerts is not granted', async () => {
        const readOnly = expectStatus(await post(t.app, REGISTER, { type: 'anonymous', scope: 'api:read inventory:alerts' }), 201);
        assert.deepEqual(readOnly.scopes, ['api:read']);
        expectProblem(await subscribe(t, readOnly.credential), 403, 'insufficient-scope', 'insufficient_scope');
      });

      it('refuses an mtls credential, storing nothing', async () => {
        const before = await t.tableDigests();
        expectProblem(await post(t.app, REGISTER, { type: 'anonymous', requested_credential_type: 'mtls' }), 400, 'malformed-request', 'invalid_request');
        assert.deepEqual(await t.tableDigests(), before);
      });

      const long = (n: number) => 'x'.repeat(n);
      const invalid: Array<[string, unknown, string[]]> = [
        ['no type', {}, ['/body/type']],
        ['an unknown type', { type: 'magic' }, ['/body/type']],
        ['an assertion on an anonymous registration', { type: 'anonymous', assertion: 'someone@example.com' }, ['/body/assertion']],
        ['an assertion type on an anonymous registration', { type: 'anonymous', assertion_type: 'verified_email' }, ['/body/assertion']],
        ['an identity assertion without assertion type or assertion', { type: 'identity_assertion' }, ['/body/assertion_type', '/body/assertion']],
        ['an unknown assertion type', { type: 'identity_assertion', assertion_type: 'saml', assertion: 'x' }, ['/body/assertion_type']],
        ['a verified e-mail that is not an e-mail', { ...VERIFIED_EMAIL, assertion: 'not-an-email' }, ['/body/assertion']],
        ['an assertion over 8192 characters', { ...ID_JAG, assertion: long(8193) }, ['/body/assertion']],
        ['a scope over 200 characters', { type: 'anonymous', scope: `api:read ${long(200)}` }, ['/body/scope']],
        ['a scope with doubled spaces', { type: 'anonymous', scope: 'api:read  api:write' }, ['/body/scope']],
        ['a store over 255 characters', { ...VERIFIED_EMAIL, assertion: 'a@example.com', store: `${long(250)}.myshopify.com` }, ['/body/store']],
        ['an unknown credential type', { type: 'anonymous', requested_credential_type: 'password' }, ['/body/requested_credential_type']],
        ['a body that is not an object', [], ['/body']],
      ];
      for (const [name, body, pointers] of invalid) {
        it(`refuses ${name} naming ${pointers.join(' and ')}, storing nothing`, async () => {
          const before = await t.tableDigests();
          const problem = expectProblem(await post(t.app, REGISTER, body), 400, 'validation-failed');
          const named = problem.errors.map((e: { pointer: string }) => e.pointer);
          for (const pointer of pointers) assert.ok(named.includes(pointer), JSON.stringify(problem.errors));
          assert.deepEqual(await t.tableDigests(), before);
        });
      }
    });

    describe('registration with an ID-JAG', () => {
      let subjects = 0;
      const newSubject = () => `user-${++subjects}-${Date.now()}`;
      const registerIdJag = async (claims: IdJagClaims, extra: Record<string, unknown> = {}) =>
        post(t.app, REGISTER, { ...ID_JAG, assertion: await idp.mint(claims), ...extra });

      it('hands out a credential that works, with the ID-JAG rate limit', async () => {
        const body = expectStatus(await registerIdJag({ sub: newSubject() }), 201);
        assert.equal(body.registration_type, 'identity_assertion');
        assert.equal(body.credential_type, 'bearer_token');
        assert.deepEqual(body.scopes, PRE_CLAIM);
        assert.deepEqual(body.rate_limit, { requests_per_minute: limits().idJag });
        const me = expectStatus(await get(t.app, ME, body.credential), 200);
        assert.equal(me.registration_id, body.registration_id);
        assert.equal(me.method, 'id_jag');
        expectStatus(await subscribe(t, body.credential), 200);
      });

      it('maps one identity (issuer, subject) to one registration', async () => {
        const sub = newSubject();
        const first = expectStatus(await registerIdJag({ sub }), 201);
        const again = expectStatus(await registerIdJag({ sub }), 201);
        const other = expectStatus(await registerIdJag({ sub: newSubject() }), 201);
        assert.equal(again.registration_id, first.registration_id);
        assert.notEqual(again.credential, first.credential);
        assert.notEqual(other.registration_id, first.registration_id);
      });

      it('refuses a replayed assertion', async () => {
        const assertion = await idp.mint({ sub: newSubject() });
        expectStatus(await post(t.app, REGISTER, { ...ID_JAG, assertion }), 201);
        expectProblem(await post(t.app, REGISTER, { ...ID_JAG, assertion }), 400, 'invalid-assertion', 'replay_detected');
      });

      // Granted = asked ∩ what the provider allows ∩ what an agent bound to no store may hold.
      const narrowing: Array<[string, string | undefined, string | undefined, string[]]> = [
        ['the requested scope', 'api:read', undefined, ['api:read']],
        ["the provider's scope claim", undefined, 'api:write', ['api:write']],
        ['both at once', 'api:read api:write', 'api:write inventory:alerts', ['api:write']],
        ['nothing for inventory:alerts, asked and allowed, to an unbound agent', 'api:read api:write inventory:alerts', 'api:read api:write inventory:alerts', PRE_CLAIM],
      ];
      for (const [name, asked, byProvider, granted] of narrowing) {
        it(`grants what ${name} allows`, async () => {
          const claims: IdJagClaims = { sub: newSubject(), ...(byProvider && { scope: byProvider }) };
          const body = expectStatus(await registerIdJag(claims, asked ? { scope: asked } : {}), 201);
          assert.deepEqual(body.scopes, granted);
        });
      }
    });

    describe('registration with a verified e-mail', () => {
      const maxAttempts = () => t.config.agents.claimCodeMaxAttempts;
      const outbox = () => new MailOutboxRepository(t.database);

      it('is pending, without a credential, and mails a code to the address', async () => {
        const email = uniqueEmail();
        const body = await registerVerified(t.app, email);
        assert.equal(body.status, 'pending');
        assert.equal(body.registration_type, 'identity_assertion');
        assert.equal('credential' in body, false);
        assert.match(body.claim_attempt_id, /^cla_/);
        assert.ok(Date.parse(body.claim_attempt_expires) > Date.now());
        assert.match(body.claim_token, /^clm_/);
        assert.match(body.claim_url, /^http:\/\/restock\.test\/api\/agent\/claim\?claim_token=clm_/);
        assert.deepEqual(body.post_claim_scopes, PRE_CLAIM);
        const mail = await outbox().latestFor(email, 'agent-claim-code');
        assert.ok(mail);
        assert.ok(mail.subject.includes(codeIn(mail.text)), mail.subject);
      });

      it('the right code claims the agent and hands out a credential that works', async () => {
        const email = uniqueEmail();
        const { claim_token, registration_id } = await registerVerified(t.app, email);
        const claimed = expectStatus(await submitCode(t.app, claim_token, await mailedCode(t.database, email)), 200);
        assert.equal(claimed.status, 'claimed');
        assert.equal(claimed.registration_id, registration_id);
        assert.deepEqual(claimed.scopes, PRE_CLAIM);
        assert.equal(claimed.store, null);
        assert.deepEqual(claimed.rate_limit, { requests_per_minute: limits().verifiedEmail });
        const me = expectStatus(await get(t.app, ME, claimed.credential), 200);
        assert.equal(me.method, 'verified_email');
        assert.equal(me.status, 'active');
        assert.equal(me.email, email);
        assert.ok(me.claimed_at);
        expectStatus(await subscribe(t, claimed.credential), 200);
      });

      it('a wrong code is refused, saying how many attempts are left', async () => {
        const email = uniqueEmail();
        const { claim_token } = await registerVerified(t.app, email);
        const code = await mailedCode(t.database, email);
        const problem = expectProblem(await submitCode(t.app, claim_token, wrongCode(code)), 400, 'claim-failed', 'otp_invalid');
        assert.match(problem.detail, new RegExp(`${maxAttempts() - 1} attempt\\(s\\) left`));
        expectStatus(await submitCode(t.app, claim_token, code), 200);
      });

      it('after the wrong codes allowed, even the right code is refused until a new code is sent', async () => {
        const email = uniqueEmail();
        const { claim_token } = await registerVerified(t.app, email);
        const code = await mailedCode(t.database, email);
        for (let i = 1; i < maxAttempts(); i++) {
          expectProblem(await submitCode(t.app, claim_token, wrongCode(code)), 400, 'claim-failed', 'otp_invalid');
        }
        expectProblem(await submitCode(t.app, claim_token, wrongCode(code)), 400, 'claim-failed', 'otp_attempts_exceeded');
        expectProblem(await submitCode(t.app, claim_token, code), 400, 'claim-failed', 'otp_attempts_exceeded');

        assert.equal(expectStatus(await requestCode(t.app, claim_token), 200).status, 'initiated');
        const fresh = await mailedCode(t.database, email);
        assert.equal(expectStatus(await submitCode(t.app, claim_token, fresh), 200).status, 'claimed');
      });

      it('an expired code is refused; a new one works', async () => {
        const email = uniqueEmail();
        const { claim_token, registration_id } = await registerVerified(t.app, email);
        // CLAIM_CODE_TTL_MINUTES cannot go below a minute: the test ages the code in place.
        await t.database.db
          .updateTable('agent_claim_attempts')
          .set({ expires_at: new Date(Date.now() - 1000).toISOString() })
          .where('agent_id', '=', registration_id)
          .execute();
        expectProblem(await submitCode(t.app, claim_token, await mailedCode(t.database, email)), 400, 'claim-failed', 'claim_expired');

        expectStatus(await requestCode(t.app, claim_token, email), 200);
        expectStatus(await submitCode(t.app, claim_token, await mailedCode(t.database, email)), 200);
      });

      it('the claim token is spent once the agent is claimed', async () => {
        const email = uniqueEmail();
        const { claim_token } = await registerVerified(t.app, email);
        const code = await mailedCode(t.database, email);
        expectStatus(await submitCode(t.app, claim_token, code), 200);
        expectProblem(await submitCode(t.app, claim_token, code), 400, 'claim-failed', 'invalid_claim_token');
        expectProblem(await requestCode(t.app, claim_token, email), 400, 'claim-failed', 'invalid_claim_token');
      });

      it('codes go only to the address registered', async () => {
        const { claim_token } = await registerVerified(t.app, uniqueEmail());
        const before = await t.tableDigests();
        expectProblem(await requestCode(t.app, claim_token, uniqueEmail('intruder')), 400, 'claim-failed', 'invalid_request');
        assert.deepEqual(await t.tableDigests(), before);
      });

      it('a claim token asks for at most 5 codes', async () => {
        const email = uniqueEmail();
        const { claim_token } = await registerVerified(t.app, email);
        for (let sent = 1; sent < 5; sent++) expectStatus(await requestCode(t.app, claim_token, email), 200);
        const before = await t.tableDigests();
        expectProblem(await requestCode(t.app, claim_token, email), 400, 'claim-failed', 'claim_attempts_exceeded');
        assert.deepEqual(await t.tableDigests(), before, 'no sixth code is stored or mailed');
      });
    });

    describe('claiming an anonymous agent', () => {
      it('upgrades the agent: a new credential at the verified rate limit, while the old one keeps working', async () => {
        const agent = await registerAnonymousAgent(t.app);
        const email = uniqueEmail();
        const initiated = expectStatus(await requestCode(t.app, agent.claimToken, email), 200);
        assert.equal(initiated.status, 'initiated');
        assert.equal(initiated.registration_id, agent.registrationId);
        assert.ok(Date.parse(initiated.expires_at) > Date.now());

        const claimed = expectStatus(await submitCode(t.app, agent.claimToken, await mailedCode(t.database, email)), 200);
        assert.equal(claimed.status, 'claimed');
        assert.notEqual(claimed.credential, agent.token);
        assert.deepEqual(claimed.scopes, PRE_CLAIM);
        assert.ok(limits().verifiedEmail > limits().anonymous, 'the claim is an upgrade');
        assert.deepEqual(claimed.rate_limit, { requests_per_minute: limits().verifiedEmail });

        for (const token of [claimed.credential, agent.token]) {
          const res = await get(t.app, ME, token);
          const me = expectStatus(res, 200);
          assert.equal(me.registration_id, agent.registrationId);
          assert.equal(me.email, email);
          assert.ok(me.claimed_at);
          assert.deepEqual(me.rate_limit, { requests_per_minute: limits().verifiedEmail });
          assert.equal(res.headers['ratelimit-limit'], String(limits().verifiedEmail));
        }
        expectStatus(await subscribe(t, agent.token), 200);
      });

      it('asks for at most 5 codes, storing nothing for a sixth', async () => {
        const agent = await registerAnonymousAgent(t.app);
        for (let sent = 0; sent < 5; sent++) expectStatus(await requestCode(t.app, agent.claimToken, uniqueEmail()), 200);
        const before = await t.tableDigests();
        expectProblem(await requestCode(t.app, agent.claimToken, uniqueEmail()), 400, 'claim-failed', 'claim_attempts_exceeded');
        assert.deepEqual(await t.tableDigests(), before);
      });

      // The cap is what stops a leaked claim URL from flooding inboxes, so it must hold under concurrency.
      it('asks for at most 5 codes even when the requests arrive together', async () => {
        const agent = await registerAnonymousAgent(t.app);
        const before = await t.counts();
        const answers = await Promise.all(Array.from({ length: 10 }, () => requestCode(t.app, agent.claimToken, uniqueEmail())));
        const statuses = answers.map((r) => r.statusCode);
        assert.equal(statuses.filter((status) => status === 200).length, 5, `answers: ${statuses.join(' ')}`);
        assert.equal((await t.counts()).mail_outbox, before.mail_outbox + 5, 'codes mailed');
      });

      it('refuses an unknown claim token and a code asked for before any e-mail', async () => {
        expectProblem(await requestCode(t.app, 'clm_unknown', uniqueEmail()), 400, 'claim-failed', 'invalid_claim_token');
        const agent = await registerAnonymousAgent(t.app);
        expectProblem(await submitCode(t.app, agent.claimToken, '123456'), 400, 'claim-failed', 'claim_not_initiated');
        expectProblem(await requestCode(t.app, agent.claimToken), 400, 'validation-failed');
      });
    });

    describe('store binding', () => {
      it("the owner's claim naming the store binds the agent and grants inventory:alerts", async () => {
        const agent = await storeWithAgent(t.app, t.database);
        const me = expectStatus(await get(t.app, ME, agent.token), 200);
        assert.equal(me.store, agent.domain);
        assert.equal(me.email, agent.owner);
        assert.deepEqual(me.scopes, [...PRE_CLAIM, 'inventory:alerts']);
        assert.deepEqual(me.token_scopes, [...PRE_CLAIM, 'inventory:alerts']);
      });

      it('a claim naming the store with anyone but its owner is refused and binds nothing', async () => {
        const domain = uniqueDomain();
        await createStore(t.database, domain, uniqueEmail('owner'));
        const agent = await registerAnonymousAgent(t.app);
        const stranger = uniqueEmail('stranger');
        expectStatus(await requestCode(t.app, agent.claimToken, stranger, domain), 200);
        expectProblem(await submitCode(t.app, agent.claimToken, await mailedCode(t.database, stranger)), 403, 'forbidden');

        const me = expectStatus(await get(t.app, ME, agent.token), 200);
        assert.equal(me.store, null);
        assert.equal(me.claimed_at, null);
        assert.deepEqual(me.scopes, PRE_CLAIM);
        expectProblem(await get(t.app, storeUrl(domain), agent.token), 404, 'not-found');
      });

      it('a claim naming a store that does not exist is refused', async () => {
        const agent = await registerAnonymousAgent(t.app);
        const email = uniqueEmail();
        expectStatus(await requestCode(t.app, agent.claimToken, email, uniqueDomain('nowhere')), 200);
        expectProblem(await submitCode(t.app, agent.claimToken, await mailedCode(t.database, email)), 403, 'forbidden');
      });

      it("the owner's agent lists the store's agents and revokes one, whose token stops working at once", async () => {
        const first = await storeWithAgent(t.app, t.database);
        const second = await agentOf(t.app, t.database, first.domain, first.owner);
        const agentsUrl = `${storeUrl(first.domain)}/agents`;
        const listed = expectStatus(await get(t.app, agentsUrl, first.token), 200);
        assert.deepEqual(listed.agents.map((a: { registration_id: string }) => a.registration_id), [first.registrationId, second.registrationId]);

        expectStatus(await get(t.app, ME, second.token), 200);
        const revoked = expectStatus(await del(t.app, `${agentsUrl}/${second.registrationId}`, first.token), 200);
        assert.equal(revoked.status, 'revoked');
        assert.ok(revoked.revoked_at);

        const refused = await get(t.app, ME, second.token);
        expectProblem(refused, 401, 'invalid-token', 'invalid_token');
        assert.match(refused.headers['www-authenticate'] as string, /^Bearer .*error="invalid_token"/);
        expectStatus(await get(t.app, ME, first.token), 200);
        const after = expectStatus(await get(t.app, agentsUrl, first.token), 200);
        assert.deepEqual(after.agents.map((a: { status: string }) => a.status), ['active', 'revoked']);
      });

      it('the store is visible to its own agents only', async () => {
        const agent = await storeWithAgent(t.app, t.database);
        const store = expectStatus(await get(t.app, storeUrl(agent.domain), agent.token), 200);
        assert.equal(store.domain, agent.domain);
        assert.equal(store.ownerEmail, agent.owner);
        const unbound = await registerAnonymousAgent(t.app);
        expectProblem(await get(t.app, storeUrl(agent.domain), unbound.token), 404, 'not-found');
        expectProblem(await get(t.app, `${storeUrl(agent.domain)}/agents`, unbound.token), 404, 'not-found');
      });
    });

    describe('tenant isolation', () => {
      let a: StoreAgent;
      let b: StoreAgent;
      before(async () => {
        a = await storeWithAgent(t.app, t.database, 'alpha');
        b = await storeWithAgent(t.app, t.database, 'beta');
      });

      it("an agent of one store gets 404 for another store's subscriptions, checkout sessions, store and agents", async () => {
        const { subscriptionId } = expectStatus(await subscribe(t, b.token), 200);
        const { sessionId } = expectStatus(await post(t.app, CHECKOUT, { plan: 'starter', shop: b.domain }, b.token), 200);
        const foreign = [
          ['GET', subscription(subscriptionId)],
          ['DELETE', subscription(subscriptionId)],
          ['GET', `${CHECKOUT}/${sessionId}`],
          ['GET', storeUrl(b.domain)],
          ['GET', `${storeUrl(b.domain)}/agents`],
          ['DELETE', `${storeUrl(b.domain)}/agents/${b.registrationId}`],
        ] as const;
        for (const [method, url] of foreign) expectProblem(await call(t.app, method, url, { token: a.token }), 404, 'not-found');

        assert.equal(expectStatus(await get(t.app, subscription(subscriptionId), b.token), 200).status, 'active');
        expectStatus(await get(t.app, `${CHECKOUT}/${sessionId}`, b.token), 200);
        expectStatus(await get(t.app, ME, b.token), 200);
      });

      it('an agent of one store cannot subscribe or check out for another (403), storing nothing', async () => {
        const before = await t.tableDigests();
        expectProblem(await subscribe(t, a.token, { shop: b.domain }), 403, 'forbidden');
        expectProblem(await post(t.app, CHECKOUT, { plan: 'starter', shop: b.domain }, a.token), 403, 'forbidden');
        assert.deepEqual(await t.tableDigests(), before);
      });

      it("agents bound to no store can neither read nor cancel each other's subscriptions", async () => {
        const x = await registerAnonymousAgent(t.app);
        const y = await registerAnonymousAgent(t.app);
        const { subscriptionId } = expectStatus(await subscribe(t, y.token), 200);
        expectProblem(await get(t.app, subscription(subscriptionId), x.token), 404, 'not-found');
        expectProblem(await del(t.app, subscription(subscriptionId), x.token), 404, 'not-found');
        assert.equal(expectStatus(await get(t.app, subscription(subscriptionId), y.token), 200).status, 'active');
      });

      it("another agent of the same store reads the store's subscriptions", async () => {
        const colleague = await agentOf(t.app, t.database, a.domain, a.owner);
        const { subscriptionId } = expectStatus(await subscribe(t, a.token), 200);
        const read = expectStatus(await get(t.app, subscription(subscriptionId), colleague.token), 200);
        assert.equal(read.shop, a.domain);
      });

      // One live subscription per (product, variant, e-mail) across every tenant: the second store
      // is answered with the first store's subscription, which it then cannot read.
      it('subscribing a shopper another store already subscribed gives a subscription the caller can read', async () => {
        const watch = { productId: PRODUCT, email: uniqueEmail('shared-shopper') };
        const theirs = expectStatus(await post(t.app, SUBSCRIBE, watch, b.token), 200);
        const ours = expectStatus(await post(t.app, SUBSCRIBE, watch, a.token), 200);
        assert.notEqual(ours.subscriptionId, theirs.subscriptionId, "another store's subscription id is not handed out");
        const read = expectStatus(await get(t.app, subscription(ours.subscriptionId), a.token), 200);
        assert.equal(read.shop, a.domain);
      });
    });

    describe('the claim page', () => {
      const page = { accept: 'text/html' };
      const form = (fields: Record<string, string> | string) =>
        call(t.app, 'POST', CLAIM, {
          body: typeof fields === 'string' ? fields : new URLSearchParams(fields).toString(),
          headers: { ...page, 'content-type': 'application/x-www-form-urlencoded' },
        });
      const expectPage = (res: Awaited<ReturnType<typeof form>>, status = 200) => {
        assert.equal(res.statusCode, status, res.body);
        assert.match(res.headers['content-type'] as string, /^text\/html/);
        return res.body;
      };

      it('shows a form, takes the e-mail and then the code as form posts, and claims the agent', async () => {
        const agent = await registerAnonymousAgent(t.app);
        const email = uniqueEmail();
        const pageUrl = `${CLAIM}?claim_token=${agent.claimToken}`;
        const emailPage = expectPage(await call(t.app, 'GET', pageUrl, { headers: page }));
        assert.match(emailPage, /<form method="post" action="\/api\/agent\/claim">/);
        assert.match(emailPage, new RegExp(`name="claim_token" value="${agent.claimToken}"`));
        assert.match(emailPage, /name="email"/);

        assert.match(expectPage(await form({ claim_token: agent.claimToken, email })), /name="otp"/);
        assert.match(expectPage(await call(t.app, 'GET', pageUrl, { headers: page })), /We sent a code to/);

        const done = expectPage(await form({ claim_token: agent.claimToken, otp: await mailedCode(t.database, email) }));
        assert.match(done, /Agent claimed/);
        assert.ok(done.includes(agent.registrationId));
        assert.equal(expectStatus(await get(t.app, ME, agent.token), 200).email, email);
      });

      it('refuses a repeated form field, changing nothing', async () => {
        const agent = await registerAnonymousAgent(t.app);
        const before = await t.tableDigests();
        const repeated = new URLSearchParams([['claim_token', agent.claimToken], ['email', uniqueEmail()], ['email', uniqueEmail()]]).toString();
        expectPage(await form(repeated), 400);
        const res = await call(t.app, 'POST', CLAIM, { body: repeated, headers: { 'content-type': 'application/x-www-form-urlencoded' } });
        const problem = expectProblem(res, 400, 'validation-failed');
        assert.deepEqual(problem.errors.map((e: { pointer: string }) => e.pointer), ['/body/email']);
        assert.deepEqual(await t.tableDigests(), before);
      });

      it('answers an unknown claim token with a page saying so', async () => {
        assert.match(expectPage(await call(t.app, 'GET', `${CLAIM}?claim_token=clm_unknown`, { headers: page }), 400), /claim could not be completed/);
      });
    });

    describe('claim codes over SMTP', () => {
      let sink: SmtpSink;
      let s: TestApp;
      before(async () => {
        sink = await startSmtpSink({ refuseRecipient: (address) => address.startsWith('unreachable.') });
        s = await startTestApp(dialect, { SMTP_URL: sink.url });
      });
      after(async () => {
        // The app first: its mail transport must have let go of the sink.
        await s.close();
        await sink.close();
      });

      it('the code reaches the SMTP server and completes the claim', async () => {
        const agent = await registerAnonymousAgent(s.app);
        const email = uniqueEmail();
        expectStatus(await requestCode(s.app, agent.claimToken, email), 200);
        const mail = await sink.waitFor((m) => m.recipients.includes(email));
        const claimed = expectStatus(await submitCode(s.app, agent.claimToken, codeIn(mail.text)), 200);
        assert.equal(claimed.status, 'claimed');
        assert.equal((await s.counts()).mail_outbox, 0, 'nothing went to the outbox');
      });

      // A mail outage must not burn the claim token: after 5 undelivered codes the agent could only register anew.
      it('a code the server refuses answers 503 and does not use up one of the claim token\'s codes', async () => {
        const agent = await registerAnonymousAgent(s.app);
        for (let tried = 0; tried < 5; tried++) {
          const refused = expectProblem(await requestCode(s.app, agent.claimToken, uniqueEmail('unreachable')), 503, 'service-unavailable');
          assert.match(refused.detail, /could not be e-mailed/);
        }
        expectStatus(await requestCode(s.app, agent.claimToken, uniqueEmail()), 200);
      });
    });

    describe('restock store create', () => {
      it('refuses a bad domain or e-mail with exit code 2, saying which', async () => {
        const before = await t.tableDigests();
        const refusals: Array<[string[], RegExp]> = [
          [['not a store', '--owner', uniqueEmail()], /^restock: domain: must be a store domain such as my-store\.myshopify\.com or shop\.example\.com\n$/],
          [[uniqueDomain(), '--owner', 'nobody'], /^restock: --owner: must be a valid e-mail address\n$/],
          [[uniqueDomain()], /^Usage: restock store create <domain> --owner <email> \[--platform <name>\]\n$/],
          [['shop.example.com', '--owner', uniqueEmail()], /^restock: --platform: is required: shop\.example\.com does not tell its platform/],
          [[uniqueDomain(), '--owner', uniqueEmail(), '--platform', 'woocommerce'], /^restock: --platform: must be shopify: .* is a shopify store's domain\n$/],
          [['shop.example.com', '--owner', uniqueEmail(), '--platform', 'Woo Commerce'], /^restock: --platform: must be a platform name in lower case/],
        ];
        const runs = await Promise.all(refusals.map(([args]) => restock(['store', 'create', ...args], t.testDatabase.url)));
        runs.forEach((run, i) => {
          assert.equal(run.status, 2, run.stderr);
          assert.match(run.stderr, refusals[i]![1]);
          assert.equal(run.stdout, '');
        });
        assert.deepEqual(await t.tableDigests(), before);
      });

      it('creates the store, and its owner can then claim an agent for it', async () => {
        const domain = uniqueDomain();
        const owner = uniqueEmail('owner');
        const created = await restock(['store', 'create', domain, '--owner', owner], t.testDatabase.url);
        assert.equal(created.status, 0, created.stderr);
        assert.equal(created.stdout, `Store ${domain} is owned by ${owner}.\n`);

        const agent = await agentOf(t.app, t.database, domain, owner);
        assert.equal(expectStatus(await get(t.app, storeUrl(domain), agent.token), 200).ownerEmail, owner);
      });

      it("a new owner unbinds the former owner's agents at once, and keeps their own", async () => {
        const domain = uniqueDomain();
        const former = uniqueEmail('former');
        const next = uniqueEmail('next');
        assert.equal((await restock(['store', 'create', domain, '--owner', former], t.testDatabase.url)).status, 0);
        const formerAgent = await agentOf(t.app, t.database, domain, former);
        assert.equal((await restock(['store', 'create', domain, '--owner', next], t.testDatabase.url)).status, 0);
        const nextAgent = await agentOf(t.app, t.database, domain, next);
        const again = await restock(['store', 'create', domain, '--owner', next], t.testDatabase.url);
        assert.equal(again.stdout, `Store ${domain} is owned by ${next}.\n`, 'nothing left to unbind');

        expectStatus(await get(t.app, storeUrl(domain), formerAgent.token), 404);
        const me = expectStatus(await get(t.app, ME, formerAgent.token), 200);
        assert.equal(me.store, null);
        assert.ok(!me.scopes.includes('inventory:alerts'), JSON.stringify(me.scopes));
        expectStatus(await get(t.app, storeUrl(domain), nextAgent.token), 200);
      });
    });
  });
}
