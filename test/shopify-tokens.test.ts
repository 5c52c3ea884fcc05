import assert from 'node:assert/strict';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../src/app.ts';
import type { ShopifyFeature } from '../src/shopify/feature.ts';
import { Database } from '../src/core/db/database.ts';
import { AccessTokens, ReauthorizationRequired } from '../src/shopify/access-tokens.ts';
import { AdminApi } from '../src/shopify/admin-api.ts';
import { createShopifyApi } from '../src/shopify/shopify-api.ts';
import type { ShopifyConnections } from '../src/shopify/connections.ts';
import { dialectSkip, startTestApp, testDialects, type TestApp } from './fixtures/app.ts';
import { failOnLeakedHandles } from './fixtures/leaks.ts';
import { startShopifyAdmin, type ShopifyAdminStandIn } from './fixtures/shopify-admin.ts';
import { deliverWebhook, installByOAuth, installByTokenExchange, shopifyTestApp } from './fixtures/shopify-app.ts';
import { after, afterEach, before, describe, it } from './fixtures/suites.ts';

/** The app's Shopify feature, as the platform registry built it. */
const shopifyOf = (app: FastifyInstance) => app.restock.platforms.shopify as ShopifyFeature;

failOnLeakedHandles();

const { apiKey: API_KEY, apiSecret: API_SECRET, scopes: SCOPES, env: ENV } = shopifyTestApp('restock-token-test-app');
const MINUTE = 60_000;
const BROWSER = { 'user-agent': 'Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Safari/605.1.15' };

let counter = 0;
const unique = () => `${Date.now() % 1_000_000}${++counter}`;
const newShop = () => `tokens-${unique()}.myshopify.com`;

/** One process's view: the library, the token source and the Admin API over its own app's Shopify connections. */
function tokenSource(t: TestApp, connections: ShopifyConnections) {
  const shopify = createShopifyApi(t.config.platforms.shopify!, t.config.baseUrl, t.app.log);
  const tokens = new AccessTokens(shopify, connections, t.app.log);
  return { tokens, admin: new AdminApi(shopify, tokens) };
}

async function connectionRow(t: TestApp, shop: string) {
  return t.database.db.selectFrom('store_connections').selectAll().where('store_domain', '=', shop).where('platform', '=', 'shopify').executeTakeFirstOrThrow();
}

