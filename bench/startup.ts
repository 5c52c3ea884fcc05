/**
 * `restock serve` from start to ready, and its memory once idle: the compiled build (dist/, what
 * `npm start` runs) beside the same sources run through tsx, in one run. Each start is a fresh
 * process on a copy of one embedded SQLite database, migrated beforehand (a restart: a first start
 * also applies every migration, under SQLite's FULL sync), on a loopback port; "ready" is the
 * first 200 from GET /api/health. Idle RSS is read from /proc after the process has been ready for
 * IDLE_MS.
 *
 *   npm run bench:startup           (BENCH_STARTS=5 by default; builds dist/ first)
 */
import { execFileSync, spawn } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { freePort, intSetting } from './lib.ts';

const STARTS = intSetting('BENCH_STARTS', 5, 1, 50);
const IDLE_MS = 3_000;
const READY_WITHIN_MS = 30_000;
const root = new URL('..', import.meta.url).pathname;

interface Start {
  readyMs: number;
  idleRssMb: number;
}

function rssMb(pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8').split('\n').find((entry) => entry.startsWith('VmRSS:'));
  return Number(line?.split(/\s+/)[1] ?? 0) / 1024;
}

async function startOnce(args: string[]): Promise<Start> {
  const port = await freePort();
  const dataDir = mkdtempSync(join(tmpdir(), 'restock-startup-'));
  cpSync(migrated, dataDir, { recursive: true });
  const began = performance.now();
  const child = spawn(process.execPath, args, {
    cwd: root,
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
    return { readyMs, idleRssMb: rssMb(child.pid!) };
  } finally {
    child.kill('SIGTERM');
    await new Promise((resolve) => child.once('exit', resolve));
    rmSync(dataDir, { recursive: true, force: true });
  }
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

// The build measured is the sources' as they are now.
execFileSync(process.execPath, ['bin/build.mjs'], { cwd: root, stdio: 'ignore' });
if (!existsSync(join(root, 'dist/main.js'))) throw new Error('the build made no dist/main.js');
const migrated = mkdtempSync(join(tmpdir(), 'restock-startup-migrated-'));
execFileSync(process.execPath, ['dist/main.js', 'migrate'], { cwd: root, env: { ...process.env, DATA_DIR: migrated, DATABASE_URL: '' }, stdio: 'ignore' });
process.on('exit', () => rmSync(migrated, { recursive: true, force: true }));
// `compiled` is what `npm start` runs: bin/restock.js, which runs the fresh build in dist/.
const kinds = { compiled: ['bin/restock.js', 'serve'], tsx: ['--import', 'tsx', 'src/main.ts', 'serve'] };
const results: Record<string, Start[]> = { compiled: [], tsx: [] };
// Interleaved, so both meet the same machine.
for (let i = 0; i < STARTS; i++) {
  for (const [kind, args] of Object.entries(kinds)) results[kind]!.push(await startOnce(args));
}
console.log(`restock serve, ${STARTS} starts each (median), SQLite, idle after ${IDLE_MS} ms`);
for (const [kind, starts] of Object.entries(results)) {
  console.log(`${kind.padEnd(9)} start to ready ${median(starts.map((s) => s.readyMs)).toFixed(0).padStart(5)} ms   idle RSS ${median(starts.map((s) => s.idleRssMb)).toFixed(0).padStart(4)} MB`);
}
const ratio = median(results.tsx!.map((s) => s.readyMs)) / median(results.compiled!.map((s) => s.readyMs));
console.log(`compiled starts ${ratio.toFixed(2)}× as fast as tsx`);
