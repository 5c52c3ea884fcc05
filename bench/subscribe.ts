/**
 * Throughput of POST /api/v1/alerts/subscribe, as a ratio against a bare Fastify route loaded the
 * same way in the same run. See docs/performance.md.
 *
 *   npm run bench                                    bare, then Restock on SQLite (FULL)
 *   BENCH_SYNC=FULL,NORMAL npm run bench             also SQLITE_SYNCHRONOUS=NORMAL
 *   BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432 npm run bench
 *                                                    also PostgreSQL, in a database made and dropped here
 *
 * Settings: BENCH_DURATION (seconds measured per server, default 10), BENCH_WARMUP (seconds of
 * load before measuring, default 2), BENCH_CONNECTIONS (default 50), BENCH_SYNC (comma list of
 * FULL and NORMAL, default FULL; empty with BENCH_DATABASE_URL runs PostgreSQL only),
 * BENCH_ROUNDS (default 1: the whole sequence again, with the median ratio at the end),
 * BENCH_JSON=1 (one machine-readable summary line).
 *
 * Each server is a child process on 127.0.0.1 and a free port, started, warmed up, measured and
 * stopped (SIGTERM) one after the other. The run fails (exit 1) on any non-2xx answer, socket
 * error or timeout, and when a subscription Restock acknowledged with a 2xx is not in the
 * database afterwards.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import SqliteDriver from 'better-sqlite3';
import pg from 'pg';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const HOST = '127.0.0.1';
const SUBSCRIBE_PATH = '/api/v1/alerts/subscribe';
const READY_TIMEOUT_MS = 30_000;
/** Restock's own graceful shutdown waits up to 10 s for in-flight requests. */
const STOP_TIMEOUT_MS = 20_000;

// ---------------------------------------------------------------------------------------------
// Settings

function intSetting(name: string, fallback: number, min: number, max: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw.trim() === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min || value > max) {
    fail(`${name} must be an integer from ${min} to ${max}, got ${JSON.stringify(raw)}`);
  }
  return value;
}

function syncSetting(): Array<'FULL' | 'NORMAL'> {
  const raw = process.env.BENCH_SYNC;
  if (raw === undefined) return ['FULL'];
  const modes = raw
    .split(',')
    .map((m) => m.trim().toUpperCase())
    .filter(Boolean);
  for (const mode of modes) if (mode !== 'FULL' && mode !== 'NORMAL') fail(`BENCH_SYNC: expected FULL and/or NORMAL, got ${mode}`);
  return [...new Set(modes)] as Array<'FULL' | 'NORMAL'>;
}

/** The PostgreSQL server to make a scratch database on; loopback only, like everything here. */
function pgSetting(): URL | undefined {
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

function fail(message: string): never {
  process.stderr.write(`bench: ${message}\n`);
  process.exit(2);
}

const DURATION = intSetting('BENCH_DURATION', 10, 1, 600);
const WARMUP = intSetting('BENCH_WARMUP', 2, 0, 60);
const CONNECTIONS = intSetting('BENCH_CONNECTIONS', 50, 1, 1000);
const SYNC_MODES = syncSetting();
const PG_ADMIN = pgSetting();
const ROUNDS = intSetting('BENCH_ROUNDS', 1, 1, 20);
if (SYNC_MODES.length === 0 && !PG_ADMIN) fail('nothing to run: BENCH_SYNC is empty and BENCH_DATABASE_URL is unset');

// ---------------------------------------------------------------------------------------------
// Clean-up that also runs on Ctrl-C or when the watchdog fires

const children = new Set<ChildProcess>();
const tempDirs = new Set<string>();
const scratchDatabases = new Set<string>();

function removeTempDir(dir: string) {
  fs.rmSync(dir, { recursive: true, force: true });
  tempDirs.delete(dir);
}

async function emergencyCleanup(): Promise<void> {
  for (const child of children) child.kill('SIGKILL');
  for (const dir of tempDirs) removeTempDir(dir);
  for (const name of scratchDatabases) await dropDatabase(name).catch(() => {});
}

// Whatever ends this process, no server is left running behind it.
process.on('exit', () => {
  for (const child of children) child.kill('SIGKILL');
});

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    process.stderr.write(`\nbench: ${signal}, cleaning up\n`);
    void emergencyCleanup().finally(() => process.exit(130));
  });
}

