/**
 * `restock serve` from start to ready, and its memory once idle: the compiled build (dist/, what
 * `npm start` runs) beside the same sources run through tsx, in one run. Each start is a fresh
 * process on a copy of one embedded SQLite database, migrated beforehand (a restart: a first start
 * also applies every migration, under SQLite's FULL sync), on a loopback port; "ready" is the
 * first 200 from GET /api/health. Idle RSS is read from /proc after the process has been ready for
 * IDLE_MS; then the time of its first 402 (GET /api without a token).
 *
 *   npm run bench:startup           (BENCH_STARTS=5 by default; builds dist/ first)
 *
 * BENCH_BASELINE=<another checkout, built> adds its `bin/restock.js serve` to the turns, on a
 * database its own build migrated: an earlier commit measured against this one on the same machine.
 */
import { execFileSync, spawn } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { freePort, intSetting, median } from './lib.ts';

const STARTS = intSetting('BENCH_STARTS', 5, 1, 50);
const IDLE_MS = 3_000;
const READY_WITHIN_MS = 30_000;
const root = new URL('..', import.meta.url).pathname;

interface Start {
  readyMs: number;
  idleRssMb: number;
  /** The first 402 (`GET /api` without a token), asked once idle: the payment SDKs load for it. */
  firstDemandMs: number;
}

function rssMb(pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8').split('\n').find((entry) => entry.startsWith('VmRSS:'));
  return Number(line?.split(/\s+/)[1] ?? 0) / 1024;
}

interface Kind {
  args: string[];
  /** The checkout it runs in. */
  cwd: string;
  /** A copy of its own migrated database is each start's. */
  migrated: string;
}

async function startOnce({ args, cwd, migrated }: Kind): Promise<Start> {
  const port = await freePort();
  const dataDir = mkdtempSync(join(tmpdir(), 'restock-startup-'));
  cpSync(migrated, dataDir, { recursive: true });
  const began = performance.now();
  const child = spawn(process.execPath, args, {
    cwd,
    env: { ...process.env, PORT: String(port), DATA_DIR: dataDir, DATABASE_URL: '', BASE_URL: `http://127.0.0.1:${port}`, LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  try {
    let readyMs = -1;
    while (performance.now() - began < READY_WITHIN_MS) {
      const ok = await fetch(`http://127.0.0.1:${port}/api/health`).then((res) => res.ok, () => false);
      if (ok) {
        readyMs = performance.now() - began;
        break;
      }
      await sleep(10);
    }
    if (readyMs < 0) throw new Error(`not ready within ${READY_WITHIN_MS} ms: ${args.join(' ')}`);
    await sleep(IDLE_MS);
    const idleRssMb = rssMb(child.pid!);
    const asked = performance.now();
    const demand = await fetch(`http://127.0.0.1:${port}/api`);
    await demand.arrayBuffer();
    if (demand.status !== 402) throw new Error(`GET /api answered ${demand.status}, not 402: ${args.join(' ')}`);
    return { readyMs, idleRssMb, firstDemandMs: performance.now() - asked };
  } finally {
    child.kill('SIGTERM');
    await new Promise((resolve) => child.once('exit', resolve));
    rmSync(dataDir, { recursive: true, force: true });
  }
}

// The build measured is the sources' as they are now.
execFileSync(process.execPath, ['bin/build.mjs'], { cwd: root, stdio: 'ignore' });
if (!existsSync(join(root, 'dist/main.js'))) throw new Error('the build made no dist/main.js');
/** A database migrated by the build in `checkout`, removed when the bench exits. */
function migratedBy(checkout: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'restock-startup-migrated-'));
  execFileSync(process.execPath, ['dist/main.js', 'migrate'], { cwd: checkout, env: { ...process.env, DATA_DIR: dir, DATABASE_URL: '' }, stdio: 'ignore' });
  process.on('exit', () => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

function baselineCheckout(): string | undefined {
  const dir = process.env.BENCH_BASELINE;
  if (!dir) return undefined;
  if (!existsSync(join(dir, 'bin/restock.js')) || !existsSync(join(dir, 'dist/main.js'))) throw new Error(`BENCH_BASELINE=${dir} is not a built checkout (bin/restock.js and dist/main.js)`);
  return dir;
}

const migrated = migratedBy(root);
const baseline = baselineCheckout();
// `compiled` is what `npm start` runs: bin/restock.js, which runs the fresh build in dist/.
const kinds: Record<string, Kind> = {
  compiled: { args: ['bin/restock.js', 'serve'], cwd: root, migrated },
  tsx: { args: ['--import', 'tsx', 'src/main.ts', 'serve'], cwd: root, migrated },
  ...(baseline && { baseline: { args: ['bin/restock.js', 'serve'], cwd: baseline, migrated: migratedBy(baseline) } }),
};
const results: Record<string, Start[]> = Object.fromEntries(Object.keys(kinds).map((kind) => [kind, []]));
// Interleaved, so all meet the same machine.
for (let i = 0; i < STARTS; i++) {
  for (const [kind, how] of Object.entries(kinds)) results[kind]!.push(await startOnce(how));
}
console.log(`restock serve, ${STARTS} starts each (median), SQLite, idle after ${IDLE_MS} ms`);
for (const [kind, starts] of Object.entries(results)) {
  console.log(
    `${kind.padEnd(9)} start to ready ${median(starts.map((s) => s.readyMs)).toFixed(0).padStart(5)} ms   idle RSS ${median(starts.map((s) => s.idleRssMb)).toFixed(0).padStart(4)} MB   first 402 ${median(starts.map((s) => s.firstDemandMs)).toFixed(0).padStart(5)} ms`,
  );
}
const readyOf = (kind: string) => median(results[kind]!.map((s) => s.readyMs));
console.log(`compiled starts ${(readyOf('tsx') / readyOf('compiled')).toFixed(2)}× as fast as tsx`);
if (baseline) console.log(`compiled starts ${(readyOf('baseline') / readyOf('compiled')).toFixed(2)}× as fast as the baseline (${baseline})`);
console.log('aims: ready within 1500 ms, idle under 150 MB');
