/**
 * Outages as they happen in production: a PostgreSQL network that goes silent (packets dropped,
 * no reset), a database host that goes away while requests keep coming, and SIGTERM while
 * keep-alive connections are busy. PostgreSQL faults run on PostgreSQL only (a network is what
 * fails); SIGTERM runs the real `restock serve` process on its embedded default.
 *
 * `RESTOCK_OUTAGE_SECONDS` (default 3) sets how long the logged outage lasts, and
 * `RESTOCK_OUTAGE_STATEMENT_TIMEOUT_MS` (default 1000, at most 8000 within the bound) the statement
 * bound of the silent-network request; docs/operations.md has the figures these diagnostics print.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance } from 'fastify';
import { sql } from 'kysely';
import pg from 'pg';
import { buildApp } from '../src/app.ts';
import { Database } from '../src/core/db/database.ts';
import { isUnavailableError } from '../src/core/db/dialect.ts';
import { createTestDatabase, dialectSkip, registerAnonymous, testConfig, type TestDatabase } from './fixtures/app.ts';
import { failOnLeakedHandles } from './fixtures/leaks.ts';
import { eventually, freePort, refusesConnections } from './fixtures/network.ts';
import { PG_ADMIN_URL } from './fixtures/services.ts';
import { after, describe, it } from './fixtures/suites.ts';
import { TcpProxy } from './fixtures/tcp-proxy.ts';
import { watchOutput, type ProcessOutput } from './fixtures/worker-process.ts';

failOnLeakedHandles();

const BIN = fileURLToPath(new URL('../bin/restock.js', import.meta.url));
const EXIT_WITH_PARENT = new URL('./fixtures/exit-with-parent.mjs', import.meta.url).href;
/** Beyond what the statement bound allows (its value plus 1 s), far below "hangs". */
const ANSWER_BOUND_MS = 10_000;
const OUTAGE_SECONDS = Number(process.env.RESTOCK_OUTAGE_SECONDS ?? 3);
const STATEMENT_TIMEOUT_MS = process.env.RESTOCK_OUTAGE_STATEMENT_TIMEOUT_MS ?? '1000';
const MISSING_SUBSCRIPTION = '/api/v1/alerts/sub_00000000000000000000000000';

const tmpDirs: string[] = [];
after(() => tmpDirs.forEach((dir) => rmSync(dir, { recursive: true, force: true })));

