import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import path from 'node:path';
import { it } from './fixtures/suites.ts';
import { fileURLToPath } from 'node:url';

// tsx runs the sources without checking types, and esbuild strips the browser code's types without
// checking them either; these keep `strict` honest on every test run.
const PROJECTS = [
  ['the project type-checks (tsc --noEmit, strict)', 'tsconfig.json'],
  ['the storefront scripts and the admin frame type-check against the DOM (tsconfig.browser.json)', 'tsconfig.browser.json'],
  ['the push service worker type-checks against the worker globals (tsconfig.worker.json)', 'tsconfig.worker.json'],
] as const;

for (const [name, project] of PROJECTS) {
  it(name, () => {
    // The package exports no path to its command, so it is found beside its package.json.
    const tsc = path.join(path.dirname(createRequire(import.meta.url).resolve('typescript/package.json')), 'bin', 'tsc');
    const res = spawnSync(process.execPath, [tsc, '--noEmit', '-p', fileURLToPath(new URL(`../${project}`, import.meta.url))], {
      encoding: 'utf8',
      // A hang guard well inside the test command's 300 s per group: a loaded machine takes half a minute.
      timeout: 120_000,
    });
    assert.equal(res.status, 0, res.stdout + res.stderr);
  });
}