for (const dialect of testDialects()) {
  describe(`Expiring offline tokens on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    let t: TestApp;
    let shopify: ShopifyAdminStandIn;
    before(async () => {
      shopify = await startShopifyAdmin({ apiKey: API_KEY, apiSecret: API_SECRET, scopes: SCOPES });
      t = await startTestApp(dialect, ENV);
    });
    after(async () => {
      await t.close();
      await shopify.close();
    });
    afterEach(() => shopify.delayTokenAnswers(0));

    /**
     * `minutes` pass, as both sides see them: Shopify's clock moves on, and the expiry we stored
     * comes that much nearer.
     */
    async function pass(shop: string, minutes: number) {
      shopify.advanceClock(minutes * MINUTE);
      const expiresAt = (await connectionRow(t, shop)).credentials_expire_at!;
      await t.database.db
        .updateTable('store_connections')
        .set({ credentials_expire_at: new Date(Date.parse(expiresAt) - minutes * MINUTE).toISOString() })
        .where('store_domain', '=', shop)
        .execute();
    }

    const refreshes = (shop: string) => shopify.tokenGrants(shop).filter((grant) => grant === 'refresh_token').length;
    /** The tokens the Admin API saw for the shop after the install's own call (reading the owner's address). */
    const presentedAfterInstall = (shop: string) => shopify.adminApiTokens(shop).slice(1);

    it('token exchange asks for an expiring token; the access and refresh tokens are kept sealed with their expiries', async () => {
      const shop = newShop();
      const installedAt = Date.now();
      await installByTokenExchange(t, shopify, shop);
      assert.deepEqual(shopify.tokenGrants(shop), ['token_exchange']);
      const accessToken = shopify.accessToken(shop)!;
      const refreshToken = shopify.refreshToken(shop);
      assert.ok(refreshToken, 'Shopify handed out an expiring token, which comes with a refresh token');
      const row = await connectionRow(t, shop);
      const stored = JSON.stringify(row);
      for (const secret of [accessToken, refreshToken, accessToken.slice(6), refreshToken.slice(6)]) {
        assert.ok(!stored.includes(secret), 'neither token, nor its random part, is readable in the row');
      }
      assert.ok(row.refresh_credentials_sealed);
      assert.ok(Math.abs(Date.parse(row.credentials_expire_at!) - (installedAt + 60 * MINUTE)) < 5_000, 'the access token lasts an hour');
      assert.ok(Math.abs(Date.parse(row.refresh_credentials_expire_at!) - (installedAt + 90 * 24 * 60 * MINUTE)) < 5_000, 'the refresh token lasts 90 days');
      assert.equal(row.reauthorization_required_at, null);
      const opened = await shopifyOf(t.app).connections.offlineToken(shop);
      assert.equal(opened?.accessToken, accessToken);
      assert.equal(opened?.expiring?.refreshToken, refreshToken);
    });

    it('OAuth asks for an expiring token too', async () => {
      const shop = newShop();
      await installByOAuth(t, shopify, shop, API_SECRET);
      assert.deepEqual(shopify.tokenGrants(shop), ['authorization_code']);
      assert.ok(shopify.refreshToken(shop), 'Shopify handed out an expiring token, which comes with a refresh token');
      const opened = await shopifyOf(t.app).connections.offlineToken(shop);
      assert.equal(opened?.accessToken, shopify.accessToken(shop));
      assert.equal(opened?.expiring?.refreshToken, shopify.refreshToken(shop));
    });

    it('a token far from expiry is used as it is; within five minutes of expiry it is refreshed first and the new pair stored', async () => {
      const shop = newShop();
      await installByTokenExchange(t, shopify, shop);
      const { tokens, admin } = tokenSource(t, shopifyOf(t.app).connections);
      const first = shopify.accessToken(shop)!;
      const firstRefresh = shopify.refreshToken(shop)!;
      assert.equal(await tokens.current(shop), first);
      assert.equal(refreshes(shop), 0, 'nothing to refresh yet');

      await pass(shop, 56);
      const fresh = await tokens.current(shop);
      assert.equal(refreshes(shop), 1);
      assert.ok(fresh && fresh !== first);
      assert.equal(fresh, shopify.accessToken(shop), 'the token Shopify handed out last');
      const stored = await shopifyOf(t.app).connections.offlineToken(shop);
      assert.equal(stored?.accessToken, fresh);
      assert.equal(stored?.expiring?.refreshToken, shopify.refreshToken(shop), 'the replaced refresh token is stored with it');
      assert.notEqual(stored?.expiring?.refreshToken, firstRefresh);
      assert.ok(Date.parse(stored!.expiring!.expiresAt) - Date.now() > 55 * MINUTE, 'good for another hour');
      assert.equal((await connectionRow(t, shop)).refresh_lease_until, null, 'the lease is given back');

      assert.equal(await admin.shopEmail(shop, fresh), `owner@${shop}`);
      assert.deepEqual(presentedAfterInstall(shop), [fresh], 'after the install, the Admin API only ever saw the fresh token');
    });

    it("the worker's Admin API lookup refreshes a token near expiry before calling", async () => {
      const shop = newShop();
      await installByTokenExchange(t, shopify, shop);
      const stale = shopify.accessToken(shop)!;
      await pass(shop, 57);
      const item = Number(`${Date.now() % 1_000_000}${++counter}`);
      const delivery = await deliverWebhook(t, API_SECRET, {
        topic: 'inventory_levels/update',
        shop,
        payload: { inventory_item_id: item, location_id: 1, available: 3, updated_at: new Date().toISOString() },
      });
      assert.equal(delivery.statusCode, 200, delivery.body);
      await t.runWorker();
      assert.equal(refreshes(shop), 1);
      const presented = presentedAfterInstall(shop);
      assert.ok(presented.length > 0, 'the worker looked the item up');
      assert.ok(!presented.includes(stale), 'never with the token about to expire');
      assert.ok(presented.every((token) => token === shopify.accessToken(shop)));
    });

    it('an Admin API 401 refreshes the token once and retries the call', async () => {
      const shop = newShop();
      await installByTokenExchange(t, shopify, shop);
      const { tokens, admin } = tokenSource(t, shopifyOf(t.app).connections);
      const stale = (await tokens.current(shop))!;
      // Shopify's clock runs ahead of ours: the token has expired there while we think it has minutes left.
      shopify.advanceClock(61 * MINUTE);
      assert.equal(await admin.shopEmail(shop, stale), `owner@${shop}`);
      const fresh = shopify.accessToken(shop)!;
      assert.deepEqual(presentedAfterInstall(shop), [stale, fresh], 'refused once, then the same call with the fresh token');
      assert.equal(refreshes(shop), 1);
      assert.equal((await shopifyOf(t.app).connections.offlineToken(shop))?.accessToken, fresh);

      // A caller still holding the old token after another refreshed gets the stored one, without refreshing again.
      assert.equal(await admin.shopEmail(shop, stale), `owner@${shop}`);
      assert.equal(refreshes(shop), 1);
    });

    it('a refresh racing between two processes on one database is done once, and both use the new token', async () => {
      const shop = newShop();
      await installByTokenExchange(t, shopify, shop);
      const stale = shopify.accessToken(shop)!;
      const otherDatabase = Database.open(t.config.database);
      let other: FastifyInstance | undefined;
      try {
        other = await buildApp(t.config, otherDatabase);
        await other.ready();
        const one = tokenSource(t, shopifyOf(t.app).connections);
        const two = tokenSource(t, shopifyOf(other).connections);
        await pass(shop, 58);
        // Slow enough answers that the second process asks while the first is still refreshing.
        shopify.delayTokenAnswers(400);
        const [a, b] = await Promise.all([one.tokens.current(shop), two.tokens.current(shop)]);
        assert.equal(refreshes(shop), 1, 'one refresh at Shopify');
        assert.ok(a && a !== stale);
        assert.equal(a, b, 'both processes use the token the refresh brought');
        assert.equal(a, shopify.accessToken(shop), 'which Shopify still accepts: no second refresh revoked it');
        assert.equal(await one.admin.shopEmail(shop, a), `owner@${shop}`);
        assert.equal(await two.admin.shopEmail(shop, b!), `owner@${shop}`);
        assert.equal(refreshes(shop), 1);
      } finally {
        await other?.close();
        await otherDatabase.close();
      }
    });

    it('a refused refresh token marks the store for re-authorisation, nothing more is sent with the dead token, and opening the app again clears it', async () => {
      const shop = newShop();
      await installByTokenExchange(t, shopify, shop);
      const { tokens, admin } = tokenSource(t, shopifyOf(t.app).connections);
      const dead = (await tokens.current(shop))!;
      shopify.revokeTokens(shop);

      await assert.rejects(admin.shopEmail(shop, dead), ReauthorizationRequired);
      assert.deepEqual(presentedAfterInstall(shop), [dead], 'the Admin API refused it once');
      const row = await connectionRow(t, shop);
      assert.ok(row.reauthorization_required_at, 'the store needs the merchant');
      assert.equal((await t.app.restock.stores.getStore(shop)).status, 'active', 'the store stays installed');
      assert.equal(row.status, 'connected');
      assert.ok(row.credentials_sealed, 'with its data');
      assert.equal(row.refresh_lease_until, null);
      assert.equal((await t.app.restock.stores.getStore(shop)).adminApiConnected, false);
      assert.ok(!(await shopifyOf(t.app).connections.storesToReconcile(0, 1000)).includes(shop), 'reconciliation leaves it alone');

      const seen = shopify.requests.length;
      await assert.rejects(tokens.current(shop), ReauthorizationRequired);
      await deliverWebhook(t, API_SECRET, {
        topic: 'inventory_levels/update',
        shop,
        payload: { inventory_item_id: Number(`${Date.now() % 1_000_000}${++counter}`), location_id: 1, available: 3, updated_at: new Date().toISOString() },
      });
      await t.runWorker();
      assert.equal(shopify.requests.length, seen, 'nothing asked of Shopify any more, not even a refresh');
      assert.deepEqual(presentedAfterInstall(shop), [dead]);

      // The merchant opens the app from the admin: a new token, and the store is connected again.
      const query = new URLSearchParams({
        embedded: '1',
        host: Buffer.from(`admin.shopify.com/store/${shop}`).toString('base64url'),
        id_token: await shopify.sessionToken(shop),
        shop,
        timestamp: String(Math.floor(Date.now() / 1000)),
      });
      const reopened = await t.app.inject({ method: 'GET', url: `/shopify/install?${query}`, headers: BROWSER });
      assert.equal(reopened.statusCode, 303, reopened.body);
      assert.equal((await connectionRow(t, shop)).reauthorization_required_at, null);
      assert.equal((await t.app.restock.stores.getStore(shop)).adminApiConnected, true);
      const renewed = await tokens.current(shop);
      assert.equal(renewed, shopify.accessToken(shop));
      assert.equal(await admin.shopEmail(shop, renewed!), `owner@${shop}`);
    });

    it('a store installed with a non-expiring token is migrated on first use; Shopify then refuses the old token', async () => {
      const shop = newShop();
      shopify.addShop(shop, { email: `owner@${shop}` });
      // As an earlier release installed it: a token that never expires, and no refresh token.
      const permanent = shopify.grantNonExpiringToken(shop);
      await shopifyOf(t.app).connections.install(shop, { accessToken: permanent, scopes: SCOPES, ownerEmail: `owner@${shop}` });
      const { tokens, admin } = tokenSource(t, shopifyOf(t.app).connections);

      const migrated = await tokens.current(shop);
      assert.deepEqual(shopify.tokenGrants(shop), ['authorization_code', 'migration']);
      assert.ok(migrated && migrated !== permanent);
      const stored = await shopifyOf(t.app).connections.offlineToken(shop);
      assert.equal(stored?.accessToken, migrated);
      assert.equal(stored?.expiring?.refreshToken, shopify.refreshToken(shop), 'an expiring token with its refresh token');
      assert.equal(await tokens.current(shop), migrated, 'migrated once');

      // A caller that still held the old token is refused by Shopify and given the migrated one.
      assert.equal(await admin.shopEmail(shop, permanent), `owner@${shop}`);
      assert.deepEqual(shopify.adminApiTokens(shop), [permanent, migrated]);
      assert.deepEqual(shopify.tokenGrants(shop), ['authorization_code', 'migration']);
    });
  });
}