const runsPlanned = ROUNDS * (1 + SYNC_MODES.length + (PG_ADMIN ? 1 : 0));
const WATCHDOG_MS = runsPlanned * (WARMUP + DURATION + 90) * 1000;
const watchdog = setTimeout(() => {
  process.stderr.write(`bench: gave up after ${WATCHDOG_MS / 1000} s\n`);
  void emergencyCleanup().finally(() => process.exit(1));
}, WATCHDOG_MS);
watchdog.unref();

// ---------------------------------------------------------------------------------------------
// Child processes

function freePort(): Promise<number> {
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

interface Child {
  process: ChildProcess;
  name: string;
  /** The last 64 KiB of its stdout and stderr, shown when something goes wrong. */
  output(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

function startChild(name: string, args: string[], env: NodeJS.ProcessEnv): Child {
  const child = spawn(process.execPath, args, { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(child);
  let tail = '';
  const keep = (chunk: Buffer) => {
    tail = (tail + chunk.toString()).slice(-65_536);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.once('exit', (code, signal) => {
      children.delete(child);
      resolve({ code, signal });
    });
  });
  return { process: child, name, output: () => tail, exited };
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
async function stopChild(child: Child): Promise<string | undefined> {
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

/** User + system CPU seconds a process has used so far, from /proc (Linux); undefined elsewhere. */
function cpuSeconds(pid: number | undefined): number | undefined {
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

type Result = autocannon.Result;

function load(url: string, seconds: number, requests?: autocannon.Request[]): Promise<Result> {
  return autocannon({
    url,
    connections: CONNECTIONS,
    pipelining: 1,
    duration: seconds,
    timeout: 10,
    ...(requests ? { requests } : {}),
  });
}

/** Socket errors, timeouts and non-2xx answers of a run; all must be 0. */
function problemsOf(result: Result): string[] {
  const out: string[] = [];
  if (result.non2xx > 0) {
    const codes = Object.entries(result.statusCodeStats ?? {})
      .filter(([code]) => !code.startsWith('2'))
      .map(([code, s]) => `${code}x${s.count ?? 0}`);
    out.push(`${result.non2xx} non-2xx (${codes.join(', ')})`);
  }
  if (result.errors > 0) out.push(`${result.errors} errors (${result.timeouts} timeouts)`);
  if (result.mismatches > 0) out.push(`${result.mismatches} mismatched bodies`);
  return out;
}

/**
 * The subscribe request: a fresh body with a unique e-mail each time. It also keeps what the
 * database check needs: how many requests were sent and the subscription ids answered with 2xx.
 */
function subscribeTraffic() {
  const tag = randomBytes(4).toString('hex');
  const ledger = { sent: 0, answered: 0, ok: 0, unreadable: 0, ids: new Set<string>(), firstProblem: undefined as string | undefined };
  const requests: autocannon.Request[] = [
    {
      method: 'POST',
      path: SUBSCRIBE_PATH,
      headers: { 'content-type': 'application/json' },
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

// ---------------------------------------------------------------------------------------------
// Targets

interface Row {
  label: string;
  result: Result;
  /** Server CPU (user + system) per answered request while measured, in microseconds. */
  cpuUsPerRequest: number | undefined;
  warmupOk: number;
  problems: string[];
  checks: string[];
}

async function measure(
  label: string,
  child: Child,
  port: number,
  readyPath: string,
  loadPath: string,
  requests?: autocannon.Request[],
): Promise<Row> {
  const base = `http://${HOST}:${port}`;
  const problems: string[] = [];
  try {
    await waitReady(child, base + readyPath);
    let warmupOk = 0;
    if (WARMUP > 0) {
      process.stdout.write(`  ${label}: warming up ${WARMUP} s ... `);
      const warm = await load(base + loadPath, WARMUP, requests);
      warmupOk = warm['2xx'];
      problems.push(...problemsOf(warm).map((p) => `warm-up: ${p}`));
      process.stdout.write(`${Math.round(warm.requests.average)} req/s\n`);
    }
    process.stdout.write(`  ${label}: measuring ${DURATION} s ... `);
    const cpuBefore = cpuSeconds(child.process.pid);
    const result = await load(base + loadPath, DURATION, requests);
    const cpuAfter = cpuSeconds(child.process.pid);
    const answered = result['2xx'] + result.non2xx;
    const cpuUsPerRequest =
      cpuBefore !== undefined && cpuAfter !== undefined && answered > 0 ? ((cpuAfter - cpuBefore) * 1e6) / answered : undefined;
    process.stdout.write(`${Math.round(result.requests.average)} req/s\n`);
    problems.push(...problemsOf(result));
    return { label, result, cpuUsPerRequest, warmupOk, problems, checks: [] };
  } finally {
    const stopProblem = await stopChild(child);
    if (stopProblem) problems.push(stopProblem);
  }
}

async function bare(): Promise<Row> {
  const port = await freePort();
  const child = startChild('bare fastify', ['--import', 'tsx', path.join('bench', 'bare-server.ts')], {
    ...process.env,
    PORT: String(port),
    HOST,
  });
  return measure('bare GET /', child, port, '/', '/');
}

/** The environment of a Restock child: embedded defaults except what the run sets. */
function restockEnv(port: number, extra: Record<string, string>): NodeJS.ProcessEnv {
  return {
    ...process.env,
    // An empty variable means "use the default" to Restock, so these cannot leak in from the shell.
    DATABASE_URL: '',
    REDIS_URL: '',
    SMTP_URL: '',
    BASE_URL: '',
    SQLITE_SYNCHRONOUS: '',
    PORT: String(port),
    HOST,
    LOG_LEVEL: 'warn',
    ...extra,
  };
}

/**
 * The durability check. Every subscription answered 2xx (warm-up and measured) must be stored,
 * so the rows for acknowledged ids equal autocannon's 2xx count. The table may hold a few more:
 * when a load phase ends, autocannon closes its sockets with one request in flight on each, and
 * the server still commits those; there can be at most as many as were sent but never answered.
 */
function checkRows(label: string, row: Row, ledger: Ledger, storedIds: string[]): void {
  const counted = row.warmupOk + row.result['2xx'];
  const stored = new Set(storedIds);
  let ackedStored = 0;
  for (const id of ledger.ids) if (stored.has(id)) ackedStored++;
  const extra = stored.size - ackedStored;
  const unanswered = ledger.sent - ledger.answered;
  row.checks.push(
    `${label}: ${stored.size} rows = ${ackedStored} of the ${counted} subscriptions answered 2xx ` +
      `+ ${extra} from the ${unanswered} requests cut off unanswered when autocannon stopped`,
  );
  const before = row.problems.length;
  if (ledger.ok !== counted) row.problems.push(`the bench saw ${ledger.ok} 2xx answers but autocannon counted ${counted}`);
  if (ledger.unreadable > 0) row.problems.push(`${ledger.unreadable} 2xx answers without a subscriptionId`);
  if (ledger.ids.size !== ledger.ok) row.problems.push(`${ledger.ok - ledger.ids.size} 2xx answers repeated a subscription id`);
  if (ackedStored !== ledger.ids.size) row.problems.push(`LOST WRITES: ${ledger.ids.size - ackedStored} acknowledged subscriptions are not stored`);
  if (extra < 0 || extra > unanswered) row.problems.push(`${extra} unexplained rows (only ${unanswered} requests were unanswered)`);
  row.checks.push(
    row.problems.length === before
      ? `${label}: OK, rows for acknowledged subscriptions (${ackedStored}) = 2xx answers (${counted}): nothing acknowledged was lost`
      : `${label}: CHECK FAILED, see below`,
  );
  if (ledger.firstProblem) row.checks.push(`${label}: first non-2xx answer: ${ledger.firstProblem}`);
}

async function restockSqlite(sync: 'FULL' | 'NORMAL'): Promise<Row> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'restock-bench-'));
  tempDirs.add(dataDir);
  try {
    const port = await freePort();
    const child = startChild(`restock sqlite ${sync}`, [path.join('bin', 'restock.js'), 'serve'], restockEnv(port, { DATA_DIR: dataDir, SQLITE_SYNCHRONOUS: sync }));
    const { requests, ledger } = subscribeTraffic();
    const row = await measure(`subscribe sqlite ${sync}`, child, port, '/api/health', SUBSCRIBE_PATH, requests);
    const driver = new SqliteDriver(path.join(dataDir, 'restock.db'));
    try {
      const ids = (driver.prepare('select id from subscriptions').all() as Array<{ id: string }>).map((r) => r.id);
      checkRows(`sqlite ${sync}`, row, ledger, ids);
    } finally {
      driver.close();
    }
    return row;
  } finally {
    removeTempDir(dataDir);
  }
}

function pgUrl(database: string): string {
  const url = new URL(PG_ADMIN!.toString());
  url.pathname = `/${database}`;
  return url.toString();
}

async function pgQuery<T extends pg.QueryResultRow>(database: string, statement: string): Promise<T[]> {
  const client = new pg.Client({ connectionString: pgUrl(database), connectionTimeoutMillis: 5000 });
  await client.connect();
  try {
    return (await client.query<T>(statement)).rows;
  } finally {
    await client.end();
  }
}

function adminDatabase(): string {
  const name = PG_ADMIN!.pathname.replace(/^\//, '');
  return name === '' ? 'postgres' : decodeURIComponent(name);
}

async function dropDatabase(name: string): Promise<void> {
  // WITH (FORCE) (PostgreSQL 13+) also ends connections a killed server may have left behind.
  await pgQuery(adminDatabase(), `drop database if exists ${name} with (force)`).catch(() =>
    pgQuery(adminDatabase(), `drop database if exists ${name}`),
  );
  scratchDatabases.delete(name);
}

async function restockPostgres(): Promise<Row> {
  const name = `restock_bench_${process.pid}_${randomBytes(4).toString('hex')}`;
  await pgQuery(adminDatabase(), `create database ${name}`);
  scratchDatabases.add(name);
  try {
    const port = await freePort();
    const child = startChild('restock postgres', [path.join('bin', 'restock.js'), 'serve'], restockEnv(port, { DATABASE_URL: pgUrl(name) }));
    const { requests, ledger } = subscribeTraffic();
    const row = await measure('subscribe postgres', child, port, '/api/health', SUBSCRIBE_PATH, requests);
    const ids = (await pgQuery<{ id: string }>(name, 'select id from subscriptions')).map((r) => r.id);
    checkRows('postgres', row, ledger, ids);
    return row;
  } finally {
    await dropDatabase(name);
  }
}

// ---------------------------------------------------------------------------------------------
// Report

function pad(value: string, width: number, right = false): string {
  return right ? value.padStart(width) : value.padEnd(width);
}

function report(rows: Row[]): void {
  const head = ['server', 'req/s avg', 'p50 ms', 'p99 ms', '2xx', 'non-2xx', 'errors', 'CPU us/req', 'vs bare'];
  const widths = [22, 10, 7, 7, 9, 8, 7, 10, 8];
  const baseline = rows[0]!.result.requests.average;
  const lines = rows.map((r) => [
    r.label,
    r.result.requests.average.toFixed(0),
    String(r.result.latency.p50),
    String(r.result.latency.p99),
    String(r.result['2xx']),
    String(r.result.non2xx),
    String(r.result.errors),
    r.cpuUsPerRequest === undefined ? 'n/a' : r.cpuUsPerRequest.toFixed(0),
    (r.result.requests.average / baseline).toFixed(2),
  ]);
  const fmt = (cells: string[]) => cells.map((c, i) => pad(c, widths[i]!, i > 0)).join('  ');
  console.log('');
  console.log(fmt(head));
  console.log(widths.map((w) => '-'.repeat(w)).join('  '));
  for (const line of lines) console.log(fmt(line));
  console.log('');
  for (const r of rows.slice(1)) {
    console.log(`ratio ${r.label} / bare = ${(r.result.requests.average / baseline).toFixed(2)}`);
  }
  const checks = rows.flatMap((r) => r.checks);
  if (checks.length > 0) {
    console.log('');
    for (const c of checks) console.log(c);
  }
}

// ---------------------------------------------------------------------------------------------

async function round(): Promise<Row[]> {
  const rows: Row[] = [];
  rows.push(await bare());
  for (const sync of SYNC_MODES) rows.push(await restockSqlite(sync));
  if (PG_ADMIN) rows.push(await restockPostgres());
  return rows;
}

/** The commit measured, and whether the working tree differed from it. */
function revision(): string {
  try {
    return execFileSync('git', ['describe', '--always', '--dirty'], { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    return 'unknown revision';
  }
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

async function main(): Promise<number> {
  const cpus = os.cpus();
  console.log(
    `bench: node ${process.version}, ${os.availableParallelism()} CPUs (${cpus[0]?.model.trim() ?? 'unknown'}), ` +
      `load average ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}`,
  );
  console.log(`bench: Restock at ${revision()}`);
  console.log(
    `bench: ${CONNECTIONS} connections, ${WARMUP} s warm-up + ${DURATION} s measured per server, ` +
      `${ROUNDS} round${ROUNDS === 1 ? '' : 's'}, 127.0.0.1`,
  );

  const rounds: Row[][] = [];
  for (let i = 1; i <= ROUNDS; i++) {
    if (ROUNDS > 1) console.log(`\nround ${i} of ${ROUNDS}`);
    const rows = await round();
    rounds.push(rows);
    report(rows);
  }

  const ratios = new Map<string, number[]>();
  for (const rows of rounds) {
    const baseline = rows[0]!.result.requests.average;
    for (const r of rows.slice(1)) ratios.set(r.label, [...(ratios.get(r.label) ?? []), r.result.requests.average / baseline]);
  }
  if (ROUNDS > 1) {
    console.log('');
    for (const [label, values] of ratios) {
      console.log(`median ratio ${label} / bare over ${values.length} rounds = ${median(values).toFixed(2)} (${values.map((v) => v.toFixed(2)).join(', ')})`);
    }
  }

  const problems = rounds.flat().flatMap((r) => r.problems.map((p) => `${r.label}: ${p}`));
  if (process.env.BENCH_JSON === '1') {
    const summary = rounds.map((rows) =>
      rows.map((r) => ({
        label: r.label,
        rps: Math.round(r.result.requests.average),
        p50: r.result.latency.p50,
        p99: r.result.latency.p99,
        ok: r.result['2xx'],
        cpuUsPerRequest: r.cpuUsPerRequest === undefined ? null : Math.round(r.cpuUsPerRequest),
        ratio: Number((r.result.requests.average / rows[0]!.result.requests.average).toFixed(3)),
      })),
    );
    console.log(`BENCH_JSON ${JSON.stringify({ connections: CONNECTIONS, duration: DURATION, rounds: summary, failed: problems.length > 0 })}`);
  }
  if (problems.length > 0) {
    console.error('\nFAILED:');
    for (const p of problems) console.error(`  ${p}`);
    return 1;
  }
  return 0;
}

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