/** Settles as `promise` does, or fails once `ms` have passed without it settling. */
async function within<T>(ms: number, promise: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const bound = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms: ${what}`)), ms);
  });
  try {
    return await Promise.race([promise, bound]);
  } finally {
    clearTimeout(timer);
  }
}

/** DATABASE_URL through a loopback proxy that the test can silence or cut. */
async function proxied(testDatabase: TestDatabase): Promise<{ proxy: TcpProxy; url: string }> {
  const target = new URL(testDatabase.url);
  const proxy = await new TcpProxy(target.hostname, Number(target.port || 5432)).start();
  target.hostname = '127.0.0.1';
  target.port = String(proxy.port);
  return { proxy, url: target.toString() };
}

/** Sessions PostgreSQL holds open on the database, seen from outside the proxy. */
async function sessionsOn(database: string): Promise<number> {
  const client = new pg.Client({ connectionString: PG_ADMIN_URL });
  await client.connect();
  try {
    const { rows } = await client.query('select count(*)::int as n from pg_stat_activity where datname = $1 and pid <> pg_backend_pid()', [database]);
    return rows[0].n as number;
  } finally {
    await client.end();
  }
}

function assertServiceUnavailable(status: number, contentType: unknown, body: string) {
  assert.equal(status, 503, body);
  assert.match(String(contentType), /^application\/problem\+json/, body);
  const problem = JSON.parse(body);
  assert.match(problem.type, /\/problems\/service-unavailable$/);
  assert.equal(problem.status, 503);
}

describe('a PostgreSQL network that goes silent', { skip: dialectSkip('postgres') }, () => {
  it('fault 15: a request whose PostgreSQL connection goes silent answers 503 problem+json within the bound, and the pool recovers', async (t) => {
    const testDatabase = await createTestDatabase('postgres');
    const { proxy, url } = await proxied(testDatabase);
    const config = testConfig(url, { PG_STATEMENT_TIMEOUT_MS: STATEMENT_TIMEOUT_MS, PG_POOL_MAX: '2' });
    const database = Database.open(config.database);
    let app: FastifyInstance | undefined;
    try {
      app = await buildApp(config, database);
      await app.ready();
      const authorization = `Bearer ${await registerAnonymous(app)}`;
      const read = () => app!.inject({ method: 'GET', url: MISSING_SUBSCRIPTION, headers: { authorization } });
      // Both pooled connections open and used, as under steady traffic.
      for (const res of await Promise.all([read(), read(), read(), read()])) assert.equal(res.statusCode, 404, res.body);

      proxy.silence();
      const started = Date.now();
      const during = await within(ANSWER_BOUND_MS, read(), 'a read on a silent PostgreSQL connection');
      t.diagnostic(`answered ${during.statusCode} ${Date.now() - started} ms after the network went silent (PG_STATEMENT_TIMEOUT_MS=${STATEMENT_TIMEOUT_MS})`);
      assertServiceUnavailable(during.statusCode, during.headers['content-type'], during.body);
      assert.ok(Number(during.headers['retry-after']) > 0);
      assert.doesNotMatch(during.body, /\bat .*\.(ts|js):\d+/, 'no stack trace');

      proxy.resume();
      for (let i = 0; i < 6; i++) {
        const res = await within(ANSWER_BOUND_MS, read(), 'a read once the network is back');
        assert.equal(res.statusCode, 404, `request ${i} after the network came back: ${res.body}`);
      }
    } finally {
      // A request still waiting on the silent network gets its answer, so the pool can close.
      proxy.resume();
      await app?.close();
      await database.close();
      await proxy.close();
      await testDatabase.drop();
    }
  });

  it('fault 15: a connection whose query timed out is dropped, so the statement its silent network held never runs', async () => {
    const testDatabase = await createTestDatabase('postgres');
    const { proxy, url } = await proxied(testDatabase);
    // One connection: a timed-out connection kept in the pool would serve the next query.
    const database = Database.open(testConfig(url, { PG_STATEMENT_TIMEOUT_MS: '1000', PG_POOL_MAX: '1' }).database);
    const held = () => database.db.selectFrom('service_secrets').select('name').where('name', '=', 'held-by-the-network').execute();
    try {
      assert.deepEqual(await held(), []);
      assert.equal(await sessionsOn(testDatabase.name!), 1);

      proxy.silence();
      const insert = database.writeStatement((db) =>
        db.insertInto('service_secrets').values({ name: 'held-by-the-network', value: 'x', created_at: new Date().toISOString() }).execute(),
      );
      await assert.rejects(within(ANSWER_BOUND_MS, insert, 'an insert on a silent connection'), (err) => {
        assert.ok(isUnavailableError(err), `a database-unavailable error, not ${(err as Error).message}`);
        return true;
      });
      // The silent connection is closed, so PostgreSQL ends its session: nothing can deliver the
      // held INSERT any more.
      await eventually(async () => (await sessionsOn(testDatabase.name!)) === 0, 'the timed-out session ends', ANSWER_BOUND_MS);

      proxy.resume();
      assert.deepEqual(await within(ANSWER_BOUND_MS, held(), 'a read on a fresh connection'), [], 'the refused insert never ran');
    } finally {
      proxy.resume();
      await database.close();
      await proxy.close();
      await testDatabase.drop();
    }
  });

  it('fault 15: a statement that runs past PG_STATEMENT_TIMEOUT_MS is cancelled by PostgreSQL, and its connection serves the next query', async () => {
    const testDatabase = await createTestDatabase('postgres');
    const database = Database.open(testConfig(testDatabase.url, { PG_STATEMENT_TIMEOUT_MS: '500', PG_POOL_MAX: '1' }).database);
    const session = async () => (await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(database.db)).rows[0]!.pid;
    try {
      const before = await session();
      await assert.rejects(within(ANSWER_BOUND_MS, sql`select pg_sleep(3)`.execute(database.db), 'a slow statement'), (err) => {
        assert.equal((err as { code?: string }).code, '57014', (err as Error).message);
        assert.ok(isUnavailableError(err));
        return true;
      });
      assert.equal(await session(), before, 'the same connection, kept in the pool');
    } finally {
      await database.close();
      await testDatabase.drop();
    }
  });
});

interface Served {
  child: ChildProcess;
  base: string;
  port: number;
  exited: Promise<number | string | null>;
  output: ProcessOutput;
  kill(): Promise<void>;
}

/** `restock serve` as production runs it, once it says it is listening. */
async function serve(env: Record<string, string>): Promise<Served> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'restock-outage-'));
  tmpDirs.push(dir);
  const port = await freePort();
  const child = spawn(process.execPath, ['--import', EXIT_WITH_PARENT, BIN, 'serve'], {
    cwd: dir,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, PORT: String(port), DATA_DIR: dir, LOG_LEVEL: 'info', ...env },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const output = watchOutput(child);
  const exited = new Promise<number | string | null>((resolve) => child.on('exit', (code, signal) => resolve(code ?? signal)));
  const kill = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await exited;
  };
  try {
    await output.line(/"msg":"Restock is listening"/, 60_000);
  } catch (err) {
    await kill();
    throw err;
  }
  return { child, base: `http://127.0.0.1:${port}`, port, exited, output, kill };
}

