/**
 * The access-token check answers from memory between changes, and a change made in one process
 * reaches every other before its next request: through Redis when it is set, through
 * PostgreSQL's notifications without it, in-process on the embedded default. Two apps on one
 * database stand for two processes: they share nothing but the database and the channel.
 */
import assert from 'node:assert/strict';
import { Redis } from 'ioredis';
import pg from 'pg';
import { after, before, describe, it } from './fixtures/suites.ts';
import { createTestDatabase, dialectSkip, testConfig, testDialects, type TestDatabase } from './fixtures/app.ts';
import { registerAgent, startProcess, type ServiceProcess } from './fixtures/oauth.ts';
import { changeChannels, startTwoProcesses, waitUntil, type TwoProcesses } from './fixtures/two-processes.ts';
import { REDIS_URL, redisAvailable } from './fixtures/redis.ts';
import { pgUrlFor } from './fixtures/services.ts';
import { AgentStateCache } from '../src/agents/state-cache.ts';
import type { AgentState } from '../src/agents/repository.ts';
import { LocalChangeBus, type ChangeBus, type ChangeListener } from '../src/core/changes/bus.ts';
import { ChangeCache } from '../src/core/changes/cache.ts';
import { PG_LISTENER_NAME } from '../src/core/changes/postgres.ts';
import { REDIS_CONNECTION_NAME } from '../src/core/changes/redis.ts';

const redisUp = await redisAvailable();

const me = (process: ServiceProcess, token: string) =>
  process.app.inject({ method: 'GET', url: '/api/agent/me', headers: { authorization: `Bearer ${token}` } });

/**
 * The same request over a real connection: "the next request" arrives on a socket, after the
 * change reached this process's own socket to the channel (an injected request would skip the
 * event loop's turn that reads it).
 */
async function meOverHttp(origin: string, token: string) {
  const response = await fetch(`${origin}/api/agent/me`, { headers: { authorization: `Bearer ${token}` } });
  return { statusCode: response.status, body: await response.text(), headers: { 'www-authenticate': response.headers.get('www-authenticate') } };
}

const revoke = (process: ServiceProcess, token: string) =>
  process.app.inject({
    method: 'POST',
    url: '/oauth/revoke',
    payload: `token=${encodeURIComponent(token)}`,
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
  });

/** Cuts every connection the apps hear changes on, as a restarted Redis or PostgreSQL would. */
async function cutChannel(channel: 'redis' | 'postgres' | 'sqlite', testDatabase: TestDatabase): Promise<number> {
  if (channel === 'redis') {
    const redis = new Redis(REDIS_URL, { maxRetriesPerRequest: 1 });
    try {
      const clients = String(await redis.client('LIST')).split('\n').filter((line) => line.includes(` name=${REDIS_CONNECTION_NAME} `));
      for (const line of clients) await redis.client('KILL', 'ID', /\bid=(\d+)/.exec(line)![1]!);
      return clients.length;
    } finally {
      redis.disconnect();
    }
  }
  const client = new pg.Client({ connectionString: pgUrlFor('postgres') });
  await client.connect();
  try {
    const result = await client.query('select pg_terminate_backend(pid) from pg_stat_activity where application_name = $1 and datname = $2', [PG_LISTENER_NAME, testDatabase.name]);
    return result.rowCount ?? 0;
  } finally {
    await client.end();
  }
}

