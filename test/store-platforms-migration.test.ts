/**
 * Migration 0020 on a database that holds stores from before it: every store had a myshopify.com
 * domain, so each becomes a Shopify store and nothing else of it changes.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Migrator, type Migration } from 'kysely';
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
    let empty: Awaited<ReturnType<typeof emptyDatabase>>;
    before(async () => {
      empty = await emptyDatabase(dialect);
    });
    after(async () => {
      await empty.database.close();
      await empty.drop();
    });

    it("makes every store from before a Shopify store, the app's installed ones and the operator's alike, and changes nothing else", async () => {
      const { database } = empty;
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

      assert.deepEqual(await database.migrate(), ['0020_store_platforms']);
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
}
