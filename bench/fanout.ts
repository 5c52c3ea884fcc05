/**
 * Alert fan-out: one restock of a variant 100,000 shoppers wait for, from the inventory report to
 * the last alert received by a real SMTP server, against plain pooled nodemailer (its sockets
 * without Nagle's delay, as the service's are) sending as many messages to the same server in the
 * same run. See docs/performance.md, "Alert fan-out".
 *
 *   npm run bench:fanout                          baseline, then Restock on SQLite (FULL)
 *   BENCH_COUNT=5000 npm run bench:fanout         a quick check
 *   BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432 npm run bench:fanout
 *                                                 also PostgreSQL, in a database made and dropped here
 *
 * Settings: BENCH_COUNT (subscribers and messages, default 100000), BENCH_ROUNDS (default 1;
 * baseline and services take turns, medians at the end), BENCH_SQLITE=0 (PostgreSQL only),
 * BENCH_TIMEOUT (seconds a delivery phase may take, default 1800), BENCH_PROFILE=<dir> (the
 * service writes V8 CPU profiles there), BENCH_JSON=1 (one machine-readable summary line).
 * SMTP_POOL_SIZE (default 5) and DISPATCH_CLAIM_SIZE (default 500) apply to both sides: the
 * pool's connections, and how many sendMail calls are outstanding at once.
 *
 * Processes, all on 127.0.0.1: the SMTP sink (bench/fanout-sink.ts, smtp-server draining and
 * counting each message), the baseline (bench/fanout-baseline.ts) and `restock serve` with its
 * dispatch worker inside, on a fresh database each time. For each service run the bench creates
 * the store with `restock store create`, claims a store-bound agent through the API (the claim
 * code is read at the sink), inserts the waiting subscriptions straight into the table in the
 * shape the API writes (the bound agent's, strictly increasing signup times), then reports the
 * variant back in stock through POST /api/v1/stores/:domain/inventory. The clock starts when
 * that request is sent and stops when the sink has received the last message. Afterwards the
 * ledger must hold one `sent` row per subscriber and every subscriber must have got exactly one
 * mail; anything else fails the run (exit 1).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import SqliteDriver from 'better-sqlite3';
import pg from 'pg';
import { newId } from '../src/core/ids.ts';
import type { BaselineEvent } from './fanout-baseline.ts';
import type { PhaseStats, SinkCommand, SinkEvent } from './fanout-sink.ts';
import { dialectsSetting, exitCodeFor, guardProcess, intSetting, pgSetting, profileSetting, runMain } from './lib.ts';
import { baseUrl, cpuSeconds, freePort, restockEnv, startServer, stopChild, type Child } from './lib.ts';
import { postgresScratch, sqliteScratch, type ScratchDatabase } from './lib.ts';
import { median, printChecks, printSetting, printTable, restockCli } from './lib.ts';
import { expectStatus, requestJson } from './lib.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

// ---------------------------------------------------------------------------------------------
// Settings

type Dialect = 'sqlite' | 'postgres';


const COUNT = intSetting('BENCH_COUNT', 100_000, 1, 2_000_000);
const ROUNDS = intSetting('BENCH_ROUNDS', 1, 1, 20);
const TIMEOUT_S = intSetting('BENCH_TIMEOUT', 1800, 10, 7200);
const POOL_SIZE = intSetting('SMTP_POOL_SIZE', 5, 1, 100);
const CLAIM_SIZE = intSetting('DISPATCH_CLAIM_SIZE', 500, 1, 5000);
const PG_ADMIN = pgSetting();
const PROFILE_DIR = profileSetting();
const DIALECTS: Dialect[] = dialectsSetting(PG_ADMIN);

/** No message for this long during a delivery phase: the phase is given up. */
const STALL_MS = 60_000;
/** After the last message, how long the ledger may take to record it. */
const LEDGER_TIMEOUT_MS = 60_000;
const MAIL_FROM = 'Restock <alerts@restock.localhost>';
const DOMAIN = 'fanout-bench.myshopify.com';
const OWNER = 'owner@fanout-bench.example';
const PRODUCT = {
  productId: 'gid://shopify/Product/9100',
  variantId: 'gid://shopify/ProductVariant/9101',
  productTitle: 'Fan-out Widget',
  variantTitle: 'Blue / M',
  productUrl: `https://${DOMAIN}/products/widget`,
  imageUrl: 'https://cdn.example.com/widget.png',
};
const SECRET = 'fanout-bench-secret-0123456789abcdef0123456789';
const TAG = randomBytes(3).toString('hex');

