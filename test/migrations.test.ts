/**
 * Migrations on a database that holds rows from before them. 0020: every store had a
 * myshopify.com domain, so each becomes a Shopify store and nothing else of it changes. 0021
 * moves WooCommerce connections into the platform-neutral `store_connections` unchanged. 0022
 * lets a subscription keep several phones and browsers, each alerted once per restock. 0023
 * remembers each cancelled plan subscription, the ones store_plans shows cancelled included.
 * 0024 moves Shopify stores' tokens from `stores` into `store_connections`, still sealed, and the
 * app reads them there.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Migrator, sql, type Kysely, type Migration } from 'kysely';
import { after, before, describe, it } from './fixtures/suites.ts';
import { failOnLeakedHandles } from './fixtures/leaks.ts';
import { dialectSkip, testDialects } from './fixtures/app.ts';
import { pgAdmin, pgUrlFor } from './fixtures/services.ts';
import { ContactPointRepository } from '../src/alerts/contact-points.ts';
import { BillingRepository } from '../src/billing/repository.ts';
import { LocalChangeBus } from '../src/core/changes/bus.ts';
import { ConnectionRepository } from '../src/core/connectors/connections.ts';
import { Database } from '../src/core/db/database.ts';
import type { Dialect } from '../src/core/db/dialect.ts';
import type { StorePlanStatus } from '../src/core/db/schema.ts';
import { migrations } from '../src/core/db/migrations/index.ts';
import { SecretBox } from '../src/core/sealed-secrets.ts';
import { ShopifyConnections } from '../src/shopify/connections.ts';
import { StoreRepository } from '../src/stores/repository.ts';
import { StoreService } from '../src/stores/service.ts';

failOnLeakedHandles();

/** An empty database of the dialect, migrated by nobody yet. */
async function emptyDatabase(dialect: Dialect): Promise<{ database: Database; drop(): Promise<void> }> {
  if (dialect === 'sqlite') {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'restock-migration-'));
    const database = Database.open({ dialect: 'sqlite', file: path.join(dir, 'restock.db'), synchronous: 'FULL', busyTimeoutMs: 200 });
    return { database, drop: async () => rmSync(dir, { recursive: true, force: true }) };
  }
  const name = `restock_m_${randomBytes(4).toString('hex')}`;
  await pgAdmin(`create database ${name}`);
  const database = Database.open({ dialect: 'postgres', url: pgUrlFor(name), poolMax: 2 });
  return { database, drop: () => pgAdmin(`drop database if exists ${name} with (force)`) };
}

/** An empty database for the tests of one suite, made before them and dropped after them. */
function emptyDatabaseForSuite(dialect: Dialect): () => Awaited<ReturnType<typeof emptyDatabase>> {
  let empty: Awaited<ReturnType<typeof emptyDatabase>> | undefined;
  before(async () => {
    empty = await emptyDatabase(dialect);
  });
  after(async () => {
    await empty?.database.close();
    await empty?.drop();
  });
  return () => empty!;
}

/** Applies the migrations before `stop`, as a deployment of that release had them. */
async function migrateBefore(database: Database, stop: string): Promise<void> {
  const earlier: Record<string, Migration> = {};
  for (const [name, migration] of Object.entries(migrations)) {
    if (name >= stop) break;
    earlier[name] = { up: (db) => migration.up(db, database.dialect) };
  }
  const { error } = await new Migrator({ db: database.db, provider: { getMigrations: async () => earlier } }).migrateToLatest();
  if (error) throw error;
}

/** Applies the migrations up to `last` and no further, so a test sees the tables `last` left; returns the names applied. */
async function migrateThrough(database: Database, last: string): Promise<string[]> {
  const through: Record<string, Migration> = {};
  for (const [name, migration] of Object.entries(migrations)) {
    if (name > last) break;
    through[name] = { up: (db) => migration.up(db, database.dialect) };
  }
  const { error, results } = await new Migrator({ db: database.db, provider: { getMigrations: async () => through } }).migrateToLatest();
  if (error) throw error;
  return (results ?? []).map((result) => result.migrationName);
}

