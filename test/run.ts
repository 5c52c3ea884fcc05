/**
 * The test command. Node 20's test runner has no global set-up, so this does it: checks that
 * PostgreSQL and Redis are there (a loud skip when they are not, a failure when
 * RESTOCK_REQUIRE_SERVICES=1 as in CI), migrates one template per dialect (a PostgreSQL database
 * each test file clones, a SQLite file each copies), runs the test files in groups, a process per
 * group, and drops what it made.
 *
 *   npm test                                   every test, on SQLite and PostgreSQL
 *   RESTOCK_TEST_DIALECTS=sqlite npm test      narrow to one dialect (refused under RESTOCK_REQUIRE_SERVICES=1)
 *   npm test -- test/alerts.test.ts            some files only
 */
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { Database } from '../src/core/db/database.ts';
import { migrateSqliteTemplate, SQLITE_TEMPLATE_VARIABLE } from './fixtures/sqlite-template.ts';
import { PG_ADMIN_URL, pgAdmin, pgUrlFor, postgresReachable, redisReachable } from './fixtures/services.ts';

const required = process.env.RESTOCK_REQUIRE_SERVICES === '1';
const VENDURE_PLUGIN = 'extensions/vendure-plugin';
const env: NodeJS.ProcessEnv = { ...process.env };
const dialects = (env.RESTOCK_TEST_DIALECTS ?? 'sqlite,postgres').split(',').map((d) => d.trim());

function loud(message: string) {
  const bar = '!'.repeat(78);
  process.stderr.write(`\n${bar}\n${message}\n${bar}\n\n`);
}

// CI must run the storage tests on both databases: a narrowed list there would pass on half.
if (required && !(dialects.includes('sqlite') && dialects.includes('postgres'))) {
  loud(`FAIL: RESTOCK_TEST_DIALECTS=${env.RESTOCK_TEST_DIALECTS} narrows the run, and RESTOCK_REQUIRE_SERVICES=1 requires both sqlite and postgres.`);
  process.exit(1);
}

const [pgUp, redisUp] = await Promise.all([postgresReachable(), redisReachable()]);
const missing = [!pgUp && 'PostgreSQL', !redisUp && 'Redis'].filter(Boolean);
if (missing.length > 0) {
  if (required) {
    loud(`FAIL: ${missing.join(' and ')} not reachable, and RESTOCK_REQUIRE_SERVICES=1 requires them.`);
    process.exit(1);
  }
  loud(`SKIPPING the ${missing.join(' and ')} tests: not reachable on 127.0.0.1. They show as skipped in the summary.`);
  if (!pgUp) env.RESTOCK_TEST_SKIP_POSTGRES = `PostgreSQL not reachable at ${new URL(PG_ADMIN_URL).host}`;
  if (!redisUp) env.RESTOCK_TEST_SKIP_REDIS = '1';
}
env.RESTOCK_TEST_DIALECTS = dialects.join(',');
const postgresRuns = dialects.includes('postgres') && pgUp;

const runId = `${process.pid}_${randomBytes(3).toString('hex')}`;
const template = `restock_tpl_${runId}`;
if (postgresRuns) {
  await pgAdmin(`create database ${template}`);
  const database = Database.open({ dialect: 'postgres', url: pgUrlFor(template), poolMax: 2 });
  await database.migrate();
  await database.close();
  env.RESTOCK_TEST_PG_TEMPLATE = template;
  env.RESTOCK_TEST_RUN_ID = runId;
}

// Each SQLite test database is a copy of this file (test/fixtures/sqlite-template.ts).
if (dialects.includes('sqlite')) {
  const dir = mkdtempSync(path.join(tmpdir(), 'restock-template-'));
  process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'restock.db');
  await migrateSqliteTemplate(file);
  env[SQLITE_TEMPLATE_VARIABLE] = file;
}

buildVendurePlugin();
const args = process.argv.slice(2);
const files = args.length > 0 ? args : [...findTests('test'), ...findTests(path.join(VENDURE_PLUGIN, 'test'), '.test.mjs')];
// A hang guard per test and per group of files, not a speed check (speed is measured under
// bench/): the longest files (Vendure, the extension points' type-checks) take one to two minutes
// on the 2-core machine, and a group about as long.
const FILE_TIMEOUT_MS = 300_000;
/** Groups run at once: one more than the cores unless RESTOCK_TEST_CONCURRENCY says otherwise (1: one after another). */
const CONCURRENCY = testConcurrency();
/**
 * Files that run each in a process of its own, before the groups: the longest, so that none of
 * them is left running on one core at the end while the others idle, and shopify-app-config,
 * which replaces fetch and sets variables for its whole process while Shopify's theme checker
 * runs. A long file missing here runs in a group: only how evenly the cores end depends on it.
 */
const OWN_PROCESS = [
  'test/vendure.test.ts',
  'test/extension-points.test.ts',
  'test/properties.test.ts',
  'test/agent-properties.test.ts',
  'test/dispatch-faults.test.ts',
  'test/shopify-app-config.test.ts',
];
/** Files per process for the rest. */
const GROUP_SIZE = 6;
const groupsDir = mkdtempSync(path.join(tmpdir(), 'restock-test-groups-'));
process.once('exit', () => rmSync(groupsDir, { recursive: true, force: true }));
const entries = writeGroups(groupsDir, groupFiles(files));
const child = spawn(process.execPath, ['--import', 'tsx', '--test', '--test-reporter=spec', `--test-timeout=${FILE_TIMEOUT_MS}`, `--test-concurrency=${CONCURRENCY}`, ...entries], {
  env,
  stdio: 'inherit',
});
const code: number = await new Promise((resolve) => child.on('exit', (c, signal) => resolve(c ?? (signal ? 1 : 0))));

