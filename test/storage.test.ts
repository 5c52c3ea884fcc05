import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import { after, before, describe, it } from './fixtures/suites.ts';
import SqliteDriver from 'better-sqlite3';
import { Kysely, SqliteDialect, sql } from 'kysely';
import { Database, type Trx } from '../src/core/db/database.ts';
import { isUnavailableError } from '../src/core/db/dialect.ts';
import type { Tables } from '../src/core/db/schema.ts';
import { GroupCommit } from '../src/core/db/group-commit.ts';
import { keepServiceSecret } from '../src/core/secrets.ts';
import { newOpaqueId } from '../src/core/ids.ts';
import { createTestDatabase, dialectSkip, tableDigests, TABLES, testConfig, testDialects, type TestDatabase } from './fixtures/app.ts';
import { failOnLeakedHandles } from './fixtures/leaks.ts';

failOnLeakedHandles();

const secret = (name: string) => ({ name, value: 'v', created_at: '2026-01-02T03:04:05.678Z' });

for (const dialect of testDialects()) {
  describe(`storage on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    let testDatabase: TestDatabase;
    let database: Database;
    before(async () => {
      testDatabase = await createTestDatabase(dialect);
      database = Database.open(testConfig(testDatabase.url).database);
    });
    after(async () => {
      await database.close();
      await testDatabase.drop();
    });

    const names = async (prefix: string) =>
      (await database.db.selectFrom('service_secrets').select('name').where('name', 'like', `${prefix}%`).orderBy('name').execute()).map((r) => r.name);

    it('migrating again applies nothing', async () => {
      assert.deepEqual(await database.migrate(), []);
    });

    it('a service secret is made once however many ask at once, and one already kept is read without making another', async () => {
      const made: string[] = [];
      const asks = await Promise.all(Array.from({ length: 8 }, (_, i) => keepServiceSecret(database, 'keep-check', () => (made.push(`v${i}`), `v${i}`))));
      const [first] = asks;
      assert.ok(asks.every(({ value }) => value === first!.value), 'every caller gets the kept value');
      assert.equal(asks.filter(({ made: mine }) => mine).length, 1, 'one caller made it');
      assert.ok(made.includes(first!.value));
      const again = await keepServiceSecret(database, 'keep-check', () => assert.fail('a kept secret is not made again'));
      assert.deepEqual(again, { value: first!.value, made: false });
    });

    it('the table digests that "a refused request changes nothing" compares cover every table and see a changed value', async () => {
      const before = await tableDigests(database);
      for (const table of [...TABLES, 'service_secrets', 'signing_keys']) assert.ok(table in before, `${table} is digested`);
      await database.write((trx) => trx.insertInto('service_secrets').values(secret('digest-check')).execute());
      const inserted = await tableDigests(database);
      assert.notEqual(inserted.service_secrets, before.service_secrets);
      // A count stays the same when a row is changed in place; the digest does not.
      await database.write((trx) => trx.updateTable('service_secrets').set({ value: 'changed' }).where('name', '=', 'digest-check').execute());
      const updated = await tableDigests(database);
      assert.notEqual(updated.service_secrets, inserted.service_secrets);
      assert.deepEqual({ ...updated, service_secrets: '' }, { ...inserted, service_secrets: '' }, 'the other tables are untouched');
      assert.deepEqual(await tableDigests(database), updated, 'reading twice gives the same digests');
    });

    it('two transactions that lock the same kept counts in opposite orders both commit: the one PostgreSQL aborts runs again', { skip: dialect === 'sqlite' && 'SQLite runs one write at a time' }, async () => {
      const store = `deadlock-${Date.now()}.myshopify.com`;
      await database.write((trx) => trx.insertInto('ledger_counts').values([{ store_domain: store, status: 'sent', n: 0 }, { store_domain: store, status: 'failed', n: 0 }]).execute());
      const add = (trx: Trx, status: string) => trx.updateTable('ledger_counts').set((eb) => ({ n: eb('n', '+', 1) })).where('store_domain', '=', store).where('status', '=', status).execute();
      let signalSent!: () => void;
      let signalFailed!: () => void;
      const sentLocked = new Promise<void>((resolve) => (signalSent = resolve));
      const failedLocked = new Promise<void>((resolve) => (signalFailed = resolve));
      let attempts = 0;
      // Each holds one row and then asks for the other's: a cycle PostgreSQL breaks by aborting one.
      const first = database.writeRetrying(async (trx) => {
        attempts++;
        await add(trx, 'sent');
        signalSent();
        await failedLocked;
        await add(trx, 'failed');
      });
      const second = database.writeRetrying(async (trx) => {
        attempts++;
        await sentLocked;
        await add(trx, 'failed');
        signalFailed();
        await add(trx, 'sent');
      });
      await Promise.all([first, second]);
      // At least one ran again. Its new transaction may take the first row before the other,
      // woken by the abort, takes it back: then the two meet again and one more runs again.
      assert.ok(attempts >= 3, `one of the two ran again (${attempts} attempts)`);
      const rows = await database.db.selectFrom('ledger_counts').select(['status', 'n']).where('store_domain', '=', store).orderBy('status').execute();
      assert.deepEqual(rows.map((row) => [row.status, Number(row.n)]), [['failed', 2], ['sent', 2]], 'each counted once');
      const cycles = attempts;
      await assert.rejects(
        database.writeRetrying(async () => {
          attempts++;
          throw Object.assign(new Error('not a lock cycle'), { code: '23505' });
        }),
        /not a lock cycle/,
      );
      assert.equal(attempts, cycles + 1, 'any other failure is not run again');
    });

    it('timestamps read back as the ISO strings written', async () => {
      await database.write((trx) => trx.insertInto('service_secrets').values(secret('ts-check')).execute());
      const row = await database.db.selectFrom('service_secrets').selectAll().where('name', '=', 'ts-check').executeTakeFirstOrThrow();
      assert.equal(row.created_at, '2026-01-02T03:04:05.678Z');
    });

    it('a prepared read binds its arguments around the query\'s constants, and sees every committed write at once', async () => {
      const read = database.preparedRead<{ name: string; value: string }>(2, (db, first, second) =>
        db
          .selectFrom('service_secrets')
          .select(['name', 'value'])
          .where('value', '=', 'v')
          .where((eb) => eb.or([eb('name', '=', first!), eb('name', '=', second!)]))
          .orderBy('name'),
      );
      assert.equal(await read('pr-a', 'pr-b'), undefined);
      await database.write((trx) => trx.insertInto('service_secrets').values(secret('pr-b')).execute());
      assert.deepEqual(await read('pr-a', 'pr-b'), { name: 'pr-b', value: 'v' }, 'seen right after the commit');
      await database.writeStatement((db) => db.insertInto('service_secrets').values({ ...secret('pr-c'), value: 'other' }).execute());
      assert.equal(await read('pr-c', 'pr-x'), undefined, 'the constant in the query still applies');
      // Another handle on the same database (another process) commits: seen on the next read.
      const other = Database.open(testConfig(testDatabase.url).database);
      try {
        await other.write((trx) => trx.insertInto('service_secrets').values(secret('pr-d')).execute());
      } finally {
        await other.close();
      }
      assert.deepEqual(await read('pr-d', 'pr-x'), { name: 'pr-d', value: 'v' });
    });

    it('concurrent writes all commit, and each is visible once its promise resolves', async () => {
      const results = await Promise.all(
        Array.from({ length: 100 }, (_, i) =>
          database.write(async (trx) => {
            await trx.insertInto('service_secrets').values(secret(`many-${String(i).padStart(3, '0')}`)).execute();
            return i;
          }),
        ),
      );
      assert.deepEqual(results, Array.from({ length: 100 }, (_, i) => i));
      assert.equal((await names('many-')).length, 100);
    });

    it('a failing write is rolled back alone; the writes beside it commit', async () => {
      const outcomes = await Promise.allSettled([
        database.write((trx) => trx.insertInto('service_secrets').values(secret('iso-a')).execute()),
        database.write(async (trx) => {
          await trx.insertInto('service_secrets').values(secret('iso-b')).execute();
          throw new Error('handler failed after writing');
        }),
        database.write((trx) => trx.insertInto('service_secrets').values(secret('iso-a')).execute()),
        database.write((trx) => trx.insertInto('service_secrets').values(secret('iso-c')).execute()),
      ]);
      const [firstA, failing, secondA, c] = outcomes.map((o) => o.status);
      assert.equal(failing, 'rejected');
      assert.equal(c, 'fulfilled');
      // On PostgreSQL the two inserts of iso-a race in separate transactions: either may win.
      assert.deepEqual([firstA, secondA].sort(), ['fulfilled', 'rejected'], 'exactly one iso-a is stored');
      assert.match(String((outcomes[1] as PromiseRejectedResult).reason), /handler failed/);
      assert.deepEqual(await names('iso-'), ['iso-a', 'iso-c']);
    });

    describe('an insert run on every sign-up, skipping a conflicting row', () => {
      const shape = {
        table: 'subscriptions',
        columns: ['id', 'product_id', 'variant_id', 'email', 'email_key', 'status', 'store_domain', 'created_at', 'updated_at'],
        key: 'id',
      };
      const at = '2026-01-02T03:04:05.678Z';
      const signUp = (store: string, product: string | null, email: string) => [newOpaqueId('sub'), product, null, email, email, 'active', store, at, at];
      const waitingAt = async (store: string) =>
        Number((await database.db.selectFrom('subscription_counts').select('n').where('store_domain', '=', store).where('status', '=', 'active').executeTakeFirst())?.n ?? 0);

      it('stores the rows given at once and tells each caller whether its row went in: a second live one is skipped', async () => {
        const insert = database.insertSkippingConflicts(shape);
        const rows = Array.from({ length: 30 }, (_, i) => signUp(`batch-${i % 2}.example`, `p-${i % 3}`, `s${i}@example.com`));
        const again = signUp('batch-0.example', 'p-0', 's0@example.com');
        const outcomes = await Promise.all([...rows, again].map((values) => insert(values)));
        assert.deepEqual(outcomes, [...rows.map(() => true), false]);
        const stored = await database.db.selectFrom('subscriptions').select('id').where('store_domain', 'like', 'batch-%').execute();
        assert.deepEqual(stored.map((row) => row.id).sort(), rows.map((row) => row[0] as string).sort());
        assert.deepEqual([await waitingAt('batch-0.example'), await waitingAt('batch-1.example')], [15, 15], 'the count triggers ran once per row');
      });

      it('a row that cannot go in fails its own caller only', async () => {
        const insert = database.insertSkippingConflicts(shape);
        const [first, second] = [signUp('isolated.example', 'p', 'a@example.com'), signUp('isolated.example', 'p', 'b@example.com')];
        const outcomes = await Promise.allSettled([insert(first), insert(signUp('isolated.example', null, 'no-product@example.com')), insert(second)]);
        assert.deepEqual(outcomes.map((outcome) => outcome.status), ['fulfilled', 'rejected', 'fulfilled']);
        assert.match(String((outcomes[1] as PromiseRejectedResult).reason), /null|NOT NULL/i);
        assert.equal(await waitingAt('isolated.example'), 2);
      });

      it('closing the database stores the rows given to it first', async () => {
        const other = Database.open(testConfig(testDatabase.url).database);
        const insert = other.insertSkippingConflicts(shape);
        const given = Array.from({ length: 5 }, (_, i) => insert(signUp('closing.example', 'p', `c${i}@example.com`)));
        await other.close();
        assert.deepEqual(await Promise.all(given), [true, true, true, true, true]);
        assert.equal(await waitingAt('closing.example'), 5);
      });

      const once = (work: () => Promise<void>) => {
        let done: Promise<void> | undefined;
        return () => (done ??= work());
      };

      /** Another process's transaction holding `store`'s counts locked until `release()`. */
      async function holdCounts(store: string) {
        const blocker = Database.open(testConfig(testDatabase.url).database);
        let release!: () => void;
        let locked!: () => void;
        const released = new Promise<void>((resolve) => (release = resolve));
        const lockHeld = new Promise<void>((resolve) => (locked = resolve));
        const holding = blocker.write(async (trx) => {
          await trx.updateTable('subscription_counts').set((eb) => ({ n: eb('n', '+', 0) })).where('store_domain', '=', store).execute();
          locked();
          await released;
        });
        await lockHeld;
        const waitingOnLocks = async () =>
          Number((await sql<{ n: number }>`select count(*) as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`.execute(blocker.db)).rows[0]!.n);
        return {
          waitingOnLocks,
          /** Until `count` connections wait on a lock, then a moment more for any other to join them. */
          async untilWaiting(count: number) {
            for (const until = Date.now() + 10_000; (await waitingOnLocks()) < count && Date.now() < until; ) await new Promise((resolve) => setTimeout(resolve, 20));
            await new Promise((resolve) => setTimeout(resolve, 200));
          },
          /** Ends the transaction and the other process; a second call only waits for the first. */
          release: once(async () => {
            release();
            await holding.catch(() => undefined);
            await blocker.close();
          }),
        };
      }

      it('sign-ups given while their store\'s counts are locked wait as one statement, not as one connection each', { skip: dialect === 'sqlite' && 'SQLite runs one write at a time' }, async () => {
        const store = 'locked.example';
        const insert = database.insertSkippingConflicts(shape);
        assert.equal(await insert(signUp(store, 'p', 'first@example.com')), true);
        const held = await holdCounts(store);
        try {
          const given = Array.from({ length: 20 }, (_, i) => insert(signUp(store, 'p', `w${i}@example.com`)));
          await held.untilWaiting(1);
          assert.equal(await held.waitingOnLocks(), 1, 'one statement waits for the lock, holding one connection');
          await held.release();
          assert.deepEqual(await Promise.all(given), given.map(() => true));
          assert.equal(await waitingAt(store), 21);
        } finally {
          await held.release();
        }
      });

      it('a group takes its stores\' counts in key order, whatever order its sign-ups came in, so two groups cannot wait on each other in a cycle', { skip: dialect === 'sqlite' && 'SQLite runs one write at a time' }, async () => {
        const [first, second] = ['cycle-a.example', 'cycle-b.example'];
        const insert = database.insertSkippingConflicts(shape);
        for (const store of [first, second]) assert.equal(await insert(signUp(store, 'p', `seed@${store}`)), true);
        const other = Database.open(testConfig(testDatabase.url).database);
        const held = await holdCounts(second);
        try {
          // The second store's sign-up given first: taken in that order, the group would wait for
          // the second store's counts holding nothing, and another group could take the first's.
          const given = [insert(signUp(second, 'p', 'b@example.com')), insert(signUp(first, 'p', 'a@example.com'))];
          await held.untilWaiting(1);
          await assert.rejects(
            sql`select n from subscription_counts where store_domain = ${first} for update nowait`.execute(other.db),
            (err: { code?: string }) => err.code === '55P03',
            'waiting for the second store\'s counts, the group already holds the first\'s',
          );
          await held.release();
          assert.deepEqual(await Promise.all(given), [true, true]);
          assert.deepEqual([await waitingAt(first), await waitingAt(second)], [2, 2]);
        } finally {
          await held.release();
          await other.close();
        }
      });

      it('a database out of reach fails the whole group at once, without asking it again row by row', { skip: dialect === 'sqlite' && 'a SQLite file is never out of reach this way' }, async () => {
        // A server that hangs up on every connection: each statement tried costs one connection.
        let connections = 0;
        const hangsUp = net.createServer((socket) => {
          connections += 1;
          socket.destroy();
        });
        await new Promise<void>((resolve) => hangsUp.listen(0, '127.0.0.1', resolve));
        const url = new URL(testDatabase.url);
        url.host = `127.0.0.1:${(hangsUp.address() as net.AddressInfo).port}`;
        const unreachable = Database.open(testConfig(url.toString()).database);
        try {
          const insert = unreachable.insertSkippingConflicts(shape);
          const outcomes = await Promise.allSettled(Array.from({ length: 5 }, (_, i) => insert(signUp('gone.example', 'p', `g${i}@example.com`))));
          assert.deepEqual(outcomes.map((outcome) => outcome.status), ['rejected', 'rejected', 'rejected', 'rejected', 'rejected']);
          assert.ok(isUnavailableError((outcomes[0] as PromiseRejectedResult).reason), String((outcomes[0] as PromiseRejectedResult).reason));
          assert.equal(connections, 1, 'one statement for the group; row by row would have made six');
        } finally {
          await unreachable.close().catch(() => undefined);
          await new Promise((resolve) => hangsUp.close(resolve));
        }
      });
    });

    if (dialect === 'sqlite') {
      it('a commit that cannot happen fails every write in the group and stores none', async () => {
        const file = testDatabase.url.slice('sqlite:'.length);
        const blocker = new SqliteDriver(file);
        blocker.exec('begin immediate');
        blocker.exec(`insert into service_secrets (name, value, created_at) values ('blocker', 'x', 'now')`);
        try {
          const outcomes = await Promise.allSettled(
            ['busy-1', 'busy-2', 'busy-3'].map((name) =>
              database.write((trx) => trx.insertInto('service_secrets').values(secret(name)).execute()),
            ),
          );
          assert.ok(outcomes.every((o) => o.status === 'rejected'));
          assert.match(String((outcomes[0] as PromiseRejectedResult).reason.code), /SQLITE_BUSY/);
        } finally {
          blocker.exec('rollback');
          blocker.close();
        }
        assert.deepEqual(await names('busy-'), []);
      });

      it('writes made in one turn of the event loop share one transaction', async () => {
        const driver = new SqliteDriver(testDatabase.url.slice('sqlite:'.length));
        const db = new Kysely<Tables>({ dialect: new SqliteDialect({ database: driver }) });
        let transactions = 0;
        const counted = new Proxy(db, {
          get(target, prop) {
            if (prop === 'transaction') transactions++;
            const value = Reflect.get(target, prop, target);
            return typeof value === 'function' ? value.bind(target) : value;
          },
        });
        const group = new GroupCommit(counted, (statement) => driver.exec(statement));
        try {
          await Promise.all(
            Array.from({ length: 50 }, (_, i) =>
              group.run((trx) => trx.insertInto('service_secrets').values(secret(`group-${i}`)).execute()),
            ),
          );
          assert.equal(transactions, 1);
          assert.equal((await names('group-')).length, 50);
          await group.run((trx) => trx.insertInto('service_secrets').values(secret('group-next')).execute());
          assert.equal(transactions, 2, 'a later turn commits on its own');
        } finally {
          await db.destroy();
        }
      });

      it('runs in WAL mode, checkpointing every 10,000 pages; FULL is kept by flushing the log itself, so SQLite runs NORMAL', async () => {
        const file = testDatabase.url.slice('sqlite:'.length);
        const probe = new SqliteDriver(file, { readonly: true });
        try {
          assert.equal(probe.pragma('journal_mode', { simple: true }), 'wal');
        } finally {
          probe.close();
        }
        const config = testConfig(testDatabase.url).database;
        assert.ok(config.dialect === 'sqlite' && config.synchronous === 'FULL');
        const { rows } = await (await import('kysely')).sql<{ synchronous: number }>`pragma synchronous`.execute(database.db);
        assert.equal(rows[0]!.synchronous, 1, 'NORMAL: COMMIT does not wait for the disk, LogFlush does');
        const checkpoint = await (await import('kysely')).sql<{ wal_autocheckpoint: number }>`pragma wal_autocheckpoint`.execute(database.db);
        assert.equal(checkpoint.rows[0]!.wal_autocheckpoint, 10_000, 'the log is copied into the database every 10,000 pages (docs/architecture.md)');
      });

      it('under FULL a write resolves only after the log is synced, and answers built from reads wait from COMMIT on', async () => {
        const file = testDatabase.url.slice('sqlite:'.length);
        const syncs: Array<() => void> = [];
        const open = fs.promises.open;
        // Every sync of the log waits here until the test lets it go.
        fs.promises.open = (async (...args: Parameters<typeof open>) => {
          const handle = await open(...args);
          if (String(args[0]) !== `${file}-wal`) return handle;
          const datasync = handle.datasync.bind(handle);
          handle.datasync = () => new Promise<void>((resolve, reject) => syncs.push(() => void datasync().then(resolve, reject)));
          return handle;
        }) as typeof open;
        const flushed = Database.open(testConfig(testDatabase.url).database);
        const reader = new SqliteDriver(file, { readonly: true });
        try {
          assert.equal(flushed.durable(), undefined, 'nothing committed yet: nothing to wait for');
          let resolved = false;
          const write = flushed.write((trx) => trx.insertInto('service_secrets').values(secret('flushed-1')).execute()).then(() => (resolved = true));
          const visible = () => reader.prepare(`select count(*) as n from service_secrets where name = 'flushed-1'`).get() as { n: number };
          while (visible().n === 0) await new Promise((resolve) => setImmediate(resolve));
          const barrier = flushed.durable();
          assert.ok(barrier, 'committed and visible, not yet synced: answers must wait');
          // The log's file is opened in the thread pool first: a loaded machine takes a while.
          for (const until = Date.now() + 10_000; syncs.length === 0 && Date.now() < until; ) await new Promise((resolve) => setTimeout(resolve, 1));
          assert.equal(syncs.length, 1, 'one sync of the log is under way');
          assert.equal(resolved, false, 'the writer is not answered before the sync');
          syncs.shift()!();
          await write;
          await barrier;
          assert.equal(flushed.durable(), undefined, 'everything committed is on disk');
        } finally {
          fs.promises.open = open;
          reader.close();
          let closed = false;
          const closing = flushed.close().finally(() => (closed = true));
          // Let go of every sync, including any asked for while closing.
          while (!closed) {
            while (syncs.length > 0) syncs.shift()!();
            await new Promise((resolve) => setTimeout(resolve, 1));
          }
          await closing;
        }
      });

      it('SQLITE_SYNCHRONOUS=NORMAL waives the flush: SQLite NORMAL, nothing to wait for', async () => {
        const config = testConfig(testDatabase.url).database;
        assert.equal(config.dialect, 'sqlite');
        const normal = Database.open({ ...config, synchronous: 'NORMAL' } as typeof config);
        try {
          await normal.write((trx) => trx.insertInto('service_secrets').values(secret('normal-1')).execute());
          assert.equal(normal.durable(), undefined);
          const { rows } = await (await import('kysely')).sql<{ synchronous: number }>`pragma synchronous`.execute(normal.db);
          assert.equal(rows[0]!.synchronous, 1);
        } finally {
          await normal.close();
        }
      });
    }
  });
}
