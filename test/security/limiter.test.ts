/**
 * The limiter (issue 18, finding 16 and the first half of 6): a Redis that goes silent stops
 * being asked after a few timeouts and limits are counted in the process until it answers again;
 * every JSON-RPC message of an MCP batch counts as one request. Each test failed on the code
 * before its fix.
 */
import assert from 'node:assert/strict';
import Fastify, { type FastifyInstance, type LightMyRequestResponse } from 'fastify';
import { after, before, describe, it } from '../fixtures/suites.ts';
import { dialectSkip, startTestApp, testDialects, type TestApp } from '../fixtures/app.ts';
import { failOnLeakedHandles } from '../fixtures/leaks.ts';
import { deleteKeys, REDIS_URL, redisAvailable, uniqueKeyPrefix } from '../fixtures/redis.ts';
import { TcpProxy } from '../fixtures/tcp-proxy.ts';
import { installErrorHandling } from '../../src/core/http/errors.ts';
import { installRateLimits } from '../../src/core/http/rate-limit.ts';

failOnLeakedHandles();

const redisUp = await redisAvailable();
const PER_MINUTE = 20;
/** A counting command as the limiter sends it (RESP): EVALSHA of its script, or EVAL when Redis lacks it. */
const COUNTING_COMMAND = /\$\d+\r\n(evalsha|eval)\r\n/gi;
const TRIPPED = /counting in this process's memory/;
const RECOVERED = /Redis answers again; counting in Redis again/;

/** Counting commands that reached the proxy in front of Redis so far (held back by a silent one or not). */
function countingCommands(proxy: TcpProxy): number {
  return proxy.sent.match(COUNTING_COMMAND)?.length ?? 0;
}


/** A small app: our error handling, a stand-in for the access-token check, one route. */
async function limitedApp(redisUrl: string, keyPrefix: string): Promise<{ app: FastifyInstance; logs: Array<{ level: number; msg: string }> }> {
  const logs: Array<{ level: number; msg: string }> = [];
  const app = Fastify({ logger: { level: 'info', stream: { write: (line: string) => void logs.push(JSON.parse(line)) } }, disableRequestLogging: true });
  app.addHook('onRequest', async (request) => {
    const agent = request.headers['x-test-agent'];
    if (typeof agent === 'string') request.caller = { agentId: agent, scopes: new Set(), storeDomain: null, rateLimitPerMinute: PER_MINUTE, tokenId: `tok-${agent}` };
  });
  installErrorHandling(app, 'http://restock.test', 16_384);
  await installRateLimits(app, { redisUrl, keyPrefix, registrationPerAddress: { max: 3, windowSeconds: 3600 } });
  app.get('/things', async () => ({ ok: true }));
  await app.ready();
  return { app, logs };
}

async function waitFor(check: () => boolean, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) assert.fail(`${what}: not within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

describe('the limiter when Redis goes silent', { skip: redisUp ? false : `Redis not reachable at ${REDIS_URL}` }, () => {
  const prefix = uniqueKeyPrefix('security-limiter');
  after(() => deleteKeys(prefix));

  it('finding 16: after a few timeouts a silent Redis is no longer asked, limits apply in the process, one log line; counting returns to Redis once it answers', { timeout: 60_000 }, async () => {
    const { hostname, port } = new URL(REDIS_URL);
    const proxy = await new TcpProxy(hostname, Number(port || 6379)).start();
    const { app, logs } = await limitedApp(`redis://127.0.0.1:${proxy.port}`, prefix);
    const get = (agent: string) => app.inject({ method: 'GET', url: '/things', headers: { 'x-test-agent': agent } });
    const lines = (pattern: RegExp) => logs.filter((l) => pattern.test(l.msg));
    try {
      assert.equal((await get('agent-first')).headers['ratelimit-remaining'], String(PER_MINUTE - 1), 'counted in Redis');
      proxy.silence();

      // Each of these waits for the command timeout; a bounded number of them trips the breaker.
      let waited = 0;
      while (lines(TRIPPED).length === 0) {
        assert.ok(++waited <= 10, 'the breaker never opened');
        const res = await get('agent-silenced');
        assert.equal(res.statusCode, 200, 'served while Redis is silent');
      }
      const askedWhenTripped = countingCommands(proxy);

      const answers: LightMyRequestResponse[] = [];
      for (let i = 0; i <= PER_MINUTE; i++) answers.push(await get('agent-local'));
      assert.deepEqual(answers.slice(0, PER_MINUTE).map((r) => r.headers['ratelimit-remaining']), Array.from({ length: PER_MINUTE }, (_, i) => String(PER_MINUTE - 1 - i)), 'counted in the process');
      assert.equal(answers.at(-1)!.statusCode, 429, 'the limit still applies');
      assert.equal(countingCommands(proxy), askedWhenTripped, 'no count was sent to the silent Redis, so no request waited on it');
      assert.equal(lines(TRIPPED).length, 1, 'one line when the breaker opens, not one per request');
      assert.ok(lines(TRIPPED)[0]!.level >= 40);

      proxy.resume();
      await waitFor(() => lines(RECOVERED).length > 0, 'the probe finding Redis again');
      const back = await get('agent-first');
      assert.equal(countingCommands(proxy), askedWhenTripped + 1, 'counted in Redis again');
      assert.equal(back.headers['ratelimit-remaining'], String(PER_MINUTE - 2), 'the count kept in Redis resumes');
      assert.equal(lines(TRIPPED).length, 1);
      assert.equal(lines(RECOVERED).length, 1, 'one line when it closes');
    } finally {
      await app.close();
      await proxy.close();
    }
  });
});

