/**
 * What authentication costs on the write path: POST /api/v1/alerts/subscribe with a registered
 * agent's bearer token, against the same requests to a server whose token check is switched off,
 * both loaded the same way in the same run. The figure is the ratio authenticated req/s divided
 * by unauthenticated req/s. See docs/performance.md.
 *
 *   npm run bench:auth                                  SQLite (embedded default, FULL)
 *   BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432 npm run bench:auth
 *                                                       also PostgreSQL, in databases made and dropped here
 *
 * The app has no switch for authentication, and this bench does not add one to src/. Both sides
 * run bench/auth-server.ts, which builds the app as `restock serve` does; on the baseline side it
 * replaces AgentService.prototype.authenticate so that only the first requests are checked and
 * every later one gets the same Caller back. Both sides send the same header, so the ratio
 * isolates what `authenticate` does per request (the verified-token lookup and the one SQL
 * query for the agent's state and the token's revocation) and nothing else. Per-credential
 * rate-limit counting stays on both sides, keyed by the same kind of Caller, with a limit far
 * above what the run can reach: it is part of neither side's difference.
 *
 * Settings: BENCH_DURATION (seconds measured per side, default 10), BENCH_SLICE (seconds per
 * turn, default 1), BENCH_WARMUP (seconds per side, default 2), BENCH_CONNECTIONS (default 50),
 * BENCH_ROUNDS (default 3; the median ratio is the result), BENCH_SQLITE=0 (PostgreSQL only),
 * BENCH_PROFILE=<dir> (each server writes V8 CPU profiles there, startup and warm-up included),
 * BENCH_JSON=1 (one machine-readable summary line).
 *
 * Each side gets a fresh database and a newly registered agent, so both insert into tables of
 * the same size. Both servers run at once and take the load in turns (see measurePair). The run
 * fails (exit 1) on any non-2xx answer, socket error or timeout, and when a subscription
 * acknowledged with a 2xx is not in the database afterwards, or is stored under another agent
 * than the one registered.
 */
import path from 'node:path';
import { dialectsSetting, exitCodeFor, guardProcess, intSetting, pgSetting, profileSetting, runMain } from './lib.ts';
import { freePort, restockEnv, startAgentServer, stopChild, type AgentServer } from './lib.ts';
import { SUBSCRIBE_PATH, codesOf, cpuSeconds, load, outcomeOf, problemsOf, type Outcome } from './lib.ts';
import { checkStored, postgresScratch, sqliteScratch, type ScratchDatabase } from './lib.ts';
import { median, percentile, printChecks, printSetting, printTable } from './lib.ts';

type Side = 'token' | 'fixed';
type Dialect = 'sqlite' | 'postgres';
const SIDE_LABEL: Record<Side, string> = { token: 'authenticated', fixed: 'auth off' };

// ---------------------------------------------------------------------------------------------
// Settings


const DURATION = intSetting('BENCH_DURATION', 10, 1, 600);
const WARMUP = intSetting('BENCH_WARMUP', 2, 0, 60);
const CONNECTIONS = intSetting('BENCH_CONNECTIONS', 50, 1, 1000);
const SLICE = intSetting('BENCH_SLICE', 1, 1, 600);
const ROUNDS = intSetting('BENCH_ROUNDS', 3, 1, 20);
const PG_ADMIN = pgSetting();
const PROFILE_DIR = profileSetting();
const DIALECTS: Dialect[] = dialectsSetting(PG_ADMIN);

const sidesPlanned = ROUNDS * DIALECTS.length * 2;
guardProcess(sidesPlanned * (WARMUP + DURATION + 60) * 1000);

// ---------------------------------------------------------------------------------------------
// The two sides of one dialect: servers, agents, warm-up, interleaved slices, checks

/** What one side's measured slices add up to. */
interface Row extends Outcome {
  dialect: Dialect;
  side: Side;
  label: string;
  ok: number;
  slices: number;
  seconds: number;
  /** Server CPU (user + system) while measured, undefined where /proc cannot tell. */
  cpuSeconds: number | undefined;
  latencies: number[];
  warmupOk: number;
  problems: string[];
  checks: string[];
}

const rps = (row: Row) => row.ok / row.seconds;
const cpuUsPerRequest = (row: Row) => (row.cpuSeconds === undefined || row.ok + row.non2xx === 0 ? undefined : (row.cpuSeconds * 1e6) / (row.ok + row.non2xx));

const latencyCache = new WeakMap<Row, { p50: number; p99: number }>();

/** Over every answer of the side's slices, not an average of per-slice percentiles. */
function latencyOf(row: Row): { p50: number; p99: number } {
  let latency = latencyCache.get(row);
  if (!latency) {
    const sorted = Float64Array.from(row.latencies).sort();
    latency = { p50: percentile(sorted, 50), p99: percentile(sorted, 99) };
    latencyCache.set(row, latency);
  }
  return latency;
}

interface Running extends AgentServer {
  row: Row;
  readRows: ScratchDatabase['readRows'];
}