interface Answer {
  status: number;
  contentType: string;
  body: string;
}

function request(agent: http.Agent, base: string, pathname: string, headers: Record<string, string> = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.get(`${base}${pathname}`, { agent, headers }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode!, contentType: String(res.headers['content-type']), body }));
      res.on('error', reject);
    });
    req.on('error', reject);
  });
}

/**
 * `connections` clients, each sending one request after another on its own keep-alive connection
 * until `stop()` says so, the service stops answering, or `limit` requests have been sent.
 */
function load(base: string, connections: number, limit: number, send: (agent: http.Agent) => Promise<Answer>) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: connections });
  const answers: Answer[] = [];
  const failures: string[] = [];
  const listeners = new Set<() => void>();
  let stopped = false;
  let sent = 0;
  const loops = Array.from({ length: connections }, async () => {
    while (!stopped && sent < limit) {
      sent++;
      try {
        answers.push(await send(agent));
      } catch (err) {
        // A connection refused or closed between requests: no answer, which a client retries.
        failures.push((err as NodeJS.ErrnoException).code ?? (err as Error).message);
        if ((err as NodeJS.ErrnoException).code === 'ECONNREFUSED') return;
      }
      for (const listener of listeners) listener();
    }
  });
  const done = Promise.all(loops).finally(() => agent.destroy());
  return {
    answers,
    failures,
    done,
    stop: () => void (stopped = true),
    /** Resolves once `count` answers have come. */
    answered: (count: number) =>
      new Promise<void>((resolve, reject) => {
        const check = () => {
          if (answers.length < count) return;
          listeners.delete(check);
          resolve();
        };
        listeners.add(check);
        void done.then(() => (answers.length >= count ? resolve() : reject(new Error(`only ${answers.length} answers`))));
        check();
      }),
  };
}

interface RawConnection {
  socket: net.Socket;
  closed: Promise<void>;
  received(): string;
}

/** A bare connection, for requests written byte by byte. */
async function rawConnection(port: number): Promise<RawConnection> {
  const socket = net.connect(port, '127.0.0.1');
  socket.on('error', () => {});
  let received = '';
  socket.setEncoding('latin1');
  socket.on('data', (chunk: string) => (received += chunk));
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  await new Promise((resolve) => socket.once('connect', resolve));
  return { socket, closed, received: () => received };
}

function count(values: string[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const value of values) out[value] = (out[value] ?? 0) + 1;
  return out;
}

/** The HTTP/1.1 responses on a raw connection, in order (they carry Content-Length). */
function parseResponses(raw: string): Answer[] {
  const out: Answer[] = [];
  let rest = raw;
  while (rest.length > 0) {
    const headEnd = rest.indexOf('\r\n\r\n');
    if (headEnd < 0) break;
    const head = rest.slice(0, headEnd).split('\r\n');
    const header = (name: string) => head.find((line) => line.toLowerCase().startsWith(`${name}:`))?.slice(name.length + 1).trim() ?? '';
    const length = Number(header('content-length'));
    out.push({ status: Number(head[0]!.split(' ')[1]), contentType: header('content-type'), body: rest.slice(headEnd + 4, headEnd + 4 + length) });
    rest = rest.slice(headEnd + 4 + length);
  }
  return out;
}

describe('SIGTERM under load', () => {
  it('fault 17: SIGTERM under load answers every request on open keep-alive connections normally or with 503 problem+json, and the process exits by itself', async (t) => {
    const served = await serve({ SHUTDOWN_TIMEOUT_MS: '5000', RUN_WORKER: 'false' });
    const traffic = load(served.base, 8, 20_000, (agent) => request(agent, served.base, '/api/v1/plans'));
    const raws: RawConnection[] = [];
    try {
      await traffic.answered(200);

      // A request that began arriving before the signal and ends after it (its head still
      // incomplete: the connection is not idle, so it is not closed), and one in flight (its body
      // still on the way). The server has read the first by the time it logs the second, which
      // was written after it.
      const late = await rawConnection(served.port);
      const inFlight = await rawConnection(served.port);
      raws.push(late, inFlight);
      late.socket.write(`GET /api/v1/plans HTTP/1.1\r\nHost: 127.0.0.1:${served.port}\r\n`);
      const body = JSON.stringify({ type: 'anonymous' });
      inFlight.socket.write(
        `POST /api/agent/register HTTP/1.1\r\nHost: 127.0.0.1:${served.port}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body.slice(0, 5)}`,
      );
      await served.output.line(/^(?=.*"msg":"incoming request")(?=.*"url":"\/api\/agent\/register")/, 30_000);

      served.child.kill('SIGTERM');
      await eventually(() => refusesConnections(served.base), 'the listener closes after SIGTERM', 30_000);
      late.socket.write('\r\n');
      inFlight.socket.write(body.slice(5));
      await within(30_000, Promise.all([late.closed, inFlight.closed]), 'both connections close once answered');

      const [afterClose] = parseResponses(late.received());
      assert.ok(afterClose, `an answer to the request that arrived while closing: ${late.received()}`);
      assertServiceUnavailable(afterClose.status, afterClose.contentType, afterClose.body);
      assert.equal(parseResponses(inFlight.received())[0]?.status, 201, inFlight.received());

      traffic.stop();
      await within(30_000, traffic.done, 'the load stops');
      assert.equal(await within(30_000, served.exited, 'the process exits by itself'), 0);

      const refused = traffic.answers.filter((a) => a.status !== 200);
      t.diagnostic(`${traffic.answers.length} answers (${refused.length} of them 503); without an answer: ${JSON.stringify(count(traffic.failures))}`);
      for (const answer of refused) assertServiceUnavailable(answer.status, answer.contentType, answer.body);
      assert.ok(traffic.answers.length >= 200);
    } finally {
      traffic.stop();
      for (const raw of raws) raw.socket.destroy();
      await served.kill();
      await traffic.done;
    }
  });
});