/** A JSON-RPC batch of `n` subscribe_alert calls. */
function subscribeBatch(n: number, tag: string) {
  return Array.from({ length: n }, (_, i) => ({
    jsonrpc: '2.0',
    id: i + 1,
    method: 'tools/call',
    params: { name: 'subscribe_alert', arguments: { productId: `gid://shopify/Product/${900 + i}`, email: `b${i}.${tag}@example.com` } },
  }));
}

for (const dialect of testDialects()) {
  describe(`MCP batches and the rate limit on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    const LIMIT = 10;
    let t: TestApp;
    before(async () => {
      t = await startTestApp(dialect, { RATE_LIMIT_ANONYMOUS_PER_MINUTE: String(LIMIT), PAYMENT_LIMIT_PER_MINUTE: '5' });
    });
    after(() => t.close());

    const mcp = (body: unknown, headers: Record<string, string> = {}) =>
      t.inject({ method: 'POST', url: '/mcp', headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers }, payload: JSON.stringify(body) });
    const subscriptions = async () => Number((await t.database.db.selectFrom('subscriptions').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow()).n);

    it(`finding 6: a batch of 60 subscribe_alert calls with a limit of ${LIMIT} a minute creates at most ${LIMIT} subscriptions`, async () => {
      const before = await subscriptions();
      const refused = await mcp(subscribeBatch(60, 'flood'));
      assert.equal(refused.statusCode, 429, refused.body);
      assert.match(refused.headers['content-type'] as string, /^application\/problem\+json/);
      assert.ok(Number(refused.headers['retry-after']) >= 1);
      assert.equal(refused.json().type, 'http://restock.test/problems/rate-limited');
      assert.ok((await subscriptions()) - before <= LIMIT);
      assert.equal(await subscriptions(), before, 'a batch that does not fit is refused whole');
    });

    it('finding 6: each message of a batch counts one request, and the batch that no longer fits is refused whole', async () => {
      const agent = await t.app.inject({ method: 'POST', url: '/api/agent/register', payload: { type: 'anonymous' } });
      const token = `Bearer ${agent.json().credential}`;
      const before = await subscriptions();
      const served = await mcp(subscribeBatch(4, 'fits'), { authorization: token });
      assert.equal(served.statusCode, 200, served.body);
      assert.equal(served.json().length, 4);
      assert.equal(served.headers['ratelimit-remaining'], String(LIMIT - 4));
      assert.equal(await subscriptions(), before + 4);
      const single = await mcp(subscribeBatch(1, 'single')[0], { authorization: token });
      assert.equal(single.headers['ratelimit-remaining'], String(LIMIT - 5), 'a single call is one request');
      const over = await mcp(subscribeBatch(6, 'over'), { authorization: token });
      assert.equal(over.statusCode, 429, over.body);
      assert.equal(await subscriptions(), before + 5);
    });

    it('finding 6: without a token, each message counts against the client address', async () => {
      const send = (n: number, remoteAddress: string) =>
        t.app.inject({
          method: 'POST',
          url: '/mcp',
          remoteAddress,
          headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
          payload: JSON.stringify(subscribeBatch(n, 'unpaid')),
        });
      const within = await send(5, '198.51.100.61');
      assert.equal(within.statusCode, 200, within.body);
      assert.equal(within.headers['ratelimit-remaining'], '0');
      assert.equal((await send(6, '198.51.100.62')).statusCode, 429);
      assert.equal((await send(1, '198.51.100.61')).statusCode, 429);
    });
  });
}
