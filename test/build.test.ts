/**
 * The production build (README, "Start"): `npm run build` compiles every server module to dist/
 * with a source map, `bin/restock.js` runs the build and answers from it, and falls back to the
 * sources, saying so, when they are newer than the build.
 */
import assert from 'node:assert/strict';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, utimesSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { freePort } from './fixtures/network.ts';
import { after, before, describe, it } from './fixtures/suites.ts';
import { browserScript } from '../src/core/browser-scripts.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const BIN = join(ROOT, 'bin/restock.js');
const BUILT = join(ROOT, 'dist/.built');
const FALLBACK = /running the sources through tsx/;
const LOADED_PACKAGES = join(ROOT, 'test/fixtures/loaded-packages.mjs');

describe('the production build', () => {
  let dataDir: string;
  before(() => {
    execFileSync(process.execPath, [join(ROOT, 'bin/build.mjs')], { cwd: ROOT, stdio: 'pipe' });
    dataDir = mkdtempSync(join(tmpdir(), 'restock-build-'));
  });
  after(() => rmSync(dataDir, { recursive: true, force: true }));

  it('compiles each server module beside its source map, bundles the packages only it imports, and copies what the service reads as text', () => {
    for (const file of ['main.js', 'main.js.map', 'core/db/migrations/index.js', 'storefront/widget.ts', 'storefront/widget.browser.min.js', 'push/service-worker.ts', 'push/service-worker.browser.js', 'discovery/skills/register-agent/SKILL.md']) {
      assert.ok(existsSync(join(ROOT, 'dist', file)), `dist/${file}`);
    }
    assert.ok(!existsSync(join(ROOT, 'dist/storefront/widget.js')), 'browser code is not compiled as a server module');
    // Relative imports name the compiled modules; packages stay imports of node_modules.
    const main = readFileSync(join(ROOT, 'dist/main.js'), 'utf8');
    assert.match(main, /from "\.\/config\.js"/);
    assert.doesNotMatch(main, /\.ts"/);
    assert.match(main, /from "pino"/);
    // Kysely and jose are bundled, one file each, which every compiled module imports instead.
    assert.match(readFileSync(join(ROOT, 'dist/core/db/database.js'), 'utf8'), /from "\.\.\/\.\.\/vendor\/kysely\.js"/);
    assert.match(readFileSync(join(ROOT, 'dist/core/sealed-secrets.js'), 'utf8'), /from "\.\.\/vendor\/jose\.js"/);
    for (const file of ['vendor/kysely.js', 'vendor/jose.js']) assert.ok(existsSync(join(ROOT, 'dist', file)), `dist/${file}`);
  });

  it('stack traces of the build name the TypeScript lines, the maps read only when a trace is formatted', () => {
    const source = join(ROOT, 'src/core/mail/smtp-url.ts');
    const line = readFileSync(source, 'utf8').split('\n').findIndex((text) => text.includes('must start with smtp:// or smtps://')) + 1;
    assert.ok(line > 0);
    const script = `
      import { mapStackTraces } from './bin/stack-source-maps.js';
      mapStackTraces(new URL('./dist/', import.meta.url));
      const { parseSmtpUrl } = await import('./dist/core/mail/smtp-url.js');
      try { parseSmtpUrl('nope://x'); } catch (err) { console.log(err.stack); }`;
    const run = spawnSync(process.execPath, ['--input-type=module', '-e', script], { cwd: ROOT, encoding: 'utf8' });
    assert.equal(run.status, 0, run.stderr);
    const [headline, frame] = run.stdout.split('\n');
    assert.equal(headline, 'SmtpUrlError: the SMTP URL must start with smtp:// or smtps://, not nope://');
    assert.match(frame!, new RegExp(`^    at parseSmtpUrl \\(${source.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}:${line}:\\d+\\)$`));
    assert.match(readFileSync(BIN, 'utf8'), /mapStackTraces\(new URL\('\.\.\/dist\/', import\.meta\.url\)\)/, 'bin/restock.js maps the build it runs');
  });

  it('bin/restock.js serves from the build: the service answers, nothing falls back to the sources, and the browser scripts are the build\'s, without esbuild', async () => {
    const port = await freePort();
    const packagesFile = join(dataDir, 'packages.txt');
    const child = spawn(process.execPath, [LOADED_PACKAGES, 'serve'], {
      cwd: ROOT,
      env: { ...process.env, PORT: String(port), DATA_DIR: dataDir, DATABASE_URL: '', BASE_URL: `http://127.0.0.1:${port}`, LOG_LEVEL: 'warn', LOADED_PACKAGES_FILE: packagesFile },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    try {
      let status = 0;
      for (let i = 0; i < 600 && status !== 200; i++) {
        status = await fetch(`http://127.0.0.1:${port}/api/health`).then((res) => res.status, () => 0);
        if (status !== 200) await sleep(50);
      }
      assert.equal(status, 200, `the compiled service answers /api/health; stderr: ${stderr}`);
      assert.doesNotMatch(stderr, FALLBACK);
      // Each form of each kind of browser script, as the sources make it (tests serve those).
      const served = [
        { path: '/widget.js', source: 'storefront/widget.ts', form: 'minified' },
        { path: '/widget-channels.js', source: 'storefront/widget-channels.ts', form: 'minified', startsThe: true },
        { path: '/push/sw.js', source: 'push/service-worker.ts', form: 'readable' },
        { path: '/dashboard/admin-frame.js', source: 'dashboard/admin-frame.ts', form: 'readable' },
      ] as const;
      for (const { path, source, form, ...rest } of served) {
        const answer = await fetch(`http://127.0.0.1:${port}${path}`, { headers: { 'accept-encoding': 'identity' } });
        assert.equal(answer.status, 200, path);
        const expected = await browserScript(new URL(`../src/${source}`, import.meta.url), form);
        const body = await answer.text();
        if ('startsThe' in rest) assert.ok(body.startsWith(expected), `${path} starts with ${source}, compiled`);
        else assert.equal(body, expected, `${path} is ${source}, compiled`);
      }
      rmSync(packagesFile, { force: true });
      child.kill('SIGUSR2');
      for (let i = 0; i < 100 && !existsSync(packagesFile); i++) await sleep(50);
      assert.doesNotMatch(readFileSync(packagesFile, 'utf8'), /^esbuild$/m, 'the compiled service does not import esbuild');
    } finally {
      child.kill('SIGTERM');
      await new Promise((resolve) => child.once('exit', resolve));
    }
  });

  it('a build older than the sources is not run: bin/restock.js runs the sources and says so', () => {
    const built = new Date(readFileSync(BUILT, 'utf8').trim());
    utimesSync(BUILT, new Date(1_000), new Date(1_000));
    try {
      const run = spawnHelp();
      assert.match(run.stderr, FALLBACK);
      assert.match(run.stdout, /Usage: restock <command>/);
    } finally {
      utimesSync(BUILT, built, built);
    }
    const current = spawnHelp();
    assert.doesNotMatch(current.stderr, FALLBACK);
    assert.match(current.stdout, /Usage: restock <command>/);
  });
});

function spawnHelp(): { stdout: string; stderr: string } {
  const { stdout, stderr } = spawnSync(process.execPath, [BIN, 'help'], { cwd: ROOT, encoding: 'utf8' });
  return { stdout, stderr };
}
