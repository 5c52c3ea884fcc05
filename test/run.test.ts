/**
 * The test command itself, run on a small part of the suite as a machine without the services
 * would run it: what is skipped is counted as skipped, and CI's setting refuses what would let a
 * run pass on half of it.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, it } from './fixtures/suites.ts';
import { failOnLeakedHandles } from './fixtures/leaks.ts';
import { freePort } from './fixtures/network.ts';

failOnLeakedHandles();

/** Runs `test/run.ts` on the files with the environment given; resolves to its exit code and output. */
function runTests(files: string[], env: Record<string, string | undefined>): Promise<{ code: number; output: string }> {
  const childEnv: NodeJS.ProcessEnv = { ...process.env, ...env };
  // The outer run's template database and settings are not the inner run's.
  // NODE_TEST_CONTEXT would make the inner runner think it is nested in this one and run nothing.
  for (const name of ['NODE_TEST_CONTEXT', 'RESTOCK_TEST_PG_TEMPLATE', 'RESTOCK_TEST_RUN_ID', 'RESTOCK_TEST_SKIP_POSTGRES', 'RESTOCK_TEST_SKIP_REDIS', 'RESTOCK_TEST_DIALECTS', 'RESTOCK_REQUIRE_SERVICES']) {
    if (!(name in env)) delete childEnv[name];
  }
  for (const [name, value] of Object.entries(env)) if (value === undefined) delete childEnv[name];
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'test/run.ts', ...files], { env: childEnv, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.on('exit', (code) => resolve({ code: code ?? 1, output }));
  });
}

const summary = (output: string, name: string) => Number(new RegExp(`^ℹ ${name} (\\d+)$`, 'm').exec(output)?.[1] ?? NaN);

describe('the test command', () => {
  it('counts the tests of missing services and a missing browser as skipped, and runs what needs none of them', async () => {
    const closed = await freePort();
    const { code, output } = await runTests(['test/health.test.ts', 'test/widget.test.ts'], {
      RESTOCK_TEST_PG_URL: `postgres://postgres@127.0.0.1:${closed}/postgres`,
      RESTOCK_TEST_REDIS_URL: `redis://127.0.0.1:${closed}`,
      RESTOCK_TEST_CHROMIUM: '/nonexistent/chromium',
    });
    assert.equal(code, 0, output);
    assert.match(output, /SKIPPING the PostgreSQL and Redis tests/);
    assert.match(output, /SKIPPING the browser tests/);
    assert.match(output, /health on postgres \(skipped: PostgreSQL not reachable/);
    assert.ok(summary(output, 'skipped') >= 10, `the PostgreSQL health tests and the browser widget tests are counted as skipped:\n${output.slice(-600)}`);
    assert.match(output, /✔ ships widget.js under its size budget/, 'the size budget needs no browser');
    assert.match(output, /✔ health on sqlite/);
  });

  it('under RESTOCK_REQUIRE_SERVICES=1, refuses a missing service and a narrowed dialect list', async () => {
    const closed = await freePort();
    const missing = await runTests(['test/health.test.ts'], { RESTOCK_REQUIRE_SERVICES: '1', RESTOCK_TEST_PG_URL: `postgres://postgres@127.0.0.1:${closed}/postgres` });
    assert.equal(missing.code, 1, missing.output);
    assert.match(missing.output, /FAIL: PostgreSQL not reachable/);
    const narrowed = await runTests(['test/health.test.ts'], { RESTOCK_REQUIRE_SERVICES: '1', RESTOCK_TEST_DIALECTS: 'sqlite' });
    assert.equal(narrowed.code, 1, narrowed.output);
    assert.match(narrowed.output, /FAIL: RESTOCK_TEST_DIALECTS=sqlite narrows the run/);
    assert.doesNotMatch(narrowed.output, /ℹ tests/, 'no test ran');
  });

  it('runs the files of a group in one process', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'restock-run-test-'));
    const files = ['first', 'second'].map((name) => path.join(dir, `${name}.test.ts`));
    for (const file of files) writeFileSync(file, "import { it } from 'node:test';\nit('says its process', (t) => t.diagnostic(`process ${process.pid}`));\n");
    try {
      const { code, output } = await runTests(files, { RESTOCK_TEST_DIALECTS: 'sqlite' });
      assert.equal(code, 0, output);
      const processes = [...output.matchAll(/ℹ process (\d+)/g)].map((match) => match[1]);
      assert.equal(processes.length, 2, output.slice(-600));
      assert.equal(processes[0], processes[1], 'both files ran in one process');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a file that fails to load fails as a test of its own, and the other files of its group (its process) still run', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'restock-run-test-'));
    const broken = path.join(dir, 'broken.test.ts');
    writeFileSync(broken, "throw new Error('this file does not load');\n");
    try {
      const { code, output } = await runTests([broken, 'test/health.test.ts'], { RESTOCK_TEST_DIALECTS: 'sqlite' });
      assert.equal(code, 1, output);
      assert.match(output, /✖ loading file:\/\/.*broken\.test\.ts/);
      assert.match(output, /this file does not load/);
      assert.match(output, /✔ health on sqlite/, 'the other file of its group ran');
      assert.equal(summary(output, 'fail'), 1, output.slice(-600));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
