import assert from 'node:assert/strict';
import { after, before, describe, it } from './fixtures/suites.ts';
import SqliteDriver from 'better-sqlite3';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../src/app.ts';
import { Database } from '../src/core/db/database.ts';
import { createTestDatabase, dialectSkip, registerAnonymous, testConfig, testDialects, type TestDatabase } from './fixtures/app.ts';
import { failOnLeakedHandles } from './fixtures/leaks.ts';
import { TcpProxy } from './fixtures/tcp-proxy.ts';

failOnLeakedHandles();

const SUBSCRIBE = { productId: 'gid://shopify/Product/55', email: 'health@example.com' };

/** Makes the database unusable for the app, the way it really fails for that dialect. */
interface Outage {
  begin(): Promise<void>;
  end(): Promise<void>;
  close(): Promise<void>;
}

/** SQLite: another process holds the write lock (a backup, a long migration). */
function sqliteLockOutage(file: string): Outage {
  let blocker: SqliteDriver.Database | undefined;
  return {
    async begin() {
      blocker = new SqliteDriver(file);
      blocker.exec('begin immediate');
      blocker.exec("insert into service_secrets (name, value, created_at) values ('blocker', 'x', 'now')");
    },
    async end() {
      blocker?.exec('rollback');
      blocker?.close();
      blocker = undefined;
    },
    async close() {
      if (blocker) await this.end();
    },
  };
}

/** PostgreSQL: the server's host goes away (connections dropped, new ones refused). */
function networkOutage(proxy: TcpProxy): Outage {
  return { begin: () => proxy.cut(), end: async () => void (await proxy.restore()), close: () => proxy.close() };
}

for (const dialect of testDialects()) {
  describe(`health on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    let testDatabase: TestDatabase;
    let database: Database;
    let app: FastifyInstance;
    let authorization: string;
    let outage: Outage;

    before(async () => {
      testDatabase = await createTestDatabase(dialect);
      let url = testDatabase.url;
      if (dialect === 'sqlite') {
        outage = sqliteLockOutage(url.slice('sqlite:'.length));
      } else {
        const target = new URL(url);
        const proxy = await new TcpProxy(target.hostname, Number(target.port || 5432)).start();
        target.port = String(proxy.port);
        url = target.toString();
        outage = networkOutage(proxy);
      }
      const config = testConfig(url, { SERVICE_NAME: 'Restock test' });
      database = Database.open(config.database);
      app = await buildApp(config, database);
      await app.ready();
      authorization = `Bearer ${await registerAnonymous(app)}`;
    });
    after(async () => {
      await outage.close();
      await app.close();
      await database.close();
      await testDatabase.drop();
    });

    it('getHealth answers ok with the service name', async () => {
      const res = await app.inject({ method: 'GET', url: '/api/health' });
      assert.equal(res.statusCode, 200);
      assert.deepEqual(res.json(), { status: 'ok', service: 'Restock test' });
      assert.equal(res.headers['cache-control'], 'no-store');
    });

    it('answers 503 problem+json while the database is down, and ok again once it is back', async () => {
      await outage.begin();
      try {
        const health = await app.inject({ method: 'GET', url: '/api/health' });
        assert.equal(health.statusCode, 503);
        assert.match(health.headers['content-type'] as string, /^application\/problem\+json/);
        assert.equal(health.json().type, 'http://restock.test/problems/service-unavailable');
        assert.ok(Number(health.headers['retry-after']) > 0);
        assert.doesNotMatch(health.body, /\bat .*\.(ts|js):\d+/, 'no stack trace');

        const subscribe = await app.inject({ method: 'POST', url: '/api/v1/alerts/subscribe', payload: SUBSCRIBE, headers: { authorization } });
        assert.equal(subscribe.statusCode, 503, subscribe.body);
        assert.equal(subscribe.json().type, 'http://restock.test/problems/service-unavailable');
      } finally {
        await outage.end();
      }

      const health = await app.inject({ method: 'GET', url: '/api/health' });
      assert.equal(health.statusCode, 200, health.body);
      const subscribe = await app.inject({ method: 'POST', url: '/api/v1/alerts/subscribe', payload: SUBSCRIBE, headers: { authorization } });
      assert.equal(subscribe.statusCode, 200);
      const rows = await database.db.selectFrom('subscriptions').selectAll().where('email', '=', SUBSCRIBE.email).execute();
      assert.equal(rows.length, 1, 'the request refused during the outage stored nothing');
    });
  });
}
