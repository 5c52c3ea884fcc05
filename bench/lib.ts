/**
 * What bench/subscribe.ts and bench/auth.ts share: settings, child servers, load, the subscribe
 * traffic of a registered agent, scratch databases, the durability check, report helpers and the
 * clean-up that leaves nothing behind however a run ends.
 */
import { execFile, execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import autocannon from 'autocannon';
import SqliteDriver from 'better-sqlite3';
import pg from 'pg';
import { loadConfig } from '../src/config.ts';
import { LocalChangeBus } from '../src/core/changes/bus.ts';
import { Database } from '../src/core/db/database.ts';
import { MailOutboxRepository } from '../src/core/mail/outbox-repository.ts';
import { storeService } from '../src/stores/feature.ts';
import { STORE_DOMAINS } from '../src/platforms.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const HOST = '127.0.0.1';
export const SUBSCRIBE_PATH = '/api/v1/alerts/subscribe';
const READY_TIMEOUT_MS = 30_000;
/** Restock's own graceful shutdown waits up to 10 s for in-flight requests. */
const STOP_TIMEOUT_MS = 20_000;
/** Far above anything 50 connections reach in a minute, so no server ever answers 429. */
const UNREACHABLE_RATE_LIMIT = '1000000000';

// ---------------------------------------------------------------------------------------------
// Settings

export function fail(message: string): never {
  process.stderr.write(`bench: ${message}\n`);
  process.exit(2);
}

export function intSetting(name: string, fallback: number, min: number, max: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw.trim() === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min || value > max) {
    fail(`${name} must be an integer from ${min} to ${max}, got ${JSON.stringify(raw)}`);
  }
  return value;
}

/** The PostgreSQL server to make scratch databases on; loopback only, like everything here. */
export function pgSetting(): URL | undefined {
  const raw = process.env.BENCH_DATABASE_URL;
  if (raw === undefined || raw.trim() === '') return undefined;
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    fail('BENCH_DATABASE_URL: expected postgres://user@127.0.0.1:5432');
  }
  if (!/^postgres(ql)?:$/.test(url.protocol)) fail('BENCH_DATABASE_URL: expected a postgres:// URL');
  if (!['127.0.0.1', 'localhost', '[::1]'].includes(url.hostname)) fail('BENCH_DATABASE_URL: only a loopback host is allowed');
  return url;
}

// ---------------------------------------------------------------------------------------------
// Clean-up that also runs on Ctrl-C or when the watchdog fires

const children = new Set<ChildProcess>();
const tempDirs = new Set<string>();
/** Scratch database name -> the server it was made on. */
const scratchDatabases = new Map<string, URL>();
let watchdog: NodeJS.Timeout | undefined;

export function removeTempDir(dir: string): void {
  fs.rmSync(dir, { recursive: true, force: true });
  tempDirs.delete(dir);
}

async function emergencyCleanup(): Promise<void> {
  for (const child of children) child.kill('SIGKILL');
  for (const dir of tempDirs) removeTempDir(dir);
  for (const [name, admin] of scratchDatabases) await dropScratchDatabase(admin, name).catch(() => {});
}

/**
 * Kills the servers whatever ends this process, cleans up on SIGINT and SIGTERM, and gives up
 * (exit 1) after `limitMs`, so a hung server cannot keep a run going.
 */
export function guardProcess(limitMs: number): void {
  process.on('exit', () => {
    for (const child of children) child.kill('SIGKILL');
  });
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      process.stderr.write(`\nbench: ${signal}, cleaning up\n`);
      void emergencyCleanup().finally(() => process.exit(130));
    });
  }
  watchdog = setTimeout(() => {
    process.stderr.write(`bench: gave up after ${limitMs / 1000} s\n`);
    void emergencyCleanup().finally(() => process.exit(1));
  }, limitMs);
  watchdog.unref();
}