describe('outage logs', { skip: dialectSkip('postgres') }, () => {
  it('fault 17: a database outage under load is logged as a warning and a count per interval, not an error with a stack per request', async (t) => {
    const testDatabase = await createTestDatabase('postgres');
    const { proxy, url } = await proxied(testDatabase);
    let served: Served | undefined;
    const agent = new http.Agent({ keepAlive: true, maxSockets: 4 });
    try {
      served = await serve({ DATABASE_URL: url, RUN_WORKER: 'false', REGISTRATION_LIMIT_PER_HOUR: '1000000', RATE_LIMIT_ANONYMOUS_PER_MINUTE: '1000000' });
      const base = served.base;
      const registered = await fetch(`${base}/api/agent/register`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ type: 'anonymous' }),
      });
      assert.equal(registered.status, 201);
      const authorization = `Bearer ${(await registered.json()).credential}`;
      let unavailable = 0;
      const send = async (a: http.Agent) => {
        const answer = await request(a, base, MISSING_SUBSCRIPTION, { authorization });
        if (answer.status === 503) {
          assertServiceUnavailable(answer.status, answer.contentType, answer.body);
          unavailable++;
        }
        return answer;
      };
      assert.equal((await send(agent)).status, 404);

      await proxy.cut();
      const started = Date.now();
      const traffic = load(base, 4, 200_000, send);
      const outage = new Promise((resolve) => setTimeout(resolve, OUTAGE_SECONDS * 1000));
      await Promise.race([outage, traffic.done]);
      traffic.stop();
      await traffic.done;
      const seconds = (Date.now() - started) / 1000;
      assert.ok(traffic.answers.length > 0 && traffic.answers.every((a) => a.status === 503), 'every request during the outage answers 503');

      await proxy.restore();
      await eventually(async () => (await send(agent)).status === 404, 'requests succeed once the database is back', 30_000);

      served.child.kill('SIGTERM');
      assert.equal(await within(30_000, served.exited, 'the process exits by itself'), 0);
      const lines = served.output.text().split('\n').filter(Boolean).map((line) => JSON.parse(line) as Record<string, unknown>);
      const loud = lines.filter((line) => (line.level as number) >= 50);
      const outageLines = lines.filter((line) => line.problem === 'service-unavailable');
      const warnings = lines.filter((line) => (line.level as number) >= 40);
      t.diagnostic(
        `${unavailable} requests answered 503 in a ${seconds.toFixed(1)} s outage; log lines: ${lines.length} in all, ` +
          `${warnings.length} at warn or above, ${loud.length} at error or above, ${outageLines.length} about the 503s; ` +
          `the others at warn: ${JSON.stringify(warnings.filter((line) => !outageLines.includes(line)).map((line) => line.msg))}`,
      );
      assert.deepEqual(loud.map((line) => line.msg), [], 'nothing at error level');
      assert.ok(warnings.every((line) => !/"stack"/.test(JSON.stringify(line)) || line === outageLines[0]), 'at most one stack');
      // One line when the outage starts, one per interval while it lasts, one at shutdown.
      assert.ok(outageLines.length >= 1 && outageLines.length <= 2 + Math.ceil(seconds / 10), `${outageLines.length} lines about the outage`);
      const counted = outageLines.reduce((sum, line) => sum + ((line.count as number | undefined) ?? 1), 0);
      assert.equal(counted, unavailable, 'every 503 is counted once');
    } finally {
      agent.destroy();
      await served?.kill();
      await proxy.close();
      await testDatabase.drop();
    }
  });
});