for (const dialect of testDialects()) {
  for (const { channel, env } of changeChannels(dialect, redisUp, REDIS_URL)) {
    describe(`token cache on ${dialect}, changes through ${channel}`, { skip: dialectSkip(dialect) }, () => {
      let processes: TwoProcesses;
      let one: ServiceProcess;
      let twoOrigin: string;

      before(async () => {
        processes = await startTwoProcesses(dialect, env);
        ({ one, twoOrigin } = processes);
      });

      after(async () => {
        await processes?.close();
      });

      it('a token revoked on one process is refused by the other at its next request', async () => {
        const agent = await registerAgent(one.app);
        // Twice, so the second answer comes from what the second process kept.
        assert.equal((await meOverHttp(twoOrigin, agent.token)).statusCode, 200);
        assert.equal((await meOverHttp(twoOrigin, agent.token)).statusCode, 200);
        assert.equal((await revoke(one, agent.token)).statusCode, 200);
        const refused = await meOverHttp(twoOrigin, agent.token);
        assert.equal(refused.statusCode, 401, `the revoked token was still accepted: ${refused.body}`);
        assert.match(refused.headers['www-authenticate'] as string, /error="invalid_token"/);
      });

      it('with the channel cut, a revocation is still refused everywhere; once it is back, the cache serves again', { skip: channel === 'sqlite' ? 'no channel to cut: the SQLite file itself tells' : false }, async () => {
        const agent = await registerAgent(one.app);
        const other = await registerAgent(one.app);
        for (const token of [agent.token, other.token]) assert.equal((await meOverHttp(twoOrigin, token)).statusCode, 200);

        const cut = await cutChannel(channel, processes.testDatabase);
        assert.ok(cut >= 2, `expected both processes' listening connections to be cut, cut ${cut}`);
        assert.equal((await revoke(one, agent.token)).statusCode, 200);
        const refused = await meOverHttp(twoOrigin, agent.token);
        assert.equal(refused.statusCode, 401, `a revocation made while the channel was cut was not applied: ${refused.body}`);

        await waitUntil('the channel is back', () => one.app.restockChanges.live && processes.two.app.restockChanges.live);
        const afterwards = await meOverHttp(twoOrigin, agent.token);
        assert.equal(afterwards.statusCode, 401, `what was kept before the cut must not be served once the channel is back: ${afterwards.body}`);
        assert.equal((await meOverHttp(twoOrigin, other.token)).statusCode, 200, 'a valid token must still work once the channel is back');
        assert.equal((await revoke(one, other.token)).statusCode, 200);
        assert.equal((await meOverHttp(twoOrigin, other.token)).statusCode, 401, 'after the channel came back, revocations must reach the other process again');
      });
    });
  }

  describe(`token cache on ${dialect}, one process`, { skip: dialectSkip(dialect) }, () => {
    it('a revoked token is refused at the next request after being served from memory', async () => {
      const testDatabase = await createTestDatabase(dialect);
      const service = await startProcess(testConfig(testDatabase.url));
      try {
        const agent = await registerAgent(service.app);
        assert.equal((await me(service, agent.token)).statusCode, 200);
        assert.equal((await me(service, agent.token)).statusCode, 200);
        assert.equal((await revoke(service, agent.token)).statusCode, 200);
        assert.equal((await me(service, agent.token)).statusCode, 401, 'the revoked token was still accepted');
      } finally {
        await service.close();
        await testDatabase.drop();
      }
    });
  });
}

/** A bus whose liveness the test sets, and whose listeners it can reach. */
function controlledBus(): ChangeBus & { isLive: boolean; heard: ChangeListener[] } {
  const bus = new LocalChangeBus();
  const heard: ChangeListener[] = [];
  const controlled: ChangeBus & { isLive: boolean; heard: ChangeListener[] } = {
    isLive: true,
    heard,
    get live() {
      return controlled.isLive;
    },
    listen(topic: string, listener: ChangeListener) {
      heard.push(listener);
      bus.listen(topic, listener);
    },
    publish: (topic: string, keys: readonly string[]) => bus.publish(topic, keys),
    whenLive: async () => controlled.isLive,
    close: () => bus.close(),
  };
  return controlled;
}

