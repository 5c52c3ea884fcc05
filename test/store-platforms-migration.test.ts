/**
 * Migration 0020 on a database that holds stores from before it: every store had a myshopify.com
 * domain, so each becomes a Shopify store and nothing else of it changes. Migration 0021 moves
 * WooCommerce connections into the platform-neutral `store_connections` unchanged.
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
import { Database } from '../src/core/db/database.ts';
import type { Dialect } from '../src/core/db/dialect.ts';
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

      assert.deepEqual(await database.migrate(), ['0021_store_connections']);
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
}