for (const dialect of testDialects()) {
  describe(`migration 0020 (store platforms) on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    const empty = emptyDatabaseForSuite(dialect);

    it("makes every store from before a Shopify store, the app's installed ones and the operator's alike, and changes nothing else", async () => {
      const { database } = empty();
      await migrateBefore(database, '0020_store_platforms');
      const at = '2026-01-02T03:04:05.678Z';
      const stores = [
        { domain: 'made-by-cli.myshopify.com', owner_email: 'a@example.com', created_at: at, updated_at: at, status: 'active', settings: '{"minStock":2}', platform: null, installed_at: null },
        { domain: 'installed.myshopify.com', owner_email: 'b@example.com', created_at: at, updated_at: at, status: 'active', settings: '{}', platform: 'shopify', installed_at: at },
        { domain: 'removed.myshopify.com', owner_email: 'c@example.com', created_at: at, updated_at: at, status: 'uninstalled', settings: '{}', platform: 'shopify', installed_at: at },
      ];
      await database.db.insertInto('stores').values(stores as never).execute();
      const read = () => database.db.selectFrom('stores').selectAll().orderBy('domain').execute();
      const before = await read();

      assert.equal((await migrateThrough(database, '0020_store_platforms'))[0], '0020_store_platforms');
      const migrated = await read();
      assert.deepEqual(
        migrated.map((row) => row.platform),
        migrated.map(() => 'shopify'),
      );
      assert.deepEqual(
        migrated.map(({ platform: _, ...rest }) => rest),
        before.map(({ platform: _, ...rest }) => rest),
        'nothing but the platform changed',
      );
    });
  });

  describe(`migration 0021 (store connections) on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    const empty = emptyDatabaseForSuite(dialect);

    it('moves every WooCommerce connection into store_connections as it was, and drops the old table', async () => {
      const { database } = empty();
      await migrateBefore(database, '0021_store_connections');
      const at = '2026-01-02T03:04:05.678Z';
      const connection = {
        store_domain: 'shop.example.com',
        site_url: 'https://shop.example.com/',
        status: 'disconnected',
        keys_sealed: null,
        webhook_secret_sealed: 'sealed-secret',
        webhook_ids: '[101,102,103]',
        connected_at: at,
        disconnected_at: at,
        disconnect_reason: 'disconnected by the store',
        reconciled_at: at,
        updated_at: at,
      };
      await (database.db as never as Kysely<any>).insertInto('woocommerce_connections').values(connection).execute();

      assert.equal((await migrateThrough(database, '0021_store_connections'))[0], '0021_store_connections');
      const rows = await database.db.selectFrom('store_connections').selectAll().execute();
      const { site_url, keys_sealed, ...rest } = connection;
      assert.equal(rows.length, 1);
      const [row] = rows;
      assert.deepEqual(
        { ...row, connected_at: new Date(row!.connected_at).toISOString(), disconnected_at: new Date(row!.disconnected_at!).toISOString(), reconciled_at: new Date(row!.reconciled_at!).toISOString(), updated_at: new Date(row!.updated_at).toISOString() },
        { ...rest, platform: 'woocommerce', site: site_url, credentials_sealed: keys_sealed },
      );
      await assert.rejects(sql`select count(*) from woocommerce_connections`.execute(database.db), 'the old table is gone');
    });
  });

  describe(`migration 0022 (contact points per address) on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    const empty = emptyDatabaseForSuite(dialect);

    it('keeps the contact points and alerts there were; then a second browser joins a subscription, and each is alerted once per restock', async () => {
      const { database } = empty();
      await migrateBefore(database, '0022_contact_points_per_address');
      const db = database.db as never as Kysely<any>;
      const at = '2026-01-02T03:04:05.678Z';
      const point = (id: string, address: string) => ({
        id,
        subscription_id: 'sub_1',
        store_domain: 'shop.myshopify.com',
        channel: 'push',
        address,
        address_key: address,
        push_p256dh: 'p256dh',
        push_auth: 'auth',
        status: 'active',
        time_zone: null,
        consent_method: 'browser-permission',
        consent_text: 'allowed',
        consent_page: null,
        consent_at: at,
        confirmed_at: at,
        status_reason: null,
        confirmation_sent_at: null,
        created_at: at,
        updated_at: at,
      });
      await db.insertInto('contact_points').values(point('cp_1', 'https://push.example/a')).execute();
      const alert = (id: string, channel: string, contactPointId: string | null) => ({
        id,
        restock_id: 'rst_1',
        subscription_id: 'sub_1',
        store_domain: 'shop.myshopify.com',
        email: 'jane@example.com',
        email_key: 'jane@example.com',
        product_id: 'gid://shopify/Product/1',
        variant_id: null,
        batch: 1,
        position: 0,
        status: 'sent',
        reason: 'test',
        attempts: 1,
        next_attempt_at: at,
        created_at: at,
        kind: 'alert',
        channel,
        contact_point_id: contactPointId,
      });
      await db.insertInto('notifications').values([alert('ntf_1', 'email', null), alert('ntf_2', 'push', 'cp_1')]).execute();

      assert.equal((await migrateThrough(database, '0022_contact_points_per_address'))[0], '0022_contact_points_per_address');
      assert.deepEqual((await db.selectFrom('notifications').select('id').orderBy('id').execute()).map((row) => row.id), ['ntf_1', 'ntf_2'], 'the ledger as it was');
      await db.insertInto('contact_points').values(point('cp_2', 'https://push.example/b')).execute();
      await assert.rejects(db.insertInto('contact_points').values(point('cp_3', 'https://push.example/b')).execute(), 'one contact point per address');
      await db.insertInto('notifications').values(alert('ntf_3', 'push', 'cp_2')).execute();
      await assert.rejects(db.insertInto('notifications').values(alert('ntf_4', 'push', 'cp_2')).execute(), 'one alert per restock and browser');
      await assert.rejects(db.insertInto('notifications').values(alert('ntf_5', 'email', null)).execute(), 'and still one e-mail per restock');
    });
  });

  describe(`migration 0023 (cancelled subscriptions) on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    const empty = emptyDatabaseForSuite(dialect);

    it("keeps every plan row and remembers each one's cancelled subscription, so its late news cannot revive it once another is cancelled too", async () => {
      const { database } = empty();
      await migrateBefore(database, '0023_cancelled_subscriptions');
      const at = (minute: number) => new Date(Date.UTC(2026, 0, 2, 3, minute)).toISOString();
      const plan = (shop: string, status: StorePlanStatus, provider: string, externalId: string | null, eventAt: string | null) => ({
        shop,
        plan: 'starter',
        status,
        checkout_session_id: null,
        activated_at: at(1),
        updated_at: at(6),
        provider,
        external_id: externalId,
        period_start: at(1),
        period_end: at(50),
        event_at: eventAt,
      });
      await database.db
        .insertInto('store_plans')
        .values([
          plan('cancelled.myshopify.com', 'cancelled', 'stripe', 'sub_1', at(5)),
          plan('undated.myshopify.com', 'cancelled', 'shopify', 'gid://shopify/AppSubscription/7', null),
          plan('active.myshopify.com', 'active', 'shopify', 'gid://shopify/AppSubscription/8', at(2)),
          plan('local.myshopify.com', 'cancelled', 'local', null, null),
        ])
        .execute();
      const plans = () => database.db.selectFrom('store_plans').selectAll().orderBy('shop').execute();
      const before = await plans();

      assert.equal((await database.migrate())[0], '0023_cancelled_subscriptions');
      assert.deepEqual(await plans(), before, 'the plan rows as they were');
      const cancelled = await database.db.selectFrom('cancelled_subscriptions').selectAll().orderBy('shop').execute();
      assert.deepEqual(
        cancelled.map((row) => ({ ...row, cancelled_at: new Date(row.cancelled_at).toISOString() })),
        [
          { provider: 'stripe', external_id: 'sub_1', shop: 'cancelled.myshopify.com', cancelled_at: at(5) },
          // Undated by its provider: cancelled by the time the row was last written.
          { provider: 'shopify', external_id: 'gid://shopify/AppSubscription/7', shop: 'undated.myshopify.com', cancelled_at: at(6) },
        ],
      );

      // A second subscription is bought and cancelled; then the first one's older news arrives.
      const billing = new BillingRepository(database);
      const news = (id: string, status: 'active' | 'cancelled', externalId: string, minute: number) =>
        billing.applyEvent('stripe', id, 'customer.subscription.updated', { shop: 'cancelled.myshopify.com', plan: 'starter', status, provider: 'stripe', externalId, at: at(minute) }, at(30));
      assert.equal(await news('evt_2', 'active', 'sub_2', 10), 'cancelled → active');
      assert.equal(await news('evt_3', 'cancelled', 'sub_2', 11), 'active → cancelled');
      assert.match(await news('evt_1', 'active', 'sub_1', 3), /^ignored: .*already cancelled/);
      const row = await billing.planOf('cancelled.myshopify.com');
      assert.deepEqual([row?.external_id, row?.status], ['sub_2', 'cancelled']);
    });
  });

  describe(`migration 0028 (overage) on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    const empty = emptyDatabaseForSuite(dialect);

    it('gives every store that held a plan before it a ceiling of 0, so none is charged beyond its plan until its owner says so', async () => {
      const { database } = empty();
      await migrateBefore(database, '0028_overage');
      const at = new Date(Date.UTC(2026, 0, 2)).toISOString();
      const plan = (shop: string, status: StorePlanStatus, provider: string) => ({ shop, plan: 'growth', status, checkout_session_id: null, activated_at: at, updated_at: at, provider, external_id: null, period_start: null, period_end: null, event_at: null });
      await database.db.insertInto('store_plans').values([plan('held.myshopify.com', 'active', 'local'), plan('ended.myshopify.com', 'cancelled', 'stripe')]).execute();
      await database.db.insertInto('plan_usage').values({ shop: 'held.myshopify.com', period_start: at, used: 7, notified_at: null } as never).execute();

      assert.equal((await database.migrate())[0], '0028_overage');
      const ceilings = await database.db.selectFrom('overage_ceilings').select(['shop', 'ceiling_cents']).orderBy('shop').execute();
      assert.deepEqual(ceilings, [{ shop: 'ended.myshopify.com', ceiling_cents: 0 }, { shop: 'held.myshopify.com', ceiling_cents: 0 }]);
      const usage = await database.db.selectFrom('plan_usage').selectAll().executeTakeFirstOrThrow();
      assert.deepEqual([usage.used, usage.overage, usage.warned_at], [7, 0, null], 'the period so far counted, none of it beyond the allowance');
      const billing = new BillingRepository(database);
      assert.equal(await billing.overageCeiling('held.myshopify.com'), 0);
      assert.equal(await billing.overageCeiling('new.myshopify.com'), undefined, 'a store with no plan before takes the default when it buys one');
    });
  });

  describe(`migration 0025 (contact point details) on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    const empty = emptyDatabaseForSuite(dialect);

    it("moves every browser's push keys into its details, keeps every row and value, and reads them back only through the channel's schema", async () => {
      const { database } = empty();
      await migrateBefore(database, '0025_contact_point_details');
      const db = database.db as never as Kysely<any>;
      const at = '2026-01-02T03:04:05.678Z';
      const point = (id: string, channel: 'sms' | 'push', address: string, keys: { p256dh: string; auth: string } | null) => ({
        id,
        subscription_id: 'sub_1',
        store_domain: 'shop.myshopify.com',
        channel,
        address,
        address_key: `key-${id}`,
        push_p256dh: keys?.p256dh ?? null,
        push_auth: keys?.auth ?? null,
        status: channel === 'sms' ? 'pending' : 'active',
        time_zone: 'Europe/Paris',
        consent_method: channel === 'sms' ? 'storefront-checkbox' : 'browser-permission',
        consent_text: 'allowed',
        consent_page: 'https://shop.example/product',
        consent_at: at,
        confirmed_at: channel === 'sms' ? null : at,
        status_reason: null,
        confirmation_sent_at: null,
        created_at: at,
        updated_at: at,
      });
      const points = [
        point('cp_1', 'push', 'https://push.example/a', { p256dh: 'BPk-key-a', auth: 'auth-a' }),
        point('cp_2', 'push', 'https://push.example/b', { p256dh: 'BPk-key-b', auth: 'auth-b' }),
        point('cp_3', 'sms', '+15555550100', null),
      ];
      await db.insertInto('contact_points').values(points).execute();
      const read = () => db.selectFrom('contact_points').selectAll().orderBy('id').execute();
      const before = await read();

      assert.equal((await database.migrate())[0], '0025_contact_point_details');
      const migrated = await read();
      assert.deepEqual(
        migrated.map(({ details: _, ...rest }) => rest),
        before.map(({ push_p256dh: _key, push_auth: _auth, ...rest }) => rest),
        'every row kept, nothing but the keys moved',
      );
      assert.deepEqual(
        migrated.map((row) => JSON.parse(row.details)),
        [{ p256dh: 'BPk-key-a', auth: 'auth-a' }, { p256dh: 'BPk-key-b', auth: 'auth-b' }, {}],
      );

      const repository = new ContactPointRepository(database);
      const [browser] = await repository.byIds(['cp_1']);
      assert.ok(browser?.channel === 'push');
      assert.deepEqual(browser.details, { p256dh: 'BPk-key-a', auth: 'auth-a' }, 'the repository hands out the parsed details');
      await db.updateTable('contact_points').set({ details: '{"p256dh":"BPk-key-a"}' }).where('id', '=', 'cp_1').execute();
      await assert.rejects(repository.byIds(['cp_1']), /auth/, 'details that do not fit the channel are refused, not handed out');
      await assert.rejects(
        repository.put({ ...browser, id: 'cp_4', address_key: 'key-cp_4', details: { p256dh: '', auth: 'auth-a' } }),
        /p256dh/,
        'nor written',
      );
    });
  });

  describe(`migration 0026 (purchasing) on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    const empty = emptyDatabaseForSuite(dialect);

    it("fills each waitlist's sum of sign-up times from its waiting subscriptions, and its triggers keep it", async () => {
      const { database } = empty();
      await migrateBefore(database, '0026_purchasing');
      const db = database.db as never as Kysely<any>;
      const subscription = (id: string, variantId: string | null, status: string, createdAt: string) => ({
        id,
        product_id: 'gid://shopify/Product/1',
        variant_id: variantId,
        email: `${id}@example.com`,
        email_key: `${id}@example.com`,
        status,
        store_domain: 'shop.myshopify.com',
        created_at: createdAt,
        updated_at: createdAt,
      });
      await db
        .insertInto('subscriptions')
        .values([
          subscription('sub_1', 'gid://shopify/ProductVariant/2', 'active', '2026-01-01T00:00:10.900Z'),
          subscription('sub_2', 'gid://shopify/ProductVariant/2', 'active', '2026-01-02T00:00:00.000Z'),
          subscription('sub_3', 'gid://shopify/ProductVariant/2', 'notified', '2026-01-03T00:00:00.000Z'),
          subscription('sub_4', null, 'active', '2026-01-04T00:00:00.000Z'),
        ])
        .execute();
      const seconds = (iso: string) => Math.floor(Date.parse(iso) / 1000);
      const sums = async () =>
        Object.fromEntries((await db.selectFrom('waitlists').select(['variant_key', 'waiting', 'waiting_since_sum']).execute()).map((row) => [row.variant_key, [Number(row.waiting), Number(row.waiting_since_sum)]]));

      assert.equal((await database.migrate())[0], '0026_purchasing');
      const variant = 'gid://shopify/ProductVariant/2';
      assert.deepEqual(await sums(), { [variant]: [2, seconds('2026-01-01T00:00:10Z') + seconds('2026-01-02T00:00:00Z')], '': [1, seconds('2026-01-04T00:00:00Z')] }, 'the waiting ones only, in whole seconds');

      await db.insertInto('subscriptions').values(subscription('sub_5', variant, 'active', '2026-01-05T00:00:00.000Z')).execute();
      await db.updateTable('subscriptions').set({ status: 'notified' }).where('id', '=', 'sub_1').execute();
      await db.deleteFrom('subscriptions').where('id', '=', 'sub_4').execute();
      assert.deepEqual(await sums(), { [variant]: [2, seconds('2026-01-02T00:00:00Z') + seconds('2026-01-05T00:00:00Z')] }, 'a sign-up adds its time, one notified and one deleted take theirs away');
    });
  });

  describe(`migration 0024 (Shopify connections) on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    const empty = emptyDatabaseForSuite(dialect);

    it("moves every Shopify store's tokens into store_connections, still sealed, and the app reads them there", async () => {
      const { database } = empty();
      await migrateBefore(database, '0024_shopify_connections');
      const db = database.db as never as Kysely<any>;
      const secrets = SecretBox.fromKey(randomBytes(32).toString('base64'));
      const at = '2026-01-02T03:04:05.678Z';
      const later = '2026-01-02T04:04:05.678Z';
      const farOff = '2026-04-02T03:04:05.678Z';
      const base = { created_at: at, updated_at: later, settings: '{}', platform: 'shopify', installed_at: at };
      const noToken = { admin_token_sealed: null, admin_token_expires_at: null, refresh_token_sealed: null, refresh_token_expires_at: null, token_refresh_lease_until: null, reauthorization_required_at: null };
      const sealed = { permanent: await secrets.seal('shpat_permanent'), expiring: await secrets.seal('shpat_expiring'), refresh: await secrets.seal('shprt_refresh'), waiting: await secrets.seal('shpat_waiting') };
      const stores = [
        { ...base, ...noToken, domain: 'permanent.myshopify.com', owner_email: 'a@example.com', status: 'active', admin_token_sealed: sealed.permanent, admin_scopes: 'read_products', reconciled_at: later, uninstalled_at: null },
        {
          ...base,
          ...noToken,
          domain: 'expiring.myshopify.com',
          owner_email: 'b@example.com',
          status: 'active',
          admin_token_sealed: sealed.expiring,
          admin_token_expires_at: later,
          refresh_token_sealed: sealed.refresh,
          refresh_token_expires_at: farOff,
          token_refresh_lease_until: later,
          admin_scopes: 'read_products,read_inventory',
          reconciled_at: null,
          uninstalled_at: null,
        },
        { ...base, ...noToken, domain: 'removed.myshopify.com', owner_email: 'c@example.com', status: 'uninstalled', admin_scopes: 'read_products', reconciled_at: at, uninstalled_at: later },
        { ...base, ...noToken, domain: 'waiting.myshopify.com', owner_email: 'd@example.com', status: 'active', admin_token_sealed: sealed.waiting, reauthorization_required_at: later, admin_scopes: 'read_products', reconciled_at: at, uninstalled_at: null },
        { ...base, ...noToken, domain: 'made-by-cli.myshopify.com', owner_email: 'e@example.com', status: 'active', installed_at: null, admin_scopes: null, reconciled_at: null, uninstalled_at: null },
        { ...base, ...noToken, domain: 'shop.example.com', owner_email: 'f@example.com', status: 'active', platform: 'woocommerce', admin_scopes: null, reconciled_at: null, uninstalled_at: null },
      ];
      await db.insertInto('stores').values(stores).execute();
      const woo = {
        store_domain: 'shop.example.com',
        platform: 'woocommerce',
        site: 'https://shop.example.com/',
        status: 'connected',
        credentials_sealed: 'sealed-keys',
        webhook_secret_sealed: 'sealed-secret',
        webhook_ids: '[7]',
        connected_at: at,
        disconnected_at: null,
        disconnect_reason: null,
        reconciled_at: later,
        updated_at: later,
      };
      await db.insertInto('store_connections').values(woo).execute();

      assert.equal((await migrateThrough(database, '0024_shopify_connections'))[0], '0024_shopify_connections');
      const instant = (value: string | null) => (value === null ? null : new Date(value).toISOString());
      const rows = (await database.db.selectFrom('store_connections').selectAll().orderBy('store_domain').execute()).map((row) => ({
        ...row,
        credentials_expire_at: instant(row.credentials_expire_at),
        refresh_credentials_expire_at: instant(row.refresh_credentials_expire_at),
        refresh_lease_until: instant(row.refresh_lease_until),
        reauthorization_required_at: instant(row.reauthorization_required_at),
        connected_at: instant(row.connected_at),
        disconnected_at: instant(row.disconnected_at),
        reconciled_at: instant(row.reconciled_at),
        updated_at: instant(row.updated_at),
      }));
      const shopify = (domain: string, status: string) => ({
        store_domain: domain,
        platform: 'shopify',
        site: domain,
        status,
        credentials_expire_at: null,
        refresh_credentials_sealed: null,
        refresh_credentials_expire_at: null,
        refresh_lease_until: null,
        reauthorization_required_at: null,
        webhook_secret_sealed: null,
        webhook_ids: '[]',
        connected_at: at,
        disconnected_at: null,
        disconnect_reason: null,
        updated_at: later,
      });
      assert.deepEqual(rows, [
        {
          ...shopify('expiring.myshopify.com', 'connected'),
          credentials_sealed: sealed.expiring,
          credentials_expire_at: later,
          refresh_credentials_sealed: sealed.refresh,
          refresh_credentials_expire_at: farOff,
          refresh_lease_until: later,
          scopes: 'read_products,read_inventory',
          reconciled_at: null,
        },
        { ...shopify('permanent.myshopify.com', 'connected'), credentials_sealed: sealed.permanent, scopes: 'read_products', reconciled_at: later },
        { ...shopify('removed.myshopify.com', 'disconnected'), credentials_sealed: null, scopes: 'read_products', disconnected_at: later, disconnect_reason: 'uninstalled', reconciled_at: at },
        { ...woo, credentials_expire_at: null, refresh_credentials_sealed: null, refresh_credentials_expire_at: null, refresh_lease_until: null, reauthorization_required_at: null, scopes: null },
        { ...shopify('waiting.myshopify.com', 'connected'), credentials_sealed: sealed.waiting, reauthorization_required_at: later, scopes: 'read_products', reconciled_at: at },
      ]);
      const storeColumns = Object.keys((await database.db.selectFrom('stores').selectAll().where('domain', '=', 'permanent.myshopify.com').executeTakeFirstOrThrow()) as object);
      for (const moved of ['admin_token_sealed', 'admin_scopes', 'refresh_token_sealed', 'token_refresh_lease_until', 'reauthorization_required_at', 'reconciled_at']) {
        assert.ok(!storeColumns.includes(moved), `stores no longer holds ${moved}`);
      }
      assert.ok(storeColumns.includes('installed_at') && storeColumns.includes('uninstalled_at'), 'when a store was installed stays the store\'s');

      const tokens = new ShopifyConnections(new ConnectionRepository(database, 'shopify'), new StoreService(new StoreRepository(database, new LocalChangeBus())), secrets);
      const permanent = await tokens.offlineToken('permanent.myshopify.com');
      assert.deepEqual(permanent, { accessToken: 'shpat_permanent', scopes: 'read_products', reauthorizationRequired: false, version: sealed.permanent });
      const expiring = await tokens.offlineToken('expiring.myshopify.com');
      assert.deepEqual({ ...expiring, expiring: expiring?.expiring && { ...expiring.expiring, expiresAt: instant(expiring.expiring.expiresAt), refreshTokenExpiresAt: instant(expiring.expiring.refreshTokenExpiresAt) } }, {
        accessToken: 'shpat_expiring',
        scopes: 'read_products,read_inventory',
        expiring: { expiresAt: later, refreshToken: 'shprt_refresh', refreshTokenExpiresAt: farOff },
        reauthorizationRequired: false,
        version: sealed.expiring,
      });
      assert.equal((await tokens.offlineToken('waiting.myshopify.com'))?.reauthorizationRequired, true);
      assert.equal(await tokens.offlineToken('removed.myshopify.com'), undefined, 'an uninstalled store has no token');
      assert.equal(await tokens.offlineToken('made-by-cli.myshopify.com'), undefined);
    });
  });
}
