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
 * BENCH_JSON=1 (one machine-readable summary line), BENCH_PROFILE=<dir> (each Restock server writes
 * a V8 CPU profile there when it stops).
 *
 * Each server is a child process on 127.0.0.1 and a free port, started, warmed up, measured and
 * stopped (SIGTERM) one after the other. Every /api/v1 route needs an access token, so each
 * Restock server first registers an anonymous agent, and every request carries its credential:
 * the figures include the token check, as a real client's requests do. Rate limits are set out
 * of reach. The run fails (exit 1) on any non-2xx answer, socket error or timeout, and when a
 * subscription Restock acknowledged with a 2xx is not in the database afterwards or is stored
 * under another agent.
 */
import path from 'node:path';
import type autocannon from 'autocannon';
import { exitCodeFor, fail, guardProcess, intSetting, pgSetting, profileSetting, runMain } from './lib.ts';
import { freePort, restockEnv, startAgentServer, stopChild, type Child } from './lib.ts';
import { SUBSCRIBE_PATH, cpuSeconds, load, outcomeOf, problemsOf, type Result } from './lib.ts';
import { checkStored, postgresScratch, sqliteScratch, type ScratchDatabase } from './lib.ts';
import { median, printChecks, printSetting, printTable, removeTempDir, startBareServer, startExpressPeer } from './lib.ts';

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

const DURATION = intSetting('BENCH_DURATION', 10, 1, 600);
const WARMUP = intSetting('BENCH_WARMUP', 2, 0, 60);
const CONNECTIONS = intSetting('BENCH_CONNECTIONS', 50, 1, 1000);
const SYNC_MODES = syncSetting();
const PG_ADMIN = pgSetting();
const ROUNDS = intSetting('BENCH_ROUNDS', 1, 1, 20);
const PROFILE_DIR = profileSetting();
if (SYNC_MODES.length === 0 && !PG_ADMIN) fail('nothing to run: BENCH_SYNC is empty and BENCH_DATABASE_URL is unset');

const runsPlanned = ROUNDS * (1 + SYNC_MODES.length + (PG_ADMIN ? 1 : 0));
guardProcess(runsPlanned * (WARMUP + DURATION + 90) * 1000);

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

/** Warms up and measures a ready server, then stops it. */
async function measure(label: string, child: Child, url: string, requests?: autocannon.Request[]): Promise<Row> {
  const problems: string[] = [];
  try {
    let warmupOk = 0;
    if (WARMUP > 0) {
      process.stdout.write(`  ${label}: warming up ${WARMUP} s ... `);
      const warm = await load(url, WARMUP, { connections: CONNECTIONS, requests });
      warmupOk = warm['2xx'];
      problems.push(...problemsOf(outcomeOf(warm)).map((p) => `warm-up: ${p}`));
      process.stdout.write(`${Math.round(warm.requests.average)} req/s\n`);
    }
    process.stdout.write(`  ${label}: measuring ${DURATION} s ... `);
    const cpuBefore = cpuSeconds(child.process.pid);
    const result = await load(url, DURATION, { connections: CONNECTIONS, requests });
    const cpuAfter = cpuSeconds(child.process.pid);
    const answered = result['2xx'] + result.non2xx;
    const cpuUsPerRequest =
      cpuBefore !== undefined && cpuAfter !== undefined && answered > 0 ? ((cpuAfter - cpuBefore) * 1e6) / answered : undefined;
    process.stdout.write(`${Math.round(result.requests.average)} req/s\n`);
    problems.push(...problemsOf(outcomeOf(result)));
    return { label, result, cpuUsPerRequest, warmupOk, problems, checks: [] };
  } finally {
    const stopProblem = await stopChild(child);
    if (stopProblem) problems.push(stopProblem);
  }
}

async function bare(): Promise<Row> {
  const { child, url } = await startBareServer();
  return measure('bare GET /', child, url);
}

const NAIVE = 'naive express subscribe';

