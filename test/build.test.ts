/**
 * The production build (README, "Start"): `npm run build` compiles every server module to dist/
 * with a source map, `bin/restock.js` runs the build and answers from it, and falls back to the
 * sources, saying so, when they are newer than the build.
 */
import assert from 'node:assert/strict';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { freePort } from './fixtures/network.ts';
import { before, describe, it } from './fixtures/suites.ts';
import { startX402Chain, x402PayingFetch } from './fixtures/x402-chain.ts';
import { browserScript } from '../src/core/browser-scripts.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const BIN = join(ROOT, 'bin/restock.js');
const FALLBACK = /running the sources through tsx/;
const LOADED_PACKAGES = join(ROOT, 'test/fixtures/loaded-packages.mjs');

describe('the production build', () => {
  before(() => {
    execFileSync(process.execPath, [join(ROOT, 'bin/build.mjs')], { cwd: ROOT, stdio: 'pipe' });
  });

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
    const served = await startBuilt();
    try {
      assert.doesNotMatch(served.stderr(), FALLBACK);
      // Each form of each kind of browser script, as the sources make it (tests serve those).
      const scripts = [
        { path: '/widget.js', source: 'storefront/widget.ts', form: 'minified' },
        { path: '/widget-channels.js', source: 'storefront/widget-channels.ts', form: 'minified', startsThe: true },
        { path: '/push/sw.js', source: 'push/service-worker.ts', form: 'readable' },
        { path: '/dashboard/admin-frame.js', source: 'dashboard/admin-frame.ts', form: 'readable' },
      ] as const;
      for (const { path, source, form, ...rest } of scripts) {
        const answer = await fetch(`${served.base}${path}`, { headers: { 'accept-encoding': 'identity' } });
        assert.equal(answer.status, 200, path);
        const expected = await browserScript(new URL(`../src/${source}`, import.meta.url), form);
        const body = await answer.text();
        if ('startsThe' in rest) assert.ok(body.startsWith(expected), `${path} starts with ${source}, compiled`);
        else assert.equal(body, expected, `${path} is ${source}, compiled`);
      }
      assert.ok(!(await served.packagesSoFar()).has('esbuild'), 'the compiled service does not import esbuild');
    } finally {
      await served.stop();
    }
  });

  it("the build's bundled payment SDKs take a payment: the official x402 client pays GET /api on a local chain, and no copy of viem, mppx or x402 is loaded from node_modules", async () => {
    const chain = await startX402Chain();
    const served = await startBuilt({
      PAYMENTS_TEST_NETWORK: 'auto',
      X402_TEST_NETWORK: chain.network,
      X402_TEST_ASSET: chain.usdc,
      X402_TEST_ASSET_NAME: 'USD Coin',
      X402_TEST_FACILITATOR_URL: chain.facilitatorUrl,
    });
    try {
      const demand = await fetch(`${served.base}/api`);
      assert.equal(demand.status, 402);
      assert.ok(demand.headers.get('www-authenticate')?.startsWith('Payment '), 'an MPP challenge, made by the bundled mppx');
      const payTo = ((await demand.json()) as { accepts: Array<{ payTo: `0x${string}` }> }).accepts[0]!.payTo;
      const before = await chain.usdcBalance(payTo);
      const paid = await x402PayingFetch(chain)(`${served.base}/api`);
      assert.equal(paid.status, 200, await paid.clone().text());
      assert.ok(paid.headers.get('payment-response'), 'the settlement, encoded by the bundled @x402/core');
      assert.ok((await chain.usdcBalance(payTo)) > before, 'the amount reached the service’s wallet');
      const loaded = await served.packagesSoFar();
      for (const name of ['viem', 'mppx', '@x402/core', '@x402/evm', 'ox', 'kysely']) assert.ok(!loaded.has(name), `${name} is the build's bundle, not node_modules'`);
    } finally {
      await served.stop();
      await chain.close();
    }
  });

  it('a build older than the sources is not run: bin/restock.js runs the sources and says so', () => {
    // Beside the repository (so its packages resolve), not in it: other test files start
    // bin/restock.js meanwhile, and must find the repository's build as current as it is.
    const layout = mkdtempSync(join(ROOT, '.build-check-'));
    try {
      for (const file of ['restock.js', 'stack-source-maps.js']) cpSync(join(ROOT, 'bin', file), join(layout, 'bin', file));
      symlinkSync(join(ROOT, 'src'), join(layout, 'src'));
      mkdirSync(join(layout, 'dist'));
      writeFileSync(join(layout, 'dist/.built'), `${new Date(1_000).toISOString()}\n`);
      utimesSync(join(layout, 'dist/.built'), new Date(1_000), new Date(1_000));
      const stale = spawnHelp(join(layout, 'bin/restock.js'));
      assert.match(stale.stderr, FALLBACK);
      assert.match(stale.stdout, /Usage: restock <command>/);
    } finally {
      rmSync(layout, { recursive: true, force: true });
    }
    const current = spawnHelp();
    assert.doesNotMatch(current.stderr, FALLBACK);
    assert.match(current.stdout, /Usage: restock <command>/);
  });
});

interface BuiltService {
  base: string;
  /** What the process wrote to stderr so far. */
  stderr(): string;
  /** The npm packages the process has loaded so far (test/fixtures/loaded-packages.mjs). */
  packagesSoFar(): Promise<Set<string>>;
  stop(): Promise<void>;
}

/** `restock serve` from the build, as bin/restock.js runs it, on a fresh embedded database, once it answers /api/health. */
async function startBuilt(env: Record<string, string> = {}): Promise<BuiltService> {
  const port = await freePort();
  const dataDir = mkdtempSync(join(tmpdir(), 'restock-build-serve-'));
  const packagesFile = join(dataDir, 'packages.txt');
  const base = `http://127.0.0.1:${port}`;
  const child = spawn(process.execPath, [LOADED_PACKAGES, 'serve'], {
    cwd: ROOT,
    env: { ...process.env, PORT: String(port), DATA_DIR: dataDir, DATABASE_URL: '', BASE_URL: base, LOG_LEVEL: 'warn', LOADED_PACKAGES_FILE: packagesFile, ...env },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise((resolve) => child.once('exit', resolve));
  const stop = async () => {
    child.kill('SIGTERM');
    await exited;
    rmSync(dataDir, { recursive: true, force: true });
  };
  let status = 0;
  for (let i = 0; i < 600 && status !== 200; i++) {
    status = await fetch(`${base}/api/health`).then((res) => res.status, () => 0);
    if (status !== 200) await sleep(50);
  }
  if (status !== 200) {
    await stop();
    assert.fail(`the compiled service does not answer /api/health; stderr: ${stderr}`);
  }
  return {
    base,
    stderr: () => stderr,
    async packagesSoFar() {
      rmSync(packagesFile, { force: true });
      child.kill('SIGUSR2');
      for (let i = 0; i < 100 && !existsSync(packagesFile); i++) await sleep(50);
      return new Set(readFileSync(packagesFile, 'utf8').split('\n').filter(Boolean));
    },
    stop,
  };
}

function spawnHelp(bin = BIN): { stdout: string; stderr: string } {
  const { stdout, stderr } = spawnSync(process.execPath, [bin, 'help'], { cwd: ROOT, encoding: 'utf8' });
  return { stdout, stderr };
}