function serverArgs(label: string): string[] {
  // A directory per server, and Node's own file names: the module loader runs on a thread of its
  // own that writes a profile too, and one fixed name would let it overwrite the main thread's.
  const profile = PROFILE_DIR
    ? ['--cpu-prof', `--cpu-prof-dir=${path.join(PROFILE_DIR, `${label.replace(/[^a-z0-9]+/gi, '-')}-${Date.now()}`)}`]
    : [];
  return [...profile, '--import', 'tsx', path.join('bench', 'auth-server.ts')];
}

/** A fresh database for one side, so both sides insert into tables of the same size. */
async function scratchDatabase(dialect: Dialect): Promise<ScratchDatabase> {
  return dialect === 'sqlite' ? sqliteScratch('restock-bench-auth', 'FULL') : postgresScratch(PG_ADMIN!, 'restock_bench_auth');
}

function emptyRow(dialect: Dialect, side: Side, label: string): Row {
  return {
    dialect,
    side,
    label,
    ok: 0,
    non2xx: 0,
    statusCodes: new Map(),
    errors: 0,
    timeouts: 0,
    mismatches: 0,
    slices: 0,
    seconds: 0,
    cpuSeconds: 0,
    latencies: [],
    warmupOk: 0,
    problems: [],
    checks: [],
  };
}

async function startSide(dialect: Dialect, side: Side, database: ScratchDatabase): Promise<Running> {
  const label = `${dialect} ${SIDE_LABEL[side]}`;
  const port = await freePort();
  // The same environment on both sides but for the mode auth-server.ts reads.
  const env = restockEnv(port, { ...database.env, BENCH_AUTH: side });
  const server = await startAgentServer(label, serverArgs(label), env, port);
  return { ...server, row: emptyRow(dialect, side, label), readRows: database.readRows };
}

async function warmUp(s: Running): Promise<void> {
  process.stdout.write(`  ${s.row.label}: warming up ${WARMUP} s ... `);
  const warm = await load(s.base + SUBSCRIBE_PATH, WARMUP, { connections: CONNECTIONS, requests: s.requests });
  s.row.warmupOk = warm['2xx'];
  s.row.problems.push(...problemsOf(outcomeOf(warm)).map((p) => `warm-up: ${p}`));
  process.stdout.write(`${Math.round(warm.requests.average)} req/s\n`);
}

async function slice(s: Running): Promise<void> {
  const before = cpuSeconds(s.child.process.pid);
  const result = await load(s.base + SUBSCRIBE_PATH, SLICE, { connections: CONNECTIONS, requests: s.requests, latencies: s.row.latencies });
  const after = cpuSeconds(s.child.process.pid);
  const row = s.row;
  row.slices++;
  row.seconds += result.duration;
  row.ok += result['2xx'];
  row.non2xx += result.non2xx;
  for (const [code, n] of codesOf(result)) row.statusCodes.set(code, (row.statusCodes.get(code) ?? 0) + n);
  row.errors += result.errors;
  row.timeouts += result.timeouts;
  row.mismatches += result.mismatches;
  row.cpuSeconds = before === undefined || after === undefined || row.cpuSeconds === undefined ? undefined : row.cpuSeconds + (after - before);
}

/**
 * Both sides of one dialect, alive at the same time and measured in turns of SLICE seconds, in
 * the order A B B A A B B A ...: a machine whose load changes during the run (other jobs on a
 * shared VM moved throughput by a factor of 3 within a minute here) then weighs on both sides
 * alike, which one long measurement after the other does not.
 */
async function measurePair(dialect: Dialect, first: Side): Promise<Row[]> {
  const order: Side[] = first === 'token' ? ['token', 'fixed'] : ['fixed', 'token'];
  const databases: ScratchDatabase[] = [];
  const sides: Running[] = [];
  try {
    for (const side of order) {
      const database = await scratchDatabase(dialect);
      databases.push(database);
      sides.push(await startSide(dialect, side, database));
    }
    if (WARMUP > 0) for (const s of sides) await warmUp(s);
    const turns = Math.ceil(DURATION / SLICE) * 2;
    process.stdout.write(`  ${dialect}: measuring ${turns} slices of ${SLICE} s, alternating ... `);
    for (let turn = 0; turn < turns; turn++) await slice(sides[turn % 4 === 0 || turn % 4 === 3 ? 0 : 1]!);
    process.stdout.write(sides.map((s) => `${SIDE_LABEL[s.row.side]} ${Math.round(rps(s.row))} req/s`).join(', ') + '\n');
    for (const s of sides) s.row.problems.push(...problemsOf(s.row));
  } finally {
    for (const s of sides) {
      const stopProblem = await stopChild(s.child);
      if (stopProblem) s.row.problems.push(stopProblem);
    }
    if (sides.length === order.length) {
      for (const s of sides) {
        const { checks, problems } = checkStored(s.row.label, s, s.row.warmupOk + s.row.ok, await s.readRows());
        s.row.checks.push(...checks);
        s.row.problems.push(...problems);
      }
    }
    for (const database of databases) await database.drop();
  }
  return sides.map((s) => s.row).sort((a, b) => (a.side === b.side ? 0 : a.side === 'token' ? -1 : 1));
}