/** Exits with what `main` returns; a throw is reported and cleaned up after, exit 1. */
export function runMain(main: () => Promise<number>): void {
  main().then(
    (code) => {
      clearTimeout(watchdog);
      process.exit(code);
    },
    async (err: unknown) => {
      console.error(`bench: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
      await emergencyCleanup();
      process.exit(1);
    },
  );
}

// ---------------------------------------------------------------------------------------------
// Child processes

/** BENCH_PROFILE: a directory for V8 CPU profiles of the service, made if missing. */
export function profileSetting(): string | undefined {
  const raw = process.env.BENCH_PROFILE;
  if (raw === undefined || raw.trim() === '') return undefined;
  const dir = path.resolve(raw);
  fs.mkdirSync(dir, { recursive: true });
  return dir;
}

/** The databases a run covers: SQLite unless BENCH_SQLITE=0, PostgreSQL when BENCH_DATABASE_URL is set. */
export function dialectsSetting(pgAdmin: URL | undefined): Array<'sqlite' | 'postgres'> {
  const dialects: Array<'sqlite' | 'postgres'> = [...(process.env.BENCH_SQLITE === '0' ? [] : (['sqlite'] as const)), ...(pgAdmin ? (['postgres'] as const) : [])];
  if (dialects.length === 0) fail('nothing to run: BENCH_SQLITE=0 and BENCH_DATABASE_URL is unset');
  return dialects;
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.once('error', reject);
    server.listen(0, HOST, () => {
      const address = server.address();
      server.close(() => (address && typeof address === 'object' ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}

export interface Child {
  process: ChildProcess;
  name: string;
  /** The last 64 KiB of its stdout and stderr, shown when something goes wrong. */
  output(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** A child of the bench's own, killed with the bench however the run ends (`guardProcess`). */
export function killedOnExit(child: ChildProcess): void {
  children.add(child);
  child.once('exit', () => children.delete(child));
}

/** The last `limit` characters the child wrote to stdout and stderr, shown when something goes wrong. */
export function outputTail(child: ChildProcess, limit: number): () => string {
  let tail = '';
  const keep = (chunk: Buffer) => {
    tail = (tail + chunk.toString()).slice(-limit);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  return () => tail;
}

function startChild(name: string, args: string[], env: NodeJS.ProcessEnv): Child {
  const child = spawn(process.execPath, args, { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  killedOnExit(child);
  const output = outputTail(child, 65_536);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  return { process: child, name, output, exited };
}

async function waitReady(child: Child, url: string): Promise<void> {
  const deadline = Date.now() + READY_TIMEOUT_MS;
  let exited = false;
  void child.exited.then(() => (exited = true));
  while (Date.now() < deadline) {
    if (exited) throw new Error(`${child.name} exited before it was ready:\n${child.output()}`);
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(2000) });
      await res.arrayBuffer();
      if (res.status === 200) return;
    } catch {
      // not listening yet
    }
    await sleep(100);
  }
  throw new Error(`${child.name} was not ready at ${url} within ${READY_TIMEOUT_MS} ms:\n${child.output()}`);
}

/** SIGTERM, then waits for the exit; a child that does not go is killed and reported. */
export async function stopChild(child: Child): Promise<string | undefined> {
  child.process.kill('SIGTERM');
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), STOP_TIMEOUT_MS)));
  const outcome = await Promise.race([child.exited, timeout]);
  clearTimeout(timer);
  if (outcome === 'timeout') {
    child.process.kill('SIGKILL');
    await child.exited;
    return `${child.name} did not exit within ${STOP_TIMEOUT_MS} ms of SIGTERM and was killed`;
  }
  if (outcome.code !== 0) {
    return `${child.name} exited with ${outcome.code ?? outcome.signal} after SIGTERM:\n${child.output()}`;
  }
  return undefined;
}

/** A Node child on `port`, answering 200 at `readyPath`; stopped again when it never does. */
export async function startServer(name: string, args: string[], env: NodeJS.ProcessEnv, port: number, readyPath: string): Promise<Child> {
  const child = startChild(name, args, env);
  try {
    await waitReady(child, `${baseUrl(port)}${readyPath}`);
    return child;
  } catch (err) {
    await stopChild(child);
    throw err;
  }
}

export function baseUrl(port: number): string {
  return `http://${HOST}:${port}`;
}

/** The environment of a Restock server: embedded defaults except what the run sets. */
export function restockEnv(port: number, extra: Record<string, string>): NodeJS.ProcessEnv {
  return {
    ...process.env,
    // An empty variable means "use the default" to Restock, so these cannot leak in from the shell.
    DATABASE_URL: '',
    REDIS_URL: '',
    SMTP_URL: '',
    BASE_URL: '',
    SQLITE_SYNCHRONOUS: '',
    TLS_PORT: '',
    PORT: String(port),
    HOST,
    LOG_LEVEL: 'warn',
    // The benches measure the work of a request, not the limiter's refusals.
    RATE_LIMIT_ANONYMOUS_PER_MINUTE: UNREACHABLE_RATE_LIMIT,
    RATE_LIMIT_VERIFIED_EMAIL_PER_MINUTE: UNREACHABLE_RATE_LIMIT,
    RATE_LIMIT_ID_JAG_PER_MINUTE: UNREACHABLE_RATE_LIMIT,
    STOREFRONT_READ_LIMIT_PER_MINUTE: UNREACHABLE_RATE_LIMIT,
    PAYMENT_LIMIT_PER_MINUTE: UNREACHABLE_RATE_LIMIT,
    // Nor the free plan's monthly allowance (the fan-out sends far more for a store without a plan).
    FREE_ALERTS_PER_MONTH: '1000000000',
    ...extra,
  };
}

/** User + system CPU seconds a process has used so far, from /proc (Linux); undefined elsewhere. */
export function cpuSeconds(pid: number | undefined): number | undefined {
  if (pid === undefined || CLOCK_TICKS === undefined) return undefined;
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name, which is in parentheses and may hold spaces.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
  } catch {
    return undefined;
  }
}

const CLOCK_TICKS = (() => {
  if (process.platform !== 'linux') return undefined;
  try {
    const ticks = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim());
    return Number.isFinite(ticks) && ticks > 0 ? ticks : 100;
  } catch {
    return 100;
  }
})();

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

// ---------------------------------------------------------------------------------------------
// Load

export type Result = autocannon.Result;

export interface LoadOptions {
  connections: number;
  requests?: autocannon.Request[];
  /** Receives every response's latency (ms) when given. */
  latencies?: number[];
}

export function load(url: string, seconds: number, { connections, requests, latencies }: LoadOptions): Promise<Result> {
  return new Promise((resolve, reject) => {
    const job = autocannon(
      { url, connections, pipelining: 1, duration: seconds, timeout: 10, ...(requests ? { requests } : {}) },
      (err, result) => (err ? reject(err as Error) : resolve(result)),
    );
    if (latencies) job.on('response', (_client, _status, _bytes, responseTime) => latencies.push(responseTime));
  });
}

/** One measured load on a server process, with the server's CPU per answer. */
export interface LoadRow {
  label: string;
  result: Result;
  /** Server CPU (user + system) per answer while measured, in microseconds. */
  cpuUsPerRequest: number | undefined;
  problems: string[];
}

/** Everything but `expected` is a problem: another status, a socket error, a timeout. */
export function unexpectedAnswers(result: Result, expected: number): string[] {
  const problems: string[] = [];
  const others = [...codesOf(result)].filter(([code]) => code !== String(expected));
  if (others.length > 0) problems.push(`answers other than ${expected}: ${others.map(([code, n]) => `${code}x${n}`).join(', ')}`);
  if (result.errors > 0) problems.push(`${result.errors} errors (${result.timeouts} timeouts)`);
  return problems;
}

/**
 * Warms `url` up, then loads it for `duration` seconds, reading the server's CPU (`pid`) before
 * and after; any answer but `expected` is a problem of the row.
 */
export async function measureLoad(
  label: string,
  pid: number | undefined,
  url: string,
  expected: number,
  options: { warmup: number; duration: number; connections: number; requests?: autocannon.Request[] },
): Promise<LoadRow> {
  const { warmup, duration, connections, requests } = options;
  const problems: string[] = [];
  if (warmup > 0) {
    process.stdout.write(`  ${label}: warming up ${warmup} s ... `);
    const warm = await load(url, warmup, { connections, requests });
    problems.push(...unexpectedAnswers(warm, expected).map((p) => `warm-up: ${p}`));
    process.stdout.write(`${Math.round(warm.requests.average)} req/s\n`);
  }
  process.stdout.write(`  ${label}: measuring ${duration} s ... `);
  const cpuBefore = cpuSeconds(pid);
  const result = await load(url, duration, { connections, requests });
  const cpuAfter = cpuSeconds(pid);
  const answered = result['2xx'] + result.non2xx;
  const cpuUsPerRequest = cpuBefore !== undefined && cpuAfter !== undefined && answered > 0 ? ((cpuAfter - cpuBefore) * 1e6) / answered : undefined;
  process.stdout.write(`${Math.round(result.requests.average)} req/s\n`);
  problems.push(...unexpectedAnswers(result, expected));
  return { label, result, cpuUsPerRequest, problems };
}

/** What problemsOf needs of one run or of several added up. */
export interface Outcome {
  non2xx: number;
  statusCodes: Map<string, number>;
  errors: number;
  timeouts: number;
  mismatches: number;
}

export function outcomeOf(result: Result): Outcome {
  return { ...result, statusCodes: codesOf(result) };
}

export function codesOf(result: Result): Map<string, number> {
  return new Map(Object.entries(result.statusCodeStats ?? {}).map(([code, s]) => [code, s.count ?? 0]));
}

/** Socket errors, timeouts and non-2xx answers; all must be 0. */
export function problemsOf(r: Outcome): string[] {
  const out: string[] = [];
  if (r.non2xx > 0) {
    const codes = [...r.statusCodes].filter(([code]) => !code.startsWith('2')).map(([code, n]) => `${code}x${n}`);
    out.push(`${r.non2xx} non-2xx (${codes.join(', ')})`);
  }
  if (r.errors > 0) out.push(`${r.errors} errors (${r.timeouts} timeouts)`);
  if (r.mismatches > 0) out.push(`${r.mismatches} mismatched bodies`);
  return out;
}

// ---------------------------------------------------------------------------------------------
// The agent and its subscribe traffic

/**
 * An agent its store's owner claimed for the store, as a merchant's own agent is: an agent bound
 * to no store may hold only a few waiting subscriptions per store (the third-party cap), which a
 * load of new subscriptions reaches at once. The store is made as `restock store create` makes
 * it, and the claim code read from the outbox of the server's own database.
 */
async function registerBoundAgent(base: string, env: NodeJS.ProcessEnv): Promise<{ agentId: string; token: string }> {
  const domain = `bench-${randomBytes(4).toString('hex')}.myshopify.com`;
  const owner = `owner@${domain}`;
  const config = loadConfig(Object.fromEntries(Object.entries(env).filter((entry): entry is [string, string] => entry[1] !== undefined)));
  const database = Database.open(config.database);
  try {
    await storeService(config, database, new LocalChangeBus(), STORE_DOMAINS).createStore(domain, owner);
    const registered = await postJson(base, '/api/agent/register', { type: 'anonymous' }, 201);
    const claimToken = String(registered.claim_token);
    await postJson(base, '/api/agent/claim', { claim_token: claimToken, email: owner, store: domain }, 200);
    const mail = await new MailOutboxRepository(database).latestFor(owner, 'agent-claim-code');
    const otp = /code: (\d{6})/.exec(mail?.text ?? '')?.[1];
    if (!otp) throw new Error(`no claim code was mailed to ${owner}`);
    const claimed = await postJson(base, '/api/agent/claim', { claim_token: claimToken, otp }, 200);
    if (claimed.store !== domain || typeof claimed.credential !== 'string') throw new Error(`the claim did not bind the agent to ${domain}: ${JSON.stringify(claimed).slice(0, 300)}`);
    return { agentId: String(registered.registration_id), token: claimed.credential };
  } finally {
    await database.close();
  }
}

async function postJson(base: string, route: string, body: unknown, status: number): Promise<Record<string, unknown>> {
  const res = await fetch(`${base}${route}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body), signal: AbortSignal.timeout(5000) });
  const text = await res.text();
  if (res.status !== status) throw new Error(`${route} answered ${res.status}: ${text.slice(0, 300)}`);
  return JSON.parse(text) as Record<string, unknown>;
}

/**
 * The subscribe request as the agent: its bearer token and a fresh body with a unique e-mail each
 * time. It also keeps what the database check needs: how many requests were sent and the
 * subscription ids answered with 2xx.
 */
function subscribeTraffic(token: string) {
  const tag = randomBytes(4).toString('hex');
  const ledger = { sent: 0, answered: 0, ok: 0, unreadable: 0, ids: new Set<string>(), firstProblem: undefined as string | undefined };
  const requests: autocannon.Request[] = [
    {
      method: 'POST',
      path: SUBSCRIBE_PATH,
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      setupRequest: (request) => {
        ledger.sent++;
        return {
          ...request,
          body: JSON.stringify({
            productId: 'gid://shopify/Product/123',
            variantId: 'gid://shopify/ProductVariant/456',
            email: `b${tag}-${ledger.sent}@example.com`,
          }),
        };
      },
      onResponse: (status, body) => {
        ledger.answered++;
        if (status < 200 || status > 299) {
          ledger.firstProblem ??= `${status} ${body.slice(0, 300)}`;
          return;
        }
        ledger.ok++;
        try {
          const id = (JSON.parse(body) as { subscriptionId?: unknown }).subscriptionId;
          if (typeof id === 'string') ledger.ids.add(id);
          else ledger.unreadable++;
        } catch {
          ledger.unreadable++;
        }
      },
    },
  ];
  return { requests, ledger };
}

type Ledger = ReturnType<typeof subscribeTraffic>['ledger'];

export interface AgentServer {
  child: Child;
  base: string;
  agentId: string;
  requests: autocannon.Request[];
  ledger: Ledger;
}

/** A Restock server, ready, with a newly registered anonymous agent and that agent's traffic. */
export async function startAgentServer(name: string, args: string[], env: NodeJS.ProcessEnv, port: number): Promise<AgentServer> {
  const child = await startServer(name, args, env, port, '/api/health');
  const base = baseUrl(port);
  try {
    const agent = await registerBoundAgent(base, env);
    return { child, base, agentId: agent.agentId, ...subscribeTraffic(agent.token) };
  } catch (err) {
    await stopChild(child);
    throw err;
  }
}

// ---------------------------------------------------------------------------------------------
// Scratch databases

export interface Stored {
  id: string;
  agent_id: string | null;
}

/** A fresh database for one server: its settings, how to read what it stored, how to drop it. */
export interface ScratchDatabase {
  env: Record<string, string>;
  readRows: () => Promise<Stored[]>;
  drop: () => Promise<void>;
}

export function sqliteScratch(prefix: string, sync: 'FULL' | 'NORMAL'): ScratchDatabase {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), `${prefix}-`));
  tempDirs.add(dataDir);
  return {
    env: { DATA_DIR: dataDir, SQLITE_SYNCHRONOUS: sync },
    readRows: async () => {
      const driver = new SqliteDriver(path.join(dataDir, 'restock.db'));
      try {
        return driver.prepare('select id, agent_id from subscriptions').all() as Stored[];
      } finally {
        driver.close();
      }
    },
    drop: async () => removeTempDir(dataDir),
  };
}

export async function postgresScratch(admin: URL, prefix: string): Promise<ScratchDatabase> {
  const name = `${prefix}_${process.pid}_${randomBytes(4).toString('hex')}`;
  await pgQuery(admin, adminDatabase(admin), `create database ${name}`);
  scratchDatabases.set(name, admin);
  return {
    env: { DATABASE_URL: pgUrl(admin, name) },
    readRows: () => pgQuery<Stored>(admin, name, 'select id, agent_id from subscriptions'),
    drop: () => dropScratchDatabase(admin, name),
  };
}

function pgUrl(admin: URL, database: string): string {
  const url = new URL(admin.toString());
  url.pathname = `/${database}`;
  return url.toString();
}

async function pgQuery<T extends pg.QueryResultRow>(admin: URL, database: string, statement: string): Promise<T[]> {
  const client = new pg.Client({ connectionString: pgUrl(admin, database), connectionTimeoutMillis: 5000 });
  await client.connect();
  try {
    return (await client.query<T>(statement)).rows;
  } finally {
    await client.end();
  }
}

function adminDatabase(admin: URL): string {
  const name = admin.pathname.replace(/^\//, '');
  return name === '' ? 'postgres' : decodeURIComponent(name);
}

async function dropScratchDatabase(admin: URL, name: string): Promise<void> {
  // WITH (FORCE) (PostgreSQL 13+) also ends connections a killed server may have left behind.
  await pgQuery(admin, adminDatabase(admin), `drop database if exists ${name} with (force)`).catch(() =>
    pgQuery(admin, adminDatabase(admin), `drop database if exists ${name}`),
  );
  scratchDatabases.delete(name);
}

// ---------------------------------------------------------------------------------------------
// Checks

/**
 * The durability and ownership check of one server's run. Every subscription answered 2xx must
 * be stored, so the rows for acknowledged ids equal autocannon's 2xx count (`counted`, warm-up
 * included). The table may hold a few more: when a load phase ends, autocannon closes its sockets
 * with one request in flight on each, and the server still commits those; there can be at most as
 * many as were sent but never answered. Every row must belong to the agent that sent every
 * request.
 */
export function checkStored(label: string, server: AgentServer, counted: number, rows: Stored[]): { checks: string[]; problems: string[] } {
  const { ledger, agentId } = server;
  const stored = new Set(rows.map((r) => r.id));
  let acknowledged = 0;
  for (const id of ledger.ids) if (stored.has(id)) acknowledged++;
  const extra = stored.size - acknowledged;
  const unanswered = ledger.sent - ledger.answered;
  const foreign = rows.filter((r) => r.agent_id !== agentId).length;
  const problems: string[] = [];
  if (ledger.ok !== counted) problems.push(`the bench saw ${ledger.ok} 2xx answers but autocannon counted ${counted}`);
  if (ledger.unreadable > 0) problems.push(`${ledger.unreadable} 2xx answers without a subscriptionId`);
  if (ledger.ids.size !== ledger.ok) problems.push(`${ledger.ok - ledger.ids.size} 2xx answers repeated a subscription id`);
  if (acknowledged !== ledger.ids.size) problems.push(`LOST WRITES: ${ledger.ids.size - acknowledged} acknowledged subscriptions are not stored`);
  if (extra < 0 || extra > unanswered) problems.push(`${extra} unexplained rows (only ${unanswered} requests were unanswered)`);
  if (foreign > 0) problems.push(`${foreign} subscriptions are stored under another agent than ${agentId}`);
  const checks = [
    `${label}: ${stored.size} rows = ${acknowledged} of the ${counted} subscriptions answered 2xx ` +
      `+ ${extra} from the ${unanswered} requests cut off unanswered when a load phase ended`,
    problems.length === 0
      ? `${label}: OK, all ${acknowledged} acknowledged subscriptions stored, all rows owned by the registered agent`
      : `${label}: CHECK FAILED, see below`,
  ];
  if (ledger.firstProblem) checks.push(`${label}: first non-2xx answer: ${ledger.firstProblem}`);
  return { checks, problems };
}

// ---------------------------------------------------------------------------------------------
// Report

export function pad(value: string, width: number, right = false): string {
  return right ? value.padStart(width) : value.padEnd(width);
}

/** A fixed-width table: the header, a rule, then one line per row; numbers right-aligned. */
export function printTable(head: string[], widths: number[], lines: string[][]): void {
  const fmt = (cells: string[]) => cells.map((c, i) => pad(c, widths[i]!, i > 0)).join('  ');
  console.log('');
  console.log(fmt(head));
  console.log(widths.map((w) => '-'.repeat(w)).join('  '));
  for (const line of lines) console.log(fmt(line));
}

const CLI_TIMEOUT_MS = 60_000;
const execFileAsync = promisify(execFile);

/** Runs `restock <args>` (store create, migrate, ...) with the bench's environment; its output in the error when it fails. */
export async function restockCli(args: string[], env: NodeJS.ProcessEnv): Promise<void> {
  try {
    await execFileAsync(process.execPath, [path.join('bin', 'restock.js'), ...args], { cwd: ROOT, env, timeout: CLI_TIMEOUT_MS });
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string; message: string };
    throw new Error(`restock ${args.join(' ')} failed: ${e.message}\n${e.stdout ?? ''}${e.stderr ?? ''}`);
  }
}

/** A bare Fastify route (bench/bare-server.ts), the baseline every ratio is against. */
export async function startBareServer(): Promise<{ child: Child; url: string }> {
  const port = await freePort();
  const args = ['--import', 'tsx', path.join('bench', 'bare-server.ts')];
  const child = await startServer('bare fastify', args, { ...process.env, PORT: String(port), HOST }, port, '/');
  return { child, url: `${baseUrl(port)}/` };
}

/** The naive Express + better-sqlite3 subscribe endpoint (bench/express-peer.ts) on a scratch directory. */
export async function startExpressPeer(): Promise<{ child: Child; url: string; requests: autocannon.Request[]; dataDir: string }> {
  const port = await freePort();
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'restock-bench-peer-'));
  tempDirs.add(dataDir);
  const args = ['--import', 'tsx', path.join('bench', 'express-peer.ts')];
  const child = await startServer('naive express', args, { ...process.env, PORT: String(port), HOST, DATA_DIR: dataDir }, port, '/');
  return { child, url: `${baseUrl(port)}${SUBSCRIBE_PATH}`, requests: subscribeTraffic('').requests, dataDir };
}

export interface JsonAnswer {
  status: number;
  text: string;
  json: any;
}

/** One API request in a bench's set-up: JSON in (when a body is given) and out, an optional bearer token. */
export async function requestJson(base: string, method: string, route: string, body?: unknown, token?: string): Promise<JsonAnswer> {
  const res = await fetch(`${base}${route}`, {
    method,
    headers: { ...(body !== undefined && { 'content-type': 'application/json' }), ...(token && { authorization: `Bearer ${token}` }) },
    ...(body !== undefined && { body: JSON.stringify(body) }),
    signal: AbortSignal.timeout(30_000),
  });
  const text = await res.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, text, json };
}

/** The answer's JSON when its status is the one expected; otherwise the set-up stops, saying why. */
export function expectStatus(what: string, res: JsonAnswer, status: number): any {
  if (res.status !== status) throw new Error(`${what} answered ${res.status}, expected ${status}: ${res.text.slice(0, 500)}`);
  return res.json;
}

/** Over several rounds (the first row of each the baseline), the median ratio of each target to it. */
export function printMedianRatios(rounds: Array<Array<{ label: string; result: { requests: { average: number } } }>>): void {
  if (rounds.length < 2) return;
  console.log('');
  for (const label of rounds[0]!.slice(1).map((r) => r.label)) {
    const ratios = rounds.map((rows) => rows.find((r) => r.label === label)!.result.requests.average / rows[0]!.result.requests.average);
    console.log(`median ratio ${label} / bare over ${rounds.length} rounds = ${median(ratios).toFixed(2)} (${ratios.map((v) => v.toFixed(2)).join(', ')})`);
  }
}

export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

export function percentile(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

/** The commit measured, and whether the working tree differed from it. */
function revision(): string {
  try {
    return execFileSync('git', ['describe', '--always', '--dirty'], { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    return 'unknown revision';
  }
}

/** The first lines of every run: the machine as it was when the run started, and the commit. */
export function printSetting(): void {
  const cpus = os.cpus();
  console.log(
    `bench: node ${process.version}, ${os.availableParallelism()} CPUs (${cpus[0]?.model.trim() ?? 'unknown'}), ` +
      `load average ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}`,
  );
  console.log(`bench: Restock at ${revision()}`);
}

export function printChecks(checks: string[]): void {
  if (checks.length === 0) return;
  console.log('');
  for (const c of checks) console.log(c);
}

/** Any problem fails the run; they are listed last, where they are seen. */
export function exitCodeFor(problems: string[]): number {
  if (problems.length === 0) return 0;
  console.error('\nFAILED:');
  for (const p of problems) console.error(`  ${p}`);
  return 1;
}
