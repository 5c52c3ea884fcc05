import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, describe, it } from './fixtures/suites.ts';
import Fastify, { type FastifyInstance, type InjectOptions, type LightMyRequestResponse } from 'fastify';
import { installErrorHandling } from '../src/core/http/errors.ts';
import { installRateLimits, type RateLimitOptions } from '../src/core/http/rate-limit.ts';
import { Problem } from '../src/core/problems.ts';
import { failOnLeakedHandles } from './fixtures/leaks.ts';
import { startSilentServer } from './fixtures/network.ts';
import { deleteKeys, keysUnder, REDIS_URL, redisAvailable, uniqueKeyPrefix } from './fixtures/redis.ts';
import { TcpProxy } from './fixtures/tcp-proxy.ts';

failOnLeakedHandles();

const BASE_URL = 'http://restock.test';
const PER_MINUTE = 100;
const redisUp = await redisAvailable();

interface LimitedApp {
  app: FastifyInstance;
  /** Log lines at warn and above. */
  logs: string[];
  get(url: string, agent?: string, extra?: Partial<InjectOptions>): Promise<LightMyRequestResponse>;
  register(remoteAddress: string, agent?: string): Promise<LightMyRequestResponse>;
}

/** A small app: our error handling, a stand-in for the access-token check, three routes. */
async function limitedApp(options: Partial<RateLimitOptions> = {}): Promise<LimitedApp> {
  const logs: string[] = [];
  const app = Fastify({ logger: { level: 'warn', stream: { write: (line: string) => void logs.push(line) } } });
  app.addHook('onRequest', async (request) => {
    const agent = request.headers['x-test-agent'];
    if (typeof agent !== 'string') return;
    request.caller = { agentId: agent, scopes: new Set(), storeDomain: null, rateLimitPerMinute: PER_MINUTE, tokenId: `tok-${agent}` };
  });
  installErrorHandling(app, BASE_URL, 16_384);
  await installRateLimits(app, { registrationPerAddress: { max: 3, windowSeconds: 3600 }, ...options });
  app.get('/things', async () => ({ ok: true }));
  app.get('/conflict', async () => {
    throw new Problem('conflict', 'Always.');
  });
  app.post('/register', { config: { rateLimitByAddress: 'registration' } }, async () => ({ registered: true }));
  await app.ready();
  const headers = (agent?: string): Record<string, string> => (agent ? { 'x-test-agent': agent } : {});
  return {
    app,
    logs,
    get: (url, agent, extra = {}) => app.inject({ method: 'GET', url, headers: headers(agent), ...extra }),
    register: (remoteAddress, agent) =>
      app.inject({
        method: 'POST',
        url: '/register',
        remoteAddress,
        headers: { 'content-type': 'application/json', ...headers(agent) },
        payload: '{}',
      }),
  };
}

async function times(n: number, send: () => Promise<LightMyRequestResponse>): Promise<LightMyRequestResponse[]> {
  const answers: LightMyRequestResponse[] = [];
  for (let i = 0; i < n; i++) answers.push(await send());
  return answers;
}

function assertRateLimited(res: LightMyRequestResponse, limit: number) {
  assert.equal(res.statusCode, 429, res.body);
  assert.match(res.headers['content-type'] as string, /^application\/problem\+json/);
  const retryAfter = Number(res.headers['retry-after']);
  assert.ok(Number.isInteger(retryAfter) && retryAfter >= 1, `Retry-After: ${res.headers['retry-after']}`);
  assert.equal(res.headers['ratelimit-limit'], String(limit));
  assert.equal(res.headers['ratelimit-remaining'], '0');
  const body = res.json();
  assert.equal(body.type, `${BASE_URL}/problems/rate-limited`);
  assert.equal(body.status, 429);
  assert.equal(body.title, 'Too many requests');
  assert.match(body.detail, new RegExp(`\\b${limit}\\b`), 'the detail names the limit');
  assert.ok(body.requestId);
  return body as { detail: string };
}

/**
 * Sends until an answer is counted again (the client reconnects on its own schedule), failing
 * when none is by `timeoutMs`.
 */