guardProcess(ROUNDS * (TIMEOUT_S * (1 + DIALECTS.length) + 180 * DIALECTS.length + 120) * 1000 + 60_000);

// ---------------------------------------------------------------------------------------------
// Child processes with an IPC channel (the sink and the baseline); killed however the run ends

const ipcChildren = new Set<ChildProcess>();
process.on('exit', () => {
  for (const child of ipcChildren) child.kill('SIGKILL');
});

interface IpcChild<E> {
  process: ChildProcess;
  name: string;
  output(): string;
  exited: Promise<void>;
  /** The next event that matches, or a rejection after `timeoutMs` or when the child exits. */
  next<T extends E>(match: (event: E) => event is T, timeoutMs: number, what: string): Promise<T>;
  on(listener: (event: E) => void): () => void;
}

function startIpcChild<E>(name: string, script: string, env: NodeJS.ProcessEnv, nodeArgs: string[] = []): IpcChild<E> {
  const child = spawn(process.execPath, ['--import', 'tsx', ...nodeArgs, script], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe', 'ipc'] });
  ipcChildren.add(child);
  let tail = '';
  const keep = (chunk: Buffer) => {
    tail = (tail + chunk.toString()).slice(-16_384);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  let gone = false;
  const exited = new Promise<void>((resolve) =>
    child.once('exit', () => {
      gone = true;
      ipcChildren.delete(child);
      resolve();
    }),
  );
  const on = (listener: (event: E) => void) => {
    child.on('message', listener as (message: unknown) => void);
    return () => void child.off('message', listener as (message: unknown) => void);
  };
  const next = <T extends E>(match: (event: E) => event is T, timeoutMs: number, what: string) =>
    new Promise<T>((resolve, reject) => {
      if (gone) return reject(new Error(`${name} has exited, no ${what}:\n${tail}`));
      const off = on((event) => {
        if (!match(event)) return;
        done();
        resolve(event);
      });
      const onExit = () => {
        done();
        reject(new Error(`${name} exited while waiting for ${what}:\n${tail}`));
      };
      const timer = setTimeout(() => {
        done();
        reject(new Error(`no ${what} from ${name} within ${timeoutMs} ms:\n${tail}`));
      }, timeoutMs);
      child.once('exit', onExit);
      function done() {
        clearTimeout(timer);
        off();
        child.off('exit', onExit);
      }
    });
  return { process: child, name, output: () => tail, exited, next, on };
}

async function stopIpcChild(child: IpcChild<unknown>): Promise<void> {
  if (child.process.exitCode !== null || child.process.signalCode !== null) return;
  if (child.process.connected) child.process.disconnect();
  const timer = setTimeout(() => child.process.kill('SIGKILL'), 5000);
  await child.exited;
  clearTimeout(timer);
}

const now = () => performance.timeOrigin + performance.now();

/** A process's resident set size now (VmRSS) or at its peak (VmHWM), in MB; undefined where /proc cannot tell. */
function rssMb(pid: number | undefined, field: 'VmRSS' | 'VmHWM'): number | undefined {
  if (pid === undefined) return undefined;
  try {
    const match = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    return match ? Number(match[1]) / 1024 : undefined;
  } catch {
    return undefined;
  }
}
const peakRssMb = (pid: number | undefined) => rssMb(pid, 'VmHWM');

/** Samples a process's RSS every 200 ms, so the report can say when the peak came. */
function sampleRss(pid: number | undefined) {
  const samples: Array<{ at: number; mb: number }> = [];
  const take = () => {
    const mb = rssMb(pid, 'VmRSS');
    if (mb !== undefined) samples.push({ at: now(), mb });
  };
  take();
  const timer = setInterval(take, 200);
  timer.unref();
  return {
    stop() {
      clearInterval(timer);
      take();
      return samples;
    },
  };
}

function rssStory(samples: Array<{ at: number; mb: number }>, start: number, firstAt: number | null): string {
  if (samples.length === 0) return 'n/a';
  const before = samples[0]!.mb;
  const peak = samples.reduce((a, b) => (b.mb > a.mb ? b : a));
  const atFirst = firstAt === null ? undefined : samples.find((s) => s.at >= firstAt);
  return (
    `${before.toFixed(0)} MB at the report, ${atFirst ? `${atFirst.mb.toFixed(0)} MB at the first alert, ` : ''}` +
    `highest sample ${peak.mb.toFixed(0)} MB at ${((peak.at - start) / 1000).toFixed(1)} s, ${samples[samples.length - 1]!.mb.toFixed(0)} MB at the end`
  );
}

// ---------------------------------------------------------------------------------------------
// The sink

type Sink = IpcChild<SinkEvent> & {
  url: string;
  command(command: SinkCommand): void;
  /** Waits until the phase's count has arrived; gives up on the deadline or a stall, with what came. */
  deliveries(phase: string, deadlineMs: number): Promise<{ stats: PhaseStats; complete: boolean }>;
};

async function startSink(): Promise<Sink> {
  const child = startIpcChild<SinkEvent>('SMTP sink', path.join('bench', 'fanout-sink.ts'), process.env);
  const ready = await child.next((e): e is Extract<SinkEvent, { type: 'ready' }> => e.type === 'ready', 30_000, 'ready');
  const command = (c: SinkCommand) => void child.process.send(c);
  return {
    ...child,
    url: `smtp://127.0.0.1:${ready.port}`,
    command,
    async deliveries(phase, deadlineMs) {
      let lastProgress = now();
      let lastCount = 0;
      const off = child.on((e) => {
        if (e.type === 'progress' && e.phase === phase && e.received !== lastCount) {
          lastCount = e.received;
          lastProgress = now();
        }
      });
      const complete = child.next((e): e is Extract<SinkEvent, { type: 'complete' }> => e.type === 'complete' && e.phase === phase, deadlineMs, 'complete');
      const stalled = new Promise<'stalled'>((resolve) => {
        const timer = setInterval(() => {
          if (now() - lastProgress > STALL_MS) {
            clearInterval(timer);
            resolve('stalled');
          }
        }, 1000);
        void complete.finally(() => clearInterval(timer)).catch(() => {});
      });
      try {
        const outcome = await Promise.race([complete.then((s) => ({ stats: s as PhaseStats })), stalled]);
        if (outcome !== 'stalled') return { stats: outcome.stats, complete: true };
      } catch {
        // the deadline: report what came
      } finally {
        off();
      }
      const reported = child.next((e): e is Extract<SinkEvent, { type: 'report' }> => e.type === 'report', 10_000, 'report');
      command({ type: 'report' });
      return { stats: await reported, complete: false };
    },
  };
}

// ---------------------------------------------------------------------------------------------
// One run: the baseline or the service

interface Row {
  label: string;
  dialect: Dialect | 'baseline';
  stats: PhaseStats;
  complete: boolean;
  /** From the start (the report request, or the go) to the last message, in seconds. */
  seconds: number;
  /** From the start to the first message. */
  firstSeconds: number | null;
  /** Messages received per second over `seconds`. */
  rate: number;
  cpuSeconds: number | undefined;
  sinkCpuSeconds: number | undefined;
  peakRssMb: number | undefined;
  /** Time to the answer of the inventory report (service only). */
  reportMs?: number;
  /** Times to 10%, 50%, 90% of the messages, seconds from the start. */
  quantiles: Array<number | null>;
  problems: string[];
  checks: string[];
}

function quantileTimes(stats: PhaseStats, start: number, bucketMs = 100): Array<number | null> {
  if (stats.firstAt === null) return [null, null, null];
  const offset = (stats.firstAt - start) / 1000;
  return [0.1, 0.5, 0.9].map((q) => {
    const goal = Math.ceil(q * COUNT);
    let sum = 0;
    for (let i = 0; i < stats.buckets.length; i++) {
      sum += stats.buckets[i]!;
      if (sum >= goal) return offset + ((i + 1) * bucketMs) / 1000;
    }
    return null;
  });
}

function rowOf(label: string, dialect: Row['dialect'], outcome: { stats: PhaseStats; complete: boolean }, start: number): Omit<Row, 'cpuSeconds' | 'sinkCpuSeconds' | 'peakRssMb'> {
  const { stats, complete } = outcome;
  const end = stats.lastAt ?? now();
  const seconds = (end - start) / 1000;
  const problems: string[] = [];
  if (!complete) problems.push(`only ${stats.received} of ${COUNT} messages arrived (deadline ${TIMEOUT_S} s, or nothing for ${STALL_MS / 1000} s)`);
  if (stats.duplicates > 0) problems.push(`DUPLICATES: ${stats.duplicates} messages went to a recipient that already had one`);
  if (stats.unexpected > 0) problems.push(`${stats.unexpected} messages to an unexpected recipient (first: ${stats.firstUnexpected})`);
  if (complete && stats.distinct !== COUNT) problems.push(`${COUNT - stats.distinct} of the ${COUNT} recipients got no mail`);
  return {
    label,
    dialect,
    stats,
    complete,
    seconds,
    firstSeconds: stats.firstAt === null ? null : (stats.firstAt - start) / 1000,
    rate: stats.received / seconds,
    quantiles: quantileTimes(stats, start),
    problems,
    checks: [`${label}: sink got ${stats.received} messages, ${stats.distinct} distinct recipients of ${COUNT}, ${stats.duplicates} duplicates, ${stats.unexpected} unexpected`],
  };
}

async function runBaseline(sink: Sink, round: number): Promise<Row> {
  const prefix = `base${round}-${TAG}-`;
  const url = new URL(sink.url);
  // What SmtpTransport gives the library for SMTP_URL (its default timeouts and the pool size).
  for (const [key, value] of Object.entries({ pool: 'true', connectionTimeout: '10000', greetingTimeout: '10000', socketTimeout: '30000', maxConnections: String(POOL_SIZE) })) {
    url.searchParams.set(key, value);
  }
  const child = startIpcChild<BaselineEvent>('baseline', path.join('bench', 'fanout-baseline.ts'), {
    ...process.env,
    FANOUT_SMTP_URL: url.toString(),
    FANOUT_COUNT: String(COUNT),
    FANOUT_PREFIX: prefix,
    FANOUT_WINDOW: String(CLAIM_SIZE),
    FANOUT_FROM: MAIL_FROM,
  });
  try {
    await child.next((e): e is Extract<BaselineEvent, { type: 'ready' }> => e.type === 'ready', 30_000, 'ready');
    sink.command({ type: 'expect', phase: `baseline ${round}`, prefix, count: COUNT });
    process.stdout.write(`  baseline: sending ${COUNT} messages ... `);
    const pid = child.process.pid;
    const cpu0 = cpuSeconds(pid);
    const sinkCpu0 = cpuSeconds(sink.process.pid);
    const start = now();
    child.process.send({ type: 'go' });
    const sent = child.next((e): e is Extract<BaselineEvent, { type: 'sent' }> => e.type === 'sent', TIMEOUT_S * 1000 + 30_000, 'the end of sending');
    sent.catch(() => {});
    const outcome = await sink.deliveries(`baseline ${round}`, TIMEOUT_S * 1000);
    const row = rowOf('baseline nodemailer', 'baseline', outcome, start);
    if (outcome.complete) {
      const result = await sent;
      if (result.failed > 0) row.problems.push(`${result.failed} sendMail calls failed (first: ${result.firstError})`);
    }
    const cpu1 = cpuSeconds(pid);
    const sinkCpu1 = cpuSeconds(sink.process.pid);
    process.stdout.write(`${Math.round(row.rate)} msgs/s\n`);
    return {
      ...row,
      cpuSeconds: cpu0 !== undefined && cpu1 !== undefined ? cpu1 - cpu0 : undefined,
      sinkCpuSeconds: sinkCpu0 !== undefined && sinkCpu1 !== undefined ? sinkCpu1 - sinkCpu0 : undefined,
      peakRssMb: peakRssMb(pid),
    };
  } finally {
    await stopIpcChild(child);
  }
}

// ---------------------------------------------------------------------------------------------
// The service's set-up: database, store, agent, subscribers

/** An anonymous agent the store's owner claims for the store, the code read at the sink. */
async function claimAgent(base: string, sink: Sink): Promise<{ agentId: string; token: string }> {
  const registered = expectStatus('agent registration', await requestJson(base, 'POST', '/api/agent/register', { type: 'anonymous' }), 201);
  sink.command({ type: 'expect', phase: 'claim', prefix: '\u0000', count: 1 });
  sink.command({ type: 'capture', address: OWNER });
  const captured = sink.next((e): e is Extract<SinkEvent, { type: 'captured' }> => e.type === 'captured' && e.address === OWNER, 30_000, 'the claim mail');
  captured.catch(() => {});
  expectStatus('claim code request', await requestJson(base, 'POST', '/api/agent/claim', { claim_token: registered.claim_token, email: OWNER, store: DOMAIN }), 200);
  const code = /code: (\d{6})/.exec((await captured).raw)?.[1];
  if (!code) throw new Error('no claim code in the claim mail');
  const claimed = expectStatus('claim', await requestJson(base, 'POST', '/api/agent/claim', { claim_token: registered.claim_token, otp: code }), 200);
  if (claimed.store !== DOMAIN) throw new Error(`the agent was bound to ${claimed.store}, not ${DOMAIN}`);
  return { agentId: registered.registration_id, token: claimed.credential };
}

/** `COUNT` active subscriptions to the variant, as the agent's subscribe requests would write them. */
interface Seeded {
  prefix: string;
  seconds: number;
}

function subscriptionRows(prefix: string, agentId: string) {
  const first = Date.now() - COUNT - 60_000;
  return Array.from({ length: COUNT }, (_, i) => {
    const at = new Date(first + i).toISOString();
    return {
      id: newId('sub'),
      product_id: PRODUCT.productId,
      variant_id: PRODUCT.variantId,
      email: `${prefix}${i}@example.com`,
      status: 'active',
      store_domain: DOMAIN,
      agent_id: agentId,
      created_at: at,
      updated_at: at,
    };
  });
}

interface DatabaseAccess {
  seed(prefix: string, agentId: string): Promise<Seeded>;
  /** The ledger as it stands: rows per status, distinct subscriptions sent, subscriptions notified, the restock. */
  ledger(): Promise<Ledger>;
  close(): Promise<void>;
}

interface Ledger {
  byStatus: Record<string, number>;
  distinctSent: number;
  notified: number;
  restock: { status: string; batches: number; planned: number } | undefined;
  /** Earliest and latest sent_at, ISO. */
  firstSentAt: string | null;
  lastSentAt: string | null;
}

const SEED_CHUNK = 5000;

function sqliteAccess(file: string): DatabaseAccess {
  const driver = new SqliteDriver(file, { timeout: 10_000 });
  return {
    async seed(prefix, agentId) {
      const start = now();
      const rows = subscriptionRows(prefix, agentId);
      const insert = driver.prepare(
        'insert into subscriptions (id, product_id, variant_id, email, status, store_domain, agent_id, created_at, updated_at) ' +
          'values (@id, @product_id, @variant_id, @email, @status, @store_domain, @agent_id, @created_at, @updated_at)',
      );
      const many = driver.transaction((chunk: typeof rows) => {
        for (const row of chunk) insert.run(row);
      });
      // Chunks, so the running service's worker never waits long for the write lock.
      for (let i = 0; i < rows.length; i += SEED_CHUNK) {
        many(rows.slice(i, i + SEED_CHUNK));
        await new Promise((resolve) => setImmediate(resolve));
      }
      return { prefix, seconds: (now() - start) / 1000 };
    },
    async ledger() {
      const byStatus = Object.fromEntries(
        (driver.prepare('select status, count(*) as n from notifications group by status').all() as Array<{ status: string; n: number }>).map((r) => [r.status, r.n]),
      );
      const sent = driver
        .prepare("select count(distinct subscription_id) as n, min(sent_at) as first, max(sent_at) as last from notifications where status = 'sent'")
        .get() as { n: number; first: string | null; last: string | null };
      const notified = (driver.prepare("select count(*) as n from subscriptions where status = 'notified'").get() as { n: number }).n;
      const restock = driver.prepare('select status, batches, planned from restocks').get() as Ledger['restock'];
      return { byStatus, distinctSent: sent.n, notified, restock, firstSentAt: sent.first, lastSentAt: sent.last };
    },
    async close() {
      driver.close();
    },
  };
}

function postgresAccess(url: string): DatabaseAccess {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5000 });
  const connected = client.connect();
  return {
    async seed(prefix, agentId) {
      await connected;
      const start = now();
      const rows = subscriptionRows(prefix, agentId);
      for (let i = 0; i < rows.length; i += SEED_CHUNK) {
        const chunk = rows.slice(i, i + SEED_CHUNK);
        await client.query(
          'insert into subscriptions (id, product_id, variant_id, email, status, store_domain, agent_id, created_at, updated_at) ' +
            "select unnest($1::text[]), $2, $3, unnest($4::text[]), 'active', $5, $6, unnest($7::timestamptz[]), unnest($7::timestamptz[])",
          [chunk.map((r) => r.id), PRODUCT.productId, PRODUCT.variantId, chunk.map((r) => r.email), DOMAIN, agentId, chunk.map((r) => r.created_at)],
        );
      }
      await client.query('analyze subscriptions');
      return { prefix, seconds: (now() - start) / 1000 };
    },
    async ledger() {
      await connected;
      const byStatus = Object.fromEntries(
        (await client.query<{ status: string; n: string }>('select status, count(*) as n from notifications group by status')).rows.map((r) => [r.status, Number(r.n)]),
      );
      const sent = (
        await client.query<{ n: string; first: Date | null; last: Date | null }>(
          "select count(distinct subscription_id) as n, min(sent_at) as first, max(sent_at) as last from notifications where status = 'sent'",
        )
      ).rows[0]!;
      const notified = Number((await client.query<{ n: string }>("select count(*) as n from subscriptions where status = 'notified'")).rows[0]!.n);
      const restock = (await client.query<{ status: string; batches: number; planned: number }>('select status, batches, planned from restocks')).rows[0];
      return {
        byStatus,
        distinctSent: Number(sent.n),
        notified,
        restock,
        firstSentAt: sent.first?.toISOString() ?? null,
        lastSentAt: sent.last?.toISOString() ?? null,
      };
    },
    async close() {
      await connected.catch(() => {});
      await client.end().catch(() => {});
    },
  };
}

