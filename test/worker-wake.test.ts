/**
 * A restock wakes the workers of every process at once (docs/dispatch.md, "Workers"): one process
 * takes the report, a worker in another, which would not look for work again for an hour, sends
 * the alert, woken through the change bus (Redis, or PostgreSQL's notifications).
 */
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { call, expectStatus, storeWithAgent, uniqueEmail } from './fixtures/agents.ts';
import { createTestDatabase, dialectSkip, testConfig, testDialects, type TestDatabase } from './fixtures/app.ts';
import { failOnLeakedHandles } from './fixtures/leaks.ts';
import { startProcess, type ServiceProcess } from './fixtures/oauth.ts';
import { redisReachable, REDIS_URL } from './fixtures/services.ts';
import { waitUntil } from './fixtures/two-processes.ts';
import { after, before, describe, it } from './fixtures/suites.ts';

failOnLeakedHandles();

const redisUp = await redisReachable();
const AN_HOUR_MS = 3_600_000;

for (const dialect of testDialects()) {
  // Processes on one SQLite file share no channel but Redis; on PostgreSQL, either.
  const channels: Array<{ name: string; env: Record<string, string> }> = [...(redisUp ? [{ name: 'redis', env: { REDIS_URL } }] : []), ...(dialect === 'postgres' ? [{ name: 'postgres', env: {} }] : [])];
  for (const channel of channels) {
    describe(`a restock wakes another process's worker on ${dialect}, through ${channel.name}`, { skip: dialectSkip(dialect) }, () => {
      let testDatabase: TestDatabase;
      let web: ServiceProcess;
      let worker: ServiceProcess;

      before(async () => {
        testDatabase = await createTestDatabase(dialect);
        const env = { ...channel.env, FREQUENCY_CAP_MINUTES: '0', BATCH_INTERVAL_SECONDS: '0' };
        web = await startProcess(testConfig(testDatabase.url, env));
        // Its own poll would come an hour later: only the announcement can wake it in time.
        worker = await startProcess(testConfig(testDatabase.url, { ...env, DISPATCH_POLL_MS: String(AN_HOUR_MS) }));
        await waitUntil('both processes hear changes', () => web.app.restockChanges.live && worker.app.restockChanges.live);
        worker.app.restock.worker.start();
        // The worker's first turn finds nothing and settles into its hour-long wait.
        await sleep(200);
      });
      after(async () => {
        await worker.app.restock.worker.stop();
        await worker.close();
        await web.close();
        await testDatabase.drop();
      });

      it('the alert goes out without the worker polling', async () => {
        const store = await storeWithAgent(web.app, web.database, 'wake');
        const ids = { productId: 'gid://shopify/Product/9700001', variantId: 'gid://shopify/ProductVariant/9700002' };
        expectStatus(await call(web.app, 'POST', '/api/v1/alerts/subscribe', { token: store.token, body: { ...ids, email: uniqueEmail('woken'), shop: store.domain } }), 200);
        const body = { items: [{ ...ids, available: 5, productTitle: 'Woken widget' }] };
        expectStatus(await call(web.app, 'POST', `/api/v1/stores/${store.domain}/inventory`, { token: store.token, body }), 200);
        const sent = async () => (await web.database.db.selectFrom('notifications').select('status').where('store_domain', '=', store.domain).where('status', '=', 'sent').execute()).length;
        const until = Date.now() + 30_000;
        while ((await sent()) === 0 && Date.now() < until) await sleep(50);
        assert.equal(await sent(), 1, 'the other process sent the alert, woken by the restock');
      });
    });
  }
}