async function firstCounted(send: () => Promise<LightMyRequestResponse>, timeoutMs: number): Promise<LightMyRequestResponse> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const res = await send();
    if (res.headers['ratelimit-limit'] !== undefined) return res;
    if (Date.now() > deadline) assert.fail(`no request was counted within ${timeoutMs} ms of Redis coming back`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** A loopback port nothing listens on. */
async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

describe('rate limits counted in memory', () => {
  let t: LimitedApp;
  before(async () => {
    t = await limitedApp();
  });
  after(() => t.app.close());

  it(`serves ${PER_MINUTE} requests a minute per credential and refuses the next with 429 problem+json`, async () => {
    const answers = await times(PER_MINUTE, () => t.get('/things', 'agent-a'));
    for (const [i, res] of answers.entries()) {
      assert.equal(res.statusCode, 200);
      assert.equal(res.headers['ratelimit-limit'], String(PER_MINUTE));
      assert.equal(res.headers['ratelimit-remaining'], String(PER_MINUTE - 1 - i), 'counts down by one per request');
      const reset = Number(res.headers['ratelimit-reset']);
      assert.ok(reset > 0 && reset <= 60, `RateLimit-Reset: ${res.headers['ratelimit-reset']}`);
      assert.equal(res.headers['ratelimit-policy'], `${PER_MINUTE};w=60`);
    }
    const refused = assertRateLimited(await t.get('/things', 'agent-a'), PER_MINUTE);
    assert.match(refused.detail, /agent-a/);
    assert.match(refused.detail, /per minute/);
    assertRateLimited(await t.get('/things', 'agent-a'), PER_MINUTE);
  });

  it('counts credentials apart', async () => {
    await times(PER_MINUTE, () => t.get('/things', 'agent-b'));
    assert.equal((await t.get('/things', 'agent-b')).statusCode, 429);
    const other = await t.get('/things', 'agent-c');
    assert.equal(other.statusCode, 200);
    assert.equal(other.headers['ratelimit-remaining'], String(PER_MINUTE - 1));
  });

  it('does not count requests without a credential', async () => {
    const answers = await times(PER_MINUTE + 20, () => t.get('/things'));
    assert.ok(answers.every((r) => r.statusCode === 200));
    assert.equal(answers.at(-1)!.headers['ratelimit-limit'], undefined);
  });

  it('counts, and says so, whatever the answer: errors and unknown routes too', async () => {
    const failed = await t.get('/conflict', 'agent-d');
    assert.equal(failed.statusCode, 409);
    assert.equal(failed.headers['ratelimit-remaining'], String(PER_MINUTE - 1));
    const missing = await t.get('/nowhere', 'agent-d');
    assert.equal(missing.statusCode, 404);
    assert.equal(missing.headers['ratelimit-remaining'], String(PER_MINUTE - 2));
  });

  it('limits registration per client address, on the routes that ask for it only', async () => {
    const answers = await times(3, () => t.register('198.51.100.7'));
    assert.deepEqual(answers.map((r) => r.statusCode), [200, 200, 200]);
    assert.deepEqual(answers.map((r) => r.headers['ratelimit-remaining']), ['2', '1', '0']);
    assert.equal(answers[0]!.headers['ratelimit-policy'], '3;w=3600');
    const refused = assertRateLimited(await t.register('198.51.100.7'), 3);
    assert.match(refused.detail, /3 registration requests per hour/);
    assert.equal((await t.register('198.51.100.8')).statusCode, 200, 'another address has its own count');
    const elsewhere = await t.get('/things', undefined, { remoteAddress: '198.51.100.7' });
    assert.equal(elsewhere.statusCode, 200, 'other routes are not counted per address');
    assert.equal(elsewhere.headers['ratelimit-limit'], undefined);
  });

  it('counts IPv6 clients by their /64', async () => {
    await times(3, () => t.register('2001:db8:1:2::1'));
    assert.equal((await t.register('2001:db8:1:2::ffff')).statusCode, 429);
    assert.equal((await t.register('2001:db8:1:3::1')).statusCode, 200);
  });

  it('refuses to start with a route naming an unknown per-address policy', async () => {
    const app = Fastify();
    await installRateLimits(app, { registrationPerAddress: { max: 3, windowSeconds: 3600 } });
    await assert.rejects(async () => {
      app.post('/typo', { config: { rateLimitByAddress: 'registrations' as 'registration' } }, async () => ({}));
      await app.ready();
    }, /Unknown rateLimitByAddress policy 'registrations'/);
    await app.close();
  });

  it('applies both limits when a credential calls a per-address route, and reports the closer one', async () => {
    const res = await t.register('198.51.100.20', 'agent-e');
    assert.equal(res.statusCode, 200);
    assert.equal(res.headers['ratelimit-limit'], '3');
    assert.equal(res.headers['ratelimit-remaining'], '2');
    assert.equal(res.headers['ratelimit-policy'], `${PER_MINUTE};w=60, 3;w=3600`);
    assert.equal((await t.get('/things', 'agent-e')).headers['ratelimit-remaining'], String(PER_MINUTE - 2));
  });
});

/**
 * Sends one request more than a credential may make and checks that every one was served
 * uncounted: no 429, no RateLimit headers for a count that was not made.
 */
async function assertServedUncounted(t: LimitedApp, agent: string): Promise<void> {
  const answers = await times(PER_MINUTE + 5, () => t.get('/things', agent));
  assert.ok(answers.every((r) => r.statusCode === 200), answers.map((r) => r.statusCode).join(','));
  assert.ok(answers.every((r) => r.headers['ratelimit-limit'] === undefined), 'no headers for a count that was not made');
}

/** A counting command as the limiter sends it (RESP): EVALSHA of its script, or EVAL when Redis lacks it. */
const COUNTING_COMMAND = /\$\d+\r\n(evalsha|eval)\r\n/i;

describe('rate limits when Redis is configured but cannot be counted on', () => {
  // A limiter that waits on Redis costs each request up to its command timeout (500 ms): the
  // requests of one test then take close to a minute, and these fail by timing out.
  const WAITING_FAILS = { timeout: 20_000 };

  it('serves requests, uncounted, when nothing listens at the Redis address, and warns', WAITING_FAILS, async () => {
    const t = await limitedApp({ redisUrl: `redis://127.0.0.1:${await closedPort()}` });
    try {
      await assertServedUncounted(t, 'agent-down');
      assert.equal((await t.register('198.51.100.30')).statusCode, 200);
      const warnings = t.logs.map((l) => JSON.parse(l)).filter((l) => l.level === 40);
      assert.ok(warnings.some((l) => /rate limits cannot be counted/.test(l.msg)), t.logs.join('\n'));
      assert.ok(warnings.length <= 2, `throttled, not one line per request: ${warnings.length}`);
    } finally {
      await t.app.close();
    }
  });

  it('serves requests when Redis accepts connections but never answers, without asking it to count', WAITING_FAILS, async () => {
    const silent = await startSilentServer();
    const t = await limitedApp({ redisUrl: `redis://127.0.0.1:${silent.port}` });
    try {
      // Once the limiter has sent a count to a Redis that never answers, only its timeout can
      // release the request: the count being asked first means the request waited on it.
      const first = await Promise.race([
        assertServedUncounted(t, 'agent-silent').then(() => 'served' as const),
        silent.asked(COUNTING_COMMAND).then(() => 'asked to count' as const),
      ]);
      assert.equal(first, 'served', 'the limiter sent a count to the silent Redis and waited for its answer');
    } finally {
      await t.app.close();
      await silent.close();
    }
  });
});

describe('rate limits counted in Redis', { skip: redisUp ? false : `Redis not reachable at ${REDIS_URL}` }, () => {
  const prefix = uniqueKeyPrefix('rate-limit');
  after(() => deleteKeys(prefix));

  it('processes sharing one Redis share the count', async () => {
    const one = await limitedApp({ redisUrl: REDIS_URL, keyPrefix: prefix });
    const two = await limitedApp({ redisUrl: REDIS_URL, keyPrefix: prefix });
    try {
      const answers = [
        ...(await times(PER_MINUTE / 2, () => one.get('/things', 'agent-shared'))),
        ...(await times(PER_MINUTE / 2, () => two.get('/things', 'agent-shared'))),
      ];
      assert.ok(answers.every((r) => r.statusCode === 200));
      assert.equal(answers.at(-1)!.headers['ratelimit-remaining'], '0');
      assertRateLimited(await one.get('/things', 'agent-shared'), PER_MINUTE);
      assertRateLimited(await two.get('/things', 'agent-shared'), PER_MINUTE);
      assert.equal((await one.get('/things', 'agent-apart')).statusCode, 200);

      await times(3, () => one.register('198.51.100.40'));
      assertRateLimited(await two.register('198.51.100.40'), 3);

      assert.deepEqual(await keysUnder(prefix), [
        `${prefix}address:registration:198.51.100.40`,
        `${prefix}agent:agent-apart`,
        `${prefix}agent:agent-shared`,
      ]);
    } finally {
      await one.app.close();
      await two.app.close();
    }
  });

  it('serves uncounted while Redis is away and counts again once it is back', async () => {
    const { hostname, port } = new URL(REDIS_URL);
    const proxy = await new TcpProxy(hostname, Number(port || 6379)).start();
    const t = await limitedApp({ redisUrl: `redis://127.0.0.1:${proxy.port}`, keyPrefix: prefix });
    try {
      assert.equal((await t.get('/things', 'agent-outage')).headers['ratelimit-remaining'], String(PER_MINUTE - 1));
      await proxy.cut();
      const during = await times(5, () => t.get('/things', 'agent-outage'));
      assert.ok(during.every((r) => r.statusCode === 200 && r.headers['ratelimit-limit'] === undefined));
      assert.ok(t.logs.some((l) => /rate limits cannot be counted/.test(l)));
      await proxy.restore();
      const res = await firstCounted(() => t.get('/things', 'agent-outage'), 10_000);
      assert.equal(res.headers['ratelimit-remaining'], String(PER_MINUTE - 2), 'the count kept in Redis resumes');
    } finally {
      await t.app.close();
      await proxy.close();
    }
  });
});
