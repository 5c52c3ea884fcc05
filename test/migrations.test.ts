/**
 * Migrations on a database that holds rows from before them. 0020: every store had a
 * myshopify.com domain, so each becomes a Shopify store and nothing else of it changes. 0021
 * moves WooCommerce connections into the platform-neutral `store_connections` unchanged. 0022
 * lets a subscription keep several phones and browsers, each alerted once per restock. 0023
 * remembers each cancelled plan subscription, the ones store_plans shows cancelled included.
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
import { BillingRepository } from '../src/billing/repository.ts';
import { Database } from '../src/core/db/database.ts';
import type { Dialect } from '../src/core/db/dialect.ts';
import type { StorePlanStatus } from '../src/core/db/schema.ts';
import { migrations } from '../src/core/db/migrations/index.ts';

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

      assert.equal((await database.migrate())[0], '0020_store_platforms');
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

      assert.equal((await database.migrate())[0], '0021_store_connections');
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

      assert.equal((await database.migrate())[0], '0022_contact_points_per_address');
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
}