/** Polls until every planned alert is settled (or the time is up); returns the last look. */
async function settledLedger(db: DatabaseAccess): Promise<{ ledger: Ledger; waitedMs: number }> {
  const start = now();
  for (;;) {
    const ledger = await db.ledger();
    const pending = (ledger.byStatus.queued ?? 0) + (ledger.byStatus.sending ?? 0);
    const settled = (ledger.byStatus.sent ?? 0) >= COUNT || (ledger.restock?.status !== 'dispatching' && pending === 0);
    if (settled || now() - start > LEDGER_TIMEOUT_MS) return { ledger, waitedMs: now() - start };
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

function ledgerProblems(ledger: Ledger): string[] {
  const problems: string[] = [];
  const total = Object.values(ledger.byStatus).reduce((a, b) => a + b, 0);
  const sent = ledger.byStatus.sent ?? 0;
  if (total !== COUNT) problems.push(`the ledger has ${total} rows, expected ${COUNT}`);
  if (sent !== COUNT) problems.push(`the ledger has ${sent} sent rows, expected ${COUNT} (${JSON.stringify(ledger.byStatus)})`);
  if (ledger.distinctSent !== sent) problems.push(`DUPLICATES in the ledger: ${sent} sent rows for ${ledger.distinctSent} subscriptions`);
  if (ledger.notified !== COUNT) problems.push(`${ledger.notified} subscriptions are notified, expected ${COUNT}`);
  if (ledger.restock?.status !== 'done') problems.push(`the restock is ${ledger.restock?.status ?? 'missing'}, expected done`);
  return problems;
}

async function runService(sink: Sink, dialect: Dialect, round: number): Promise<Row> {
  const label = `restock ${dialect}`;
  const scratch: ScratchDatabase = dialect === 'sqlite' ? sqliteScratch('restock-fanout', 'FULL') : await postgresScratch(PG_ADMIN!, 'restock_fanout');
  let service: Child | undefined;
  let db: DatabaseAccess | undefined;
  let result: Row | undefined;
  try {
    const port = await freePort();
    const env = restockEnv(port, {
      ...scratch.env,
      SMTP_URL: sink.url,
      SMTP_POOL_SIZE: String(POOL_SIZE),
      DISPATCH_CLAIM_SIZE: String(CLAIM_SIZE),
      FREQUENCY_CAP_MINUTES: '0',
      // One batch takes everyone (stock = subscribers, × the multiplier); no pause should there be more.
      BATCH_INTERVAL_SECONDS: '0',
      // The report wakes the in-process worker at once; a short poll only bounds a missed wake-up.
      DISPATCH_POLL_MS: '100',
      RESTOCK_SECRET: SECRET,
      LOG_LEVEL: 'warn',
    });
    process.stdout.write(`  ${label}: database, store, agent, ${COUNT} subscribers ... `);
    await restockCli(['migrate'], env);
    await restockCli(['store', 'create', DOMAIN, '--owner', OWNER], env);
    // One file per thread (the main thread's ends in .0.001.cpuprofile, or the lowest sequence).
    const profile = PROFILE_DIR ? ['--cpu-prof', `--cpu-prof-dir=${PROFILE_DIR}`] : [];
    service = await startServer(label, [...profile, path.join('bin', 'restock.js'), 'serve'], env, port, '/api/health');
    const base = baseUrl(port);
    const agent = await claimAgent(base, sink);
    db = dialect === 'sqlite' ? sqliteAccess(path.join(scratch.env.DATA_DIR!, 'restock.db')) : postgresAccess(scratch.env.DATABASE_URL!);
    const prefix = `fan${round}${dialect[0]}-${TAG}-`;
    const seeded = await db.seed(prefix, agent.agentId);
    process.stdout.write(`seeded in ${seeded.seconds.toFixed(1)} s\n`);

    const phase = `${label} ${round}`;
    sink.command({ type: 'expect', phase, prefix, count: COUNT });
    process.stdout.write(`  ${label}: restock reported, alerting ${COUNT} subscribers ... `);
    const pid = service.process.pid;
    const cpu0 = cpuSeconds(pid);
    const sinkCpu0 = cpuSeconds(sink.process.pid);
    const rssSampler = sampleRss(pid);
    const start = now();
    const reported = await requestJson(base, 'POST', `/api/v1/stores/${DOMAIN}/inventory`, { items: [{ ...PRODUCT, available: COUNT }] }, agent.token);
    const reportMs = now() - start;
    const items = expectStatus('inventory report', reported, 200).items as Array<{ restockId?: string }>;
    if (!items[0]?.restockId) throw new Error(`the report started no restock: ${reported.text.slice(0, 300)}`);
    const outcome = await sink.deliveries(phase, TIMEOUT_S * 1000);
    const cpu1 = cpuSeconds(pid);
    const sinkCpu1 = cpuSeconds(sink.process.pid);
    const rss = peakRssMb(pid);
    const rssSamples = rssSampler.stop();
    const row = rowOf(label, dialect, outcome, start);
    row.checks.push(`${label}: service RSS ${rssStory(rssSamples, start, outcome.stats.firstAt)}; peak (VmHWM) ${fmt(rss, 0)} MB`);
    process.stdout.write(`${Math.round(row.rate)} alerts/s\n`);

    const { ledger, waitedMs } = await settledLedger(db);
    row.problems.push(...ledgerProblems(ledger));
    row.checks.push(
      `${label}: ledger ${JSON.stringify(ledger.byStatus)}, ${ledger.distinctSent} distinct subscriptions sent, ${ledger.notified} notified, ` +
        `restock ${ledger.restock?.status} after ${ledger.restock?.batches} batch(es), settled ${(waitedMs / 1000).toFixed(1)} s after the last message ` +
        `(sent_at ${ledger.firstSentAt} .. ${ledger.lastSentAt})`,
    );
    result = {
      ...row,
      reportMs,
      cpuSeconds: cpu0 !== undefined && cpu1 !== undefined ? cpu1 - cpu0 : undefined,
      sinkCpuSeconds: sinkCpu0 !== undefined && sinkCpu1 !== undefined ? sinkCpu1 - sinkCpu0 : undefined,
      peakRssMb: rss,
    };
    return result;
  } finally {
    await db?.close();
    if (service) {
      const stopProblem = await stopChild(service);
      if (stopProblem) {
        if (result) result.problems.push(stopProblem);
        else console.error(`${label}: ${stopProblem}`);
      }
    }
    await scratch.drop();
  }
}

// ---------------------------------------------------------------------------------------------
// Report

const fmt = (value: number | null | undefined, digits: number) => (value === null || value === undefined || !Number.isFinite(value) ? 'n/a' : value.toFixed(digits));
const perMessageMs = (cpu: number | undefined, row: Row) => (cpu === undefined || row.stats.received === 0 ? undefined : (cpu * 1000) / row.stats.received);

function report(rows: Row[]): void {
  const baseline = rows[0]!.rate;
  printTable(
    ['run', 'messages', 'to last s', 'first s', '10/50/90% s', 'msgs/s', 'CPU ms/msg', 'sink ms/msg', 'peak RSS MB', 'ratio'],
    [20, 8, 9, 7, 17, 7, 10, 11, 11, 5],
    rows.map((r) => [
      r.label,
      String(r.stats.received),
      fmt(r.seconds, 1),
      fmt(r.firstSeconds, 2),
      r.quantiles.map((q) => fmt(q, 1)).join('/'),
      fmt(r.rate, 0),
      fmt(perMessageMs(r.cpuSeconds, r), 3),
      fmt(perMessageMs(r.sinkCpuSeconds, r), 3),
      fmt(r.peakRssMb, 0),
      (r.rate / baseline).toFixed(2),
    ]),
  );
  console.log('');
  for (const r of rows.slice(1)) {
    const ratio = r.rate / baseline;
    const aims = [
      `time to last ${r.seconds.toFixed(1)} s ${r.complete && r.seconds < 60 ? '<' : 'NOT <'} 60 s`,
      `ratio ${ratio.toFixed(2)} ${ratio >= 0.8 ? '>=' : 'NOT >='} 0.8`,
      `peak RSS ${fmt(r.peakRssMb, 0)} MB ${r.peakRssMb !== undefined && r.peakRssMb < 300 ? '<' : 'NOT <'} 300 MB`,
    ];
    console.log(`ratio ${r.label} / baseline = ${ratio.toFixed(2)} (inventory report answered in ${fmt(r.reportMs, 0)} ms); aim: ${aims.join(', ')}`);
  }
  printChecks(rows.flatMap((r) => r.checks));
}

// ---------------------------------------------------------------------------------------------

async function main(): Promise<number> {
  printSetting();
  console.log(
    `bench: ${COUNT} subscribers on one variant, SMTP pool of ${POOL_SIZE}, claim size / outstanding sends ${CLAIM_SIZE}, ` +
      `${ROUNDS} round${ROUNDS === 1 ? '' : 's'}, ${DIALECTS.join(' and ')}, 127.0.0.1`,
  );
  const sink = await startSink();
  const rounds: Row[][] = [];
  try {
    for (let round = 1; round <= ROUNDS; round++) {
      if (ROUNDS > 1) console.log(`\nround ${round} of ${ROUNDS}`);
      const rows: Row[] = [await runBaseline(sink, round)];
      for (const dialect of DIALECTS) rows.push(await runService(sink, dialect, round));
      rounds.push(rows);
      report(rows);
    }
  } finally {
    await stopIpcChild(sink);
  }

  if (ROUNDS > 1) {
    console.log('');
    const labels = rounds[0]!.map((r) => r.label);
    for (const label of labels) {
      const of = rounds.map((rows) => ({ row: rows.find((r) => r.label === label)!, base: rows[0]!.rate }));
      const ratios = of.map(({ row, base }) => row.rate / base);
      console.log(
        `median ${label}: ${median(of.map(({ row }) => row.rate)).toFixed(0)} msgs/s, ${median(of.map(({ row }) => row.seconds)).toFixed(1)} s to last` +
          (label.startsWith('baseline') ? '' : `, ratio ${median(ratios).toFixed(2)} (${ratios.map((v) => v.toFixed(2)).join(', ')})`),
      );
    }
  }

  const problems = rounds.flat().flatMap((r) => r.problems.map((p) => `${r.label}: ${p}`));
  if (process.env.BENCH_JSON === '1') {
    const summary = rounds.map((rows) =>
      rows.map((r) => ({
        label: r.label,
        received: r.stats.received,
        seconds: Number(r.seconds.toFixed(2)),
        firstSeconds: r.firstSeconds === null ? null : Number(r.firstSeconds.toFixed(2)),
        rate: Math.round(r.rate),
        cpuMsPerMessage: perMessageMs(r.cpuSeconds, r) === undefined ? null : Number(perMessageMs(r.cpuSeconds, r)!.toFixed(3)),
        peakRssMb: r.peakRssMb === undefined ? null : Math.round(r.peakRssMb),
        ratio: Number((r.rate / rows[0]!.rate).toFixed(3)),
      })),
    );
    console.log(`BENCH_JSON ${JSON.stringify({ count: COUNT, poolSize: POOL_SIZE, claimSize: CLAIM_SIZE, rounds: summary, failed: problems.length > 0 })}`);
  }
  return exitCodeFor(problems);
}

runMain(main);