describe('the agent state cache', () => {
  const active: AgentState = { method: 'anonymous', status: 'active', scopes: 'api:read', store_domain: null, claimed_at: null, token_revoked: 0 };

  it('reads the database once between changes, and again after each change to that agent', async () => {
    let reads = 0;
    const lookups: boolean[] = [];
    const bus = controlledBus();
    const cache = new AgentStateCache(bus, async () => (reads++, active), (hit) => lookups.push(hit));
    await cache.stateOf('a1', 'j1');
    await cache.stateOf('a1', 'j1');
    assert.equal(reads, 1, 'the second lookup should be answered from memory');
    await cache.changed(['a2']);
    await cache.stateOf('a1', 'j1');
    assert.equal(reads, 1, "another agent's change must not drop this one");
    await cache.changed(['a1']);
    await cache.stateOf('a1', 'j1');
    assert.equal(reads, 2, 'a change to the agent must send the next lookup to the database');
    assert.deepEqual(lookups, [false, true, true, false]);
  });

  it('reads the database every time while the channel is not live, and keeps nothing read meanwhile', async () => {
    let reads = 0;
    const bus = controlledBus();
    const cache = new AgentStateCache(bus, async () => (reads++, active));
    bus.isLive = false;
    await cache.stateOf('a1', 'j1');
    await cache.stateOf('a1', 'j1');
    assert.equal(reads, 2, 'nothing may be answered from memory while the channel is not live');
    bus.isLive = true;
    await cache.stateOf('a1', 'j1');
    assert.equal(reads, 3, 'what was read while the channel was down must not have been kept');
  });

  it('does not keep a read that a change overtook', async () => {
    let release!: () => void;
    const bus = controlledBus();
    let reads = 0;
    const cache = new AgentStateCache(bus, async () => {
      reads++;
      if (reads === 1) await new Promise<void>((resolve) => (release = resolve));
      return active;
    });
    const racing = cache.stateOf('a1', 'j1');
    await new Promise((resolve) => setImmediate(resolve));
    // The change commits and is announced while the read of the old state is still on its way.
    await cache.changed(['a1']);
    release();
    await racing;
    await cache.stateOf('a1', 'j1');
    assert.equal(reads, 2, 'the state read before the change must not be served after it');
  });

  it('drops everything on a reset', async () => {
    let reads = 0;
    const bus = controlledBus();
    const cache = new AgentStateCache(bus, async () => (reads++, active));
    await cache.stateOf('a1', 'j1');
    for (const listener of bus.heard) listener.reset();
    await cache.stateOf('a1', 'j1');
    assert.equal(reads, 2, 'a reset must drop what was kept');
  });
});

describe('answers kept between changes (ChangeCache: store rows, webhook endpoints, Klaviyo state)', () => {
  it('reads once between changes of its key, every time while the channel is not live, and again after a reset', async () => {
    const reads: string[] = [];
    const bus = controlledBus();
    const cache = new ChangeCache(bus, 'kept', async (key) => (reads.push(key), `value of ${key}`), 10);
    assert.equal(await cache.get('a'), 'value of a');
    await cache.get('a');
    await cache.get('b');
    assert.deepEqual(reads, ['a', 'b'], 'the second lookup of a is answered from memory');
    await cache.changed('b');
    await cache.get('a');
    await cache.get('b');
    assert.deepEqual(reads, ['a', 'b', 'b'], 'a change drops its key only');
    bus.isLive = false;
    await cache.get('a');
    await cache.get('c');
    await cache.get('c');
    bus.isLive = true;
    await cache.get('c');
    assert.deepEqual(reads, ['a', 'b', 'b', 'a', 'c', 'c', 'c'], 'nothing answered from memory, nor kept, while the channel is not live');
    await cache.get('c');
    for (const listener of bus.heard) listener.reset();
    await cache.get('c');
    assert.equal(reads.length, 8, 'a reset drops everything');
  });

  it('keeps at most its bound, dropping the oldest first', async () => {
    const reads: string[] = [];
    const cache = new ChangeCache(controlledBus(), 'kept', async (key) => (reads.push(key), key), 3);
    for (const key of ['a', 'b', 'c', 'd']) await cache.get(key);
    reads.length = 0;
    for (const key of ['b', 'c', 'd', 'a']) await cache.get(key);
    assert.deepEqual(reads, ['a'], 'a, the oldest, was dropped to keep d; the others stayed');
  });

  it('does not keep a read that a change overtook', async () => {
    let release!: () => void;
    let reads = 0;
    const cache = new ChangeCache(controlledBus(), 'kept', async () => {
      reads++;
      if (reads === 1) await new Promise<void>((resolve) => (release = resolve));
      return reads;
    }, 10);
    const racing = cache.get('a');
    await new Promise((resolve) => setImmediate(resolve));
    await cache.changed('a');
    release();
    await racing;
    assert.equal(await cache.get('a'), 2, 'the value read before the change is not served after it');
  });
});