/** The naive peer: Express 5, one better-sqlite3 insert per request, no authentication. */
async function naivePeer(): Promise<Row> {
  const { child, url, requests, dataDir } = await startExpressPeer();
  try {
    return await measure(NAIVE, child, url, requests);
  } finally {
    removeTempDir(dataDir);
  }
}

/** Restock on a scratch database, loaded by a newly registered agent, then checked and dropped. */
async function restock(label: string, checkLabel: string, database: ScratchDatabase): Promise<Row> {
  try {
    const port = await freePort();
    const profile = PROFILE_DIR ? ['--cpu-prof', `--cpu-prof-dir=${PROFILE_DIR}`] : [];
    const server = await startAgentServer(label, [...profile, path.join('bin', 'restock.js'), 'serve'], restockEnv(port, database.env), port);
    const row = await measure(label, server.child, server.base + SUBSCRIBE_PATH, server.requests);
    const { checks, problems } = checkStored(checkLabel, server, row.warmupOk + row.result['2xx'], await database.readRows());
    row.checks.push(...checks);
    row.problems.push(...problems);
    return row;
  } finally {
    await database.drop();
  }
}

// ---------------------------------------------------------------------------------------------
// Report

function report(rows: Row[]): void {
  const baseline = rows[0]!.result.requests.average;
  printTable(
    ['server', 'req/s avg', 'p50 ms', 'p99 ms', '2xx', 'non-2xx', 'errors', 'CPU us/req', 'vs bare'],
    [22, 10, 7, 7, 9, 8, 7, 10, 8],
    rows.map((r) => [
      r.label,
      r.result.requests.average.toFixed(0),
      String(r.result.latency.p50),
      String(r.result.latency.p99),
      String(r.result['2xx']),
      String(r.result.non2xx),
      String(r.result.errors),
      r.cpuUsPerRequest === undefined ? 'n/a' : r.cpuUsPerRequest.toFixed(0),
      (r.result.requests.average / baseline).toFixed(2),
    ]),
  );
  console.log('');
  const naive = rows.find((r) => r.label === NAIVE)!.result.requests.average;
  for (const r of rows.slice(1)) {
    console.log(`ratio ${r.label} / bare = ${(r.result.requests.average / baseline).toFixed(2)}`);
  }
  for (const r of rows.filter((row) => row.label.startsWith('subscribe'))) {
    console.log(`ratio ${r.label} / ${NAIVE} = ${(r.result.requests.average / naive).toFixed(2)}`);
  }
  printChecks(rows.flatMap((r) => r.checks));
}

// ---------------------------------------------------------------------------------------------

async function round(): Promise<Row[]> {
  const rows: Row[] = [];
  rows.push(await bare());
  rows.push(await naivePeer());
  for (const sync of SYNC_MODES) rows.push(await restock(`subscribe sqlite ${sync}`, `sqlite ${sync}`, sqliteScratch('restock-bench', sync)));
  if (PG_ADMIN) rows.push(await restock('subscribe postgres', 'postgres', await postgresScratch(PG_ADMIN, 'restock_bench')));
  return rows;
}

async function main(): Promise<number> {
  printSetting();
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
    const naive = rows.find((r) => r.label === NAIVE)!.result.requests.average;
    for (const r of rows.slice(1)) ratios.set(`${r.label} / bare`, [...(ratios.get(`${r.label} / bare`) ?? []), r.result.requests.average / baseline]);
    for (const r of rows.filter((row) => row.label.startsWith('subscribe'))) {
      const key = `${r.label} / ${NAIVE}`;
      ratios.set(key, [...(ratios.get(key) ?? []), r.result.requests.average / naive]);
    }
  }
  if (ROUNDS > 1) {
    console.log('');
    for (const [label, values] of ratios) {
      console.log(`median ratio ${label} over ${values.length} rounds = ${median(values).toFixed(2)} (${values.map((v) => v.toFixed(2)).join(', ')})`);
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
  return exitCodeFor(problems);
}

runMain(main);