if (postgresRuns) await dropRunDatabases();
process.exit(code);

function testConcurrency(): number {
  const given = env.RESTOCK_TEST_CONCURRENCY;
  // The groups wait on log flushes, child processes and servers for about a third of their time
  // (two at a time on 2 cores used 1.4 of them): a third keeps both cores busy.
  if (given === undefined || given === '') return availableParallelism() + 1;
  const count = Number(given);
  if (!Number.isInteger(count) || count < 1 || count > 64) {
    loud(`FAIL: RESTOCK_TEST_CONCURRENCY=${given}: expected a whole number from 1 to 64.`);
    process.exit(1);
  }
  return count;
}

/**
 * The files in groups, each group one process. Starting a process and loading the service's
 * modules under tsx costs one to two seconds of CPU, as much as an average file's tests; a group
 * pays it once. Each file keeps its own databases, servers and ports, and its suites run one
 * after another as in a process of its own.
 */
function groupFiles(all: string[]): string[][] {
  const ownProcess = new Set(OWN_PROCESS.map((file) => path.resolve(file)));
  const alone = all.filter((file) => ownProcess.has(path.resolve(file)));
  const rest = all.filter((file) => !ownProcess.has(path.resolve(file)));
  const groups = alone.map((file) => [file]);
  for (let i = 0; i < rest.length; i += GROUP_SIZE) groups.push(rest.slice(i, i + GROUP_SIZE));
  return groups;
}

/**
 * One entry file per group, named so that Node's runner, which sorts the files it is given,
 * starts them in the groups' order. A file that fails to load fails as a test of its own name,
 * and the group's other files still run.
 */
function writeGroups(dir: string, groups: string[][]): string[] {
  return groups.map((group, i) => {
    const entry = path.join(dir, `${String(i + 1).padStart(2, '0')}-${path.basename(group[0]!).replace(/\.test\.m?[jt]s$/, '')}.test.mjs`);
    writeFileSync(entry, groupEntry(group));
    return entry;
  });
}

/** A group's entry file: its files imported one after another, each registering its suites. */
function groupEntry(files: string[]): string {
  const urls = files.map((file) => pathToFileURL(path.resolve(file)).href);
  return [
    "import { test } from 'node:test';",
    `for (const file of ${JSON.stringify(urls, null, 2)}) {`,
    '  try {',
    '    await import(file);',
    '  } catch (err) {',
    '    test(`loading ${file}`, () => {',
    '      throw err;',
    '    });',
    '  }',
    '}',
    '',
  ].join('\n');
}

/** The project's test files, never walking into node_modules (test/conformance installs packages of its own). */
function findTests(dir: string, suffix = '.test.ts'): string[] {
  const found: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const file = path.join(dir, entry.name);
    if (entry.isDirectory() && entry.name !== 'node_modules') found.push(...findTests(file, suffix));
    else if (entry.isFile() && entry.name.endsWith(suffix)) found.push(file);
  }
  return found.sort();
}

/**
 * The Vendure plugin's tests and the Vendure end-to-end test use its built files (what `npm pack`
 * ships): built again here when a source is newer, so a changed plugin is never tested stale.
 * Where its install is missing (`npm ci --prefix extensions/vendure-plugin`) the Vendure tests
 * say so themselves, skipping loudly or failing under RESTOCK_REQUIRE_SERVICES=1.
 */
function buildVendurePlugin(): void {
  if (!existsSync(path.join(VENDURE_PLUGIN, 'node_modules/typescript'))) return;
  const built = path.join(VENDURE_PLUGIN, 'dist/index.js');
  const sources = readdirSync(path.join(VENDURE_PLUGIN, 'src')).map((name) => statSync(path.join(VENDURE_PLUGIN, 'src', name)).mtimeMs);
  if (existsSync(built) && statSync(built).mtimeMs >= Math.max(...sources)) return;
  const tsc = spawnSync(process.execPath, [path.join(VENDURE_PLUGIN, 'node_modules/typescript/bin/tsc'), '-p', path.join(VENDURE_PLUGIN, 'tsconfig.json')], { stdio: 'inherit' });
  if (tsc.status !== 0) {
    loud('FAIL: the Vendure plugin does not build (extensions/vendure-plugin).');
    process.exit(1);
  }
}

/** Drops the template and any database a crashed test file left behind. */
async function dropRunDatabases() {
  const { default: pg } = await import('pg');
  const client = new pg.Client({ connectionString: pgUrlFor('postgres') });
  await client.connect();
  try {
    const { rows } = await client.query<{ datname: string }>(
      `select datname from pg_database where datname like $1 or datname = $2`,
      [`restock_t_${runId}_%`, template],
    );
    for (const { datname } of rows) await client.query(`drop database if exists ${datname} with (force)`);
  } finally {
    await client.end();
  }
}
