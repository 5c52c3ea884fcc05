/**
 * `/openapi.json` as Redocly's linter reads it, with its `recommended` rules: no error, and no
 * warning but those docs/api.md ("Lint warnings kept") lists with its reason. The document is
 * generated from the routes, not from storage, so one database serves.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startTestApp } from './fixtures/app.ts';
import { failOnLeakedHandles } from './fixtures/leaks.ts';
import { after, before, describe, it } from './fixtures/suites.ts';

failOnLeakedHandles();

// Installed with the other conformance tools (test/conformance, `npm ci`'s postinstall), run by
// the Node that runs the tests.
const REDOCLY = (() => {
  const manifest = path.join(import.meta.dirname, 'conformance', 'node_modules', '@redocly', 'cli', 'package.json');
  if (!existsSync(manifest)) return undefined;
  const { bin } = JSON.parse(readFileSync(manifest, 'utf8')) as { bin: Record<string, string> };
  return path.join(path.dirname(manifest), bin.redocly!);
})();

function toolSkipReason(): string | undefined {
  if (REDOCLY !== undefined) return undefined;
  const reason = 'Redocly CLI is not installed (npm ci installs it, or npm ci --prefix test/conformance)';
  if (process.env.RESTOCK_REQUIRE_SERVICES === '1') throw new Error(`FAIL: ${reason}, and RESTOCK_REQUIRE_SERVICES=1 requires the OpenAPI lint to run.`);
  const bar = '!'.repeat(78);
  process.stderr.write(`\n${bar}\nSKIPPING the OpenAPI lint: ${reason}.\n${bar}\n\n`);
  return reason;
}

interface LintProblem {
  ruleId: string;
  severity: 'error' | 'warn';
  message: string;
  location: Array<{ source: { ref: string }; pointer: string }>;
}

const METHODS = 'get|put|post|delete|options|head|patch|trace';

/** Where a problem is, as docs/api.md writes it: `GET /api/health` for an operation, else the pointer. */
function whereOf(pointer: string): string {
  const operation = new RegExp(`^#/paths/([^/]+)/(${METHODS})(?:/|$)`).exec(pointer);
  if (!operation) return pointer;
  return `${operation[2]!.toUpperCase()} ${operation[1]!.replace(/~1/g, '/').replace(/~0/g, '~')}`;
}

/** docs/api.md's "Lint warnings kept": `rule at where` for each row. */
function keptWarnings(): string[] {
  const api = readFileSync(new URL('../docs/api.md', import.meta.url), 'utf8');
  const section = api.split('\n## Lint warnings kept\n')[1]?.split('\n## ')[0];
  assert.ok(section, 'docs/api.md has no "Lint warnings kept" section');
  const rows = [...section.matchAll(/^\| `([a-z0-9-]+)` \| `([^`]+)` \| (.+) \|$/gm)];
  for (const [row, , , why] of rows) assert.ok(why!.trim().length > 10, `docs/api.md keeps a warning without saying why: ${row}`);
  return rows.map(([, rule, where]) => `${rule} at ${where}`);
}

/** Lints `file` in `dir`; resolves with its problems. */
function lint(dir: string, file: string): Promise<LintProblem[]> {
  // A clean environment: no proxy settings, and nothing sent home (telemetry, update checks).
  const env = { PATH: process.env.PATH, HOME: dir, NO_COLOR: '1', REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' };
  const args = [REDOCLY!, 'lint', file, '--config', path.join(dir, 'redocly.yaml'), '--format', 'json', '--max-problems', '10000'];
  return new Promise((resolve, reject) => {
    execFile(process.execPath, args, { cwd: dir, env, timeout: 60_000, maxBuffer: 16 << 20 }, (err, stdout, stderr) => {
      // It exits 1 when it finds an error; anything but its JSON report is a failure to run.
      try {
        resolve((JSON.parse(stdout) as { problems: LintProblem[] }).problems);
      } catch {
        reject(new Error(`redocly lint did not report on ${file} (${err?.message ?? 'exit 0'}):\n${stdout}${stderr}`));
      }
    });
  });
}

const describeProblem = (problem: LintProblem) => `${problem.severity} ${problem.ruleId} at ${whereOf(problem.location[0]!.pointer)}: ${problem.message}`;

describe("the OpenAPI document under Redocly's recommended rules", { skip: toolSkipReason() }, () => {
  let dir: string;
  let found: LintProblem[];
  let foundInBroken: LintProblem[];

  before(async () => {
    const t = await startTestApp('sqlite');
    let doc: { paths: Record<string, Record<string, { security?: unknown }>> };
    try {
      const res = await t.inject({ method: 'GET', url: '/openapi.json' });
      assert.equal(res.statusCode, 200);
      doc = res.json();
    } finally {
      await t.close();
    }
    dir = mkdtempSync(path.join(os.tmpdir(), 'restock-openapi-lint-'));
    writeFileSync(path.join(dir, 'openapi.json'), JSON.stringify(doc));
    // The same document with one public operation no longer saying so: the lint must see it.
    const broken = structuredClone(doc);
    delete broken.paths['/api/health']!.get!.security;
    writeFileSync(path.join(dir, 'broken.json'), JSON.stringify(broken));
    // A config of our own beside the files, so that no redocly.yaml elsewhere changes the rules.
    writeFileSync(path.join(dir, 'redocly.yaml'), 'extends:\n  - recommended\n');
    [found, foundInBroken] = await Promise.all([lint(dir, 'openapi.json'), lint(dir, 'broken.json')]);
  });
  after(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('finds no error', () => {
    const errors = found.filter((problem) => problem.severity === 'error').map(describeProblem);
    assert.deepEqual(errors, []);
  });

  it('finds only the warnings docs/api.md keeps, and each one it keeps', () => {
    const warnings = found.filter((problem) => problem.severity !== 'error');
    const kept = keptWarnings();
    const unlisted = warnings.filter((problem) => !kept.includes(`${problem.ruleId} at ${whereOf(problem.location[0]!.pointer)}`)).map(describeProblem);
    assert.deepEqual(unlisted, [], 'warnings docs/api.md does not keep: fix the document, or list each with the reason it stays');
    const gone = kept.filter((entry) => !warnings.some((problem) => `${problem.ruleId} at ${whereOf(problem.location[0]!.pointer)}` === entry));
    assert.deepEqual(gone, [], 'docs/api.md keeps warnings the lint no longer finds');
  });

  it('runs the rules it is asked to: a public operation without `security: []` is an error', () => {
    const errors = foundInBroken.filter((problem) => problem.severity === 'error').map((problem) => `${problem.ruleId} at ${whereOf(problem.location[0]!.pointer)}`);
    assert.deepEqual(errors, ['security-defined at GET /api/health']);
  });
});
