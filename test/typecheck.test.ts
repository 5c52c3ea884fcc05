import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { it } from './fixtures/suites.ts';
import { fileURLToPath } from 'node:url';

// tsx runs the sources without checking types; this keeps `strict` honest on every test run.
it('the project type-checks (tsc --noEmit, strict)', () => {
  const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  const res = spawnSync(process.execPath, [tsc, '--noEmit', '-p', fileURLToPath(new URL('../tsconfig.json', import.meta.url))], {
    encoding: 'utf8',
    timeout: 120_000,
  });
  assert.equal(res.status, 0, res.stdout + res.stderr);
});
