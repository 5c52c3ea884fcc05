/**
 * A claim grants what the registration asked for, no more (finding 9): an agent registered
 * with `scope` keeps to it when a person claims it, and gains `inventory:alerts` from its
 * store's owner only when it asked for that too (or asked for no scope in particular), by
 * every registration method.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from '../fixtures/suites.ts';
import { dialectSkip, startTestApp, testDialects, type TestApp } from '../fixtures/app.ts';
import {
  ID_JAG,
  ME,
  REGISTER,
  call,
  claimWithCode,
  createStore,
  expectProblem,
  expectStatus,
  get,
  mailedCode,
  post,
  registerVerified,
  submitCode,
  uniqueDomain,
  uniqueEmail,
} from '../fixtures/agents.ts';
import { startIdentityProvider, type TestIdentityProvider } from '../fixtures/identity-provider.ts';
import { failOnLeakedHandles } from '../fixtures/leaks.ts';

failOnLeakedHandles();

const SUBSCRIBE = '/api/v1/alerts/subscribe';

for (const dialect of testDialects()) {
  describe(`what a claim grants on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    let idp: TestIdentityProvider;
    let t: TestApp;
    before(async () => {
      idp = await startIdentityProvider({ audience: 'http://restock.test' });
      t = await startTestApp(dialect, { AGENT_TRUSTED_ISSUERS: JSON.stringify([idp.trusted]) });
    });
    after(async () => {
      await t.close();
      await idp.close();
    });

    async function store(): Promise<{ domain: string; owner: string }> {
      const domain = uniqueDomain('scoped');
      const owner = uniqueEmail('scoped-owner');
      await createStore(t.database, domain, owner);
      return { domain, owner };
    }

    /** An anonymous registration asking for `scope`, claimed by the owner naming the store (or no store). */
    async function claimedAnonymous(scope: string | undefined, bindTo?: { domain: string; owner: string }) {
      const registered = expectStatus(await post(t.app, REGISTER, { type: 'anonymous', ...(scope && { scope }) }), 201);
      const claimed = await claimWithCode(t.app, t.database, registered.claim_token, bindTo?.owner ?? uniqueEmail('claimer'), bindTo?.domain);
      return { registered, claimed };
    }

    /** The scopes the agent holds now, as every later request sees them. */
    async function held(registrationId: string): Promise<string> {
      return (await t.database.db.selectFrom('agents').select('scopes').where('id', '=', registrationId).executeTakeFirstOrThrow()).scopes;
    }

    it('finding 9: an agent registered with api:read and claimed for a store holds api:read only', async () => {
      const shop = await store();
      const { registered, claimed } = await claimedAnonymous('api:read', shop);
      const me = expectStatus(await get(t.app, ME, claimed.credential), 200);
      assert.deepEqual(registered.post_claim_scopes, ['api:read'], 'the offer says what the claim will grant');
      assert.equal(claimed.store, shop.domain, 'bound all the same');
      assert.deepEqual(claimed.scopes, ['api:read']);
      assert.deepEqual(me.scopes, ['api:read']);
      assert.deepEqual(me.token_scopes, ['api:read']);
      expectProblem(await call(t.app, 'POST', SUBSCRIBE, { token: claimed.credential, body: { productId: 'gid://shopify/Product/1', email: uniqueEmail('shopper'), shop: shop.domain } }), 403, 'insufficient-scope');
      assert.equal(await held(claimed.registration_id), 'api:read');
    });

    it('finding 9: a store binding adds inventory:alerts only to an agent that asked for it, or asked for no scope', async () => {
      const cases: Array<[string | undefined, boolean, string[]]> = [
        ['api:read inventory:alerts', true, ['api:read', 'inventory:alerts']],
        ['api:read api:write', true, ['api:read', 'api:write']],
        ['api:write', false, ['api:write']],
        ['inventory:alerts', false, []],
        [undefined, true, ['api:read', 'api:write', 'inventory:alerts']],
        [undefined, false, ['api:read', 'api:write']],
      ];
      for (const [scope, bound, granted] of cases) {
        const { claimed } = await claimedAnonymous(scope, bound ? await store() : undefined);
        assert.deepEqual(claimed.scopes, granted, `${scope ?? 'no scope'}, ${bound ? 'bound' : 'unbound'}`);
        assert.equal(await held(claimed.registration_id), granted.join(' '));
      }
    });

    it('finding 9: a verified e-mail registration naming its store gets what it asked for', async () => {
      const shop = await store();
      const registered = await registerVerified(t.app, shop.owner, { store: shop.domain, scope: 'api:read' });
      assert.deepEqual(registered.post_claim_scopes, ['api:read']);
      const claimed = expectStatus(await submitCode(t.app, registered.claim_token, await mailedCode(t.database, shop.owner)), 200);
      assert.equal(claimed.store, shop.domain);
      assert.deepEqual(claimed.scopes, ['api:read']);
      assert.equal(await held(claimed.registration_id), 'api:read');
    });

    it("finding 9: an ID-JAG agent's claim keeps to its first registration's scope and its provider's scope claim", async () => {
      for (const [asked, byProvider, granted] of [
        ['api:read', undefined, ['api:read']],
        [undefined, 'api:write inventory:alerts', ['api:write', 'inventory:alerts']],
      ] as const) {
        const shop = await store();
        const sub = `scoped-${shop.domain}`;
        const registered = expectStatus(
          await post(t.app, REGISTER, { ...ID_JAG, assertion: await idp.mint({ sub, ...(byProvider && { scope: byProvider }) }), ...(asked && { scope: asked }) }),
          201,
        );
        const claimed = await claimWithCode(t.app, t.database, registered.claim_token, shop.owner, shop.domain);
        assert.deepEqual(claimed.scopes, granted, `${asked} / ${byProvider}`);
        // A later assertion asking for more gets no more than the claimed agent holds.
        const again = expectStatus(await post(t.app, REGISTER, { ...ID_JAG, assertion: await idp.mint({ sub }), scope: 'api:read api:write inventory:alerts' }), 201);
        assert.deepEqual(again.scopes, granted);
      }
    });
  });
}