function ratioOf(rows: Row[], dialect: Dialect): number | undefined {
  const token = rows.find((r) => r.dialect === dialect && r.side === 'token');
  const fixed = rows.find((r) => r.dialect === dialect && r.side === 'fixed');
  if (!token || !fixed) return undefined;
  return rps(token) / rps(fixed);
}

function report(rows: Row[]): void {
  printTable(
    ['server', 'req/s', 'p50 ms', 'p99 ms', '2xx', 'non-2xx', 'errors', 'CPU us/req'],
    [24, 8, 7, 7, 9, 8, 7, 10],
    rows.map((r) => {
      const { p50, p99 } = latencyOf(r);
      const cpu = cpuUsPerRequest(r);
      return [
        r.label,
        rps(r).toFixed(0),
        p50.toFixed(1),
        p99.toFixed(1),
        String(r.ok),
        String(r.non2xx),
        String(r.errors),
        cpu === undefined ? 'n/a' : cpu.toFixed(0),
      ];
    }),
  );
  console.log('');
  for (const dialect of DIALECTS) {
    const ratio = ratioOf(rows, dialect);
    if (ratio !== undefined) console.log(`ratio ${dialect} authenticated / auth off = ${ratio.toFixed(2)}`);
  }
  printChecks(rows.flatMap((r) => r.checks));
}

// ---------------------------------------------------------------------------------------------

async function round(index: number): Promise<Row[]> {
  const first: Side = index % 2 === 1 ? 'token' : 'fixed';
  const rows: Row[] = [];
  for (const dialect of DIALECTS) rows.push(...(await measurePair(dialect, first)));
  return rows;
}

function summarise(rounds: Row[][]) {
  return DIALECTS.map((dialect) => {
    const side = (s: Side) => {
      const rows = rounds.flat().filter((r) => r.dialect === dialect && r.side === s);
      const cpu = rows.map(cpuUsPerRequest).filter((v): v is number => v !== undefined);
      return {
        rps: median(rows.map(rps)),
        p50: median(rows.map((r) => latencyOf(r).p50)),
        p99: median(rows.map((r) => latencyOf(r).p99)),
        cpuUsPerRequest: cpu.length > 0 ? median(cpu) : undefined,
      };
    };
    const ratios = rounds.map((rows) => ratioOf(rows, dialect)).filter((v): v is number => v !== undefined);
    return { dialect, ratio: median(ratios), ratios, token: side('token'), fixed: side('fixed') };
  });
}

async function main(): Promise<number> {
  printSetting();
  console.log(
    `bench: subscribeAlert authenticated vs auth off, ${DIALECTS.join(' and ')}, ${CONNECTIONS} connections, ` +
      `${WARMUP} s warm-up + ${DURATION} s measured per server in ${SLICE} s slices, ${ROUNDS} round${ROUNDS === 1 ? '' : 's'}, 127.0.0.1` +
      (PROFILE_DIR ? `, CPU profiles in ${PROFILE_DIR}` : ''),
  );

  const rounds: Row[][] = [];
  for (let i = 1; i <= ROUNDS; i++) {
    if (ROUNDS > 1) console.log(`\nround ${i} of ${ROUNDS}`);
    const rows = await round(i);
    rounds.push(rows);
    report(rows);
  }

  const summary = summarise(rounds);
  console.log(`\nmedians over ${ROUNDS} round${ROUNDS === 1 ? '' : 's'} (authenticated vs auth off):`);
  const cpu = (v: number | undefined) => (v === undefined ? 'n/a' : `${v.toFixed(0)} us`);
  for (const s of summary) {
    console.log(
      `  ${s.dialect}: ratio ${s.ratio.toFixed(2)} (${s.ratios.map((v) => v.toFixed(2)).join(', ')}); ` +
        `req/s ${s.token.rps.toFixed(0)} vs ${s.fixed.rps.toFixed(0)}; p99 ${s.token.p99.toFixed(1)} vs ${s.fixed.p99.toFixed(1)} ms; ` +
        `CPU/req ${cpu(s.token.cpuUsPerRequest)} vs ${cpu(s.fixed.cpuUsPerRequest)}`,
    );
  }

  const problems = rounds.flat().flatMap((r) => r.problems.map((p) => `${r.label}: ${p}`));
  if (process.env.BENCH_JSON === '1') {
    const perRound = rounds.map((rows) =>
      rows.map((r) => {
        const cpuUs = cpuUsPerRequest(r);
        const { p50, p99 } = latencyOf(r);
        return {
          label: r.label,
          rps: Math.round(rps(r)),
          p50: Number(p50.toFixed(1)),
          p99: Number(p99.toFixed(1)),
          ok: r.ok,
          cpuUsPerRequest: cpuUs === undefined ? null : Math.round(cpuUs),
        };
      }),
    );
    console.log(
      `BENCH_JSON ${JSON.stringify({ connections: CONNECTIONS, duration: DURATION, slice: SLICE, rounds: perRound, summary, failed: problems.length > 0 })}`,
    );
  }
  return exitCodeFor(problems);
}

runMain(main);
