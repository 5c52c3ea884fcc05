import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from './fixtures/suites.ts';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import SqliteDriver from 'better-sqlite3';
import { privateKeyToAccount } from 'viem/accounts';
import { failOnLeakedHandles } from './fixtures/leaks.ts';
import { eventually, freePort, refusesConnections } from './fixtures/network.ts';
import { watchOutput, type ProcessOutput } from './fixtures/worker-process.ts';

failOnLeakedHandles();

const BIN = fileURLToPath(new URL('../bin/restock.js', import.meta.url));
const tmpDirs: string[] = [];
after(() => tmpDirs.forEach((dir) => rmSync(dir, { recursive: true, force: true })));

function freshDir(): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'restock-cli-'));
  tmpDirs.push(dir);
  return dir;
}

/** A clean environment: what a newcomer's shell has, nothing of ours. */
function cleanEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  return { PATH: process.env.PATH, HOME: process.env.HOME, ...extra };
}

function restock(args: string[], options: { cwd?: string; env?: Record<string, string> } = {}) {
  return spawnSync(process.execPath, [BIN, ...args], { cwd: options.cwd ?? freshDir(), env: cleanEnv(options.env), encoding: 'utf8', timeout: 60_000 });
}

interface Served {
  child: ChildProcess;
  base: string;
  exited: Promise<number | null>;
  /** What the process has written so far (its logs). */
  output: () => string;
  /** The first line of its logs matching `pattern`, once written. */
  waitForLine: ProcessOutput['line'];
}

/** Starts `restock serve` and returns once it says it is listening (logged at info, the default here). */
async function serve(cwd: string, env: Record<string, string> = {}): Promise<Served> {
  const port = await freePort();
  const child = spawn(process.execPath, [BIN, 'serve'], { cwd, env: cleanEnv({ PORT: String(port), LOG_LEVEL: 'info', ...env }), stdio: ['ignore', 'pipe', 'pipe'] });
  const output = watchOutput(child);
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  try {
    await output.line(/"msg":"Restock is listening"/, 60_000);
  } catch (err) {
    child.kill('SIGKILL');
    await exited;
    throw new Error(`restock serve did not come up: ${(err as Error).message}`);
  }
  return { child, base: `http://127.0.0.1:${port}`, exited, output: output.text, waitForLine: output.line };
}

describe('the restock command', () => {
  it('--help prints the commands', () => {
    const res = restock(['--help']);
    assert.equal(res.status, 0);
    assert.match(res.stdout, /serve/);
    assert.match(res.stdout, /migrate/);
  });

  it('an unknown command exits 2 with the usage', () => {
    const res = restock(['frobnicate']);
    assert.equal(res.status, 2);
    assert.match(res.stderr, /Unknown command: frobnicate/);
  });

  it('bad configuration is named, without a stack trace', () => {
    const res = restock(['migrate'], { env: { PORT: 'eighty', DATABASE_URL: 'mysql://x' } });
    assert.equal(res.status, 1);
    assert.match(res.stderr, /Invalid configuration/);
    assert.match(res.stderr, /PORT/);
    assert.doesNotMatch(res.stderr, /\n\s+at /);
  });

  it('migrate applies the migrations once', () => {
    const cwd = freshDir();
    const first = restock(['migrate'], { cwd });
    assert.equal(first.status, 0, first.stderr);
    assert.match(first.stdout, /Applied: 0001_foundation, 0002_identity/);
    assert.ok(existsSync(path.join(cwd, 'data', 'restock.db')), 'embedded default keeps its data under ./data');
    const again = restock(['migrate'], { cwd });
    assert.match(again.stdout, /up to date/);
  });

  it('wallet shows, exports and imports the key test-network payments are paid to, sealed where a key seals it', () => {
    const cwd = freshDir();
    const env = { RESTOCK_ENCRYPTION_KEY: Buffer.alloc(32, 9).toString('base64') };
    const exported = restock(['wallet', 'export'], { cwd, env });
    assert.equal(exported.status, 0, exported.stderr);
    const made = exported.stdout.trim();
    assert.match(made, /^0x[0-9a-f]{64}$/);
    const key = `0x${'ab'.repeat(32)}`;
    const imported = spawnSync(process.execPath, [BIN, 'wallet', 'import'], { cwd, env: cleanEnv(env), input: `${key}\n`, encoding: 'utf8', timeout: 60_000 });
    assert.equal(imported.status, 0, imported.stderr);
    const shown = restock(['wallet', 'show'], { cwd, env });
    assert.match(shown.stdout, new RegExp(`^Address: ${privateKeyToAccount(key as `0x${string}`).address}$`, 'm'));
    assert.equal(restock(['wallet', 'export'], { cwd, env }).stdout.trim(), key);
    const stored = new SqliteDriver(path.join(cwd, 'data', 'restock.db'), { readonly: true });
    try {
      const { value } = stored.prepare("select value from service_secrets where name = 'payment-wallet'").get() as { value: string };
      assert.match(value, /^sealed:/);
      assert.equal(value.includes(key.slice(2)), false, 'sealed at rest');
    } finally {
      stored.close();
    }
    const refused = spawnSync(process.execPath, [BIN, 'wallet', 'import'], { cwd, env: cleanEnv(env), input: 'not a key', encoding: 'utf8', timeout: 60_000 });
    assert.equal(refused.status, 2);
    assert.match(refused.stderr, /64 hex digits/);
    assert.equal(restock(['wallet', 'export'], { cwd, env }).stdout.trim(), key, 'a refused import changes nothing');
    assert.equal(restock(['wallet', 'rotate'], { cwd, env }).status, 2);
  });

  it('dashboard link prints a one-time sign-in link for an existing store, and refuses an unknown one', async () => {
    const cwd = freshDir();
    assert.equal(restock(['store', 'create', 'cli-shop.myshopify.com', '--owner', 'owner@example.com'], { cwd }).status, 0);
    const printed = restock(['dashboard', 'link', 'cli-shop.myshopify.com'], { cwd });
    assert.equal(printed.status, 0, printed.stderr);
    const link = /http:\/\/localhost:\d+(\/dashboard\/sign-in\/[A-Za-z0-9_-]{43})/.exec(printed.stdout);
    assert.ok(link, printed.stdout);
    const unknown = restock(['dashboard', 'link', 'nobody.myshopify.com'], { cwd });
    assert.equal(unknown.status, 1);
    assert.match(unknown.stderr, /no active store nobody\.myshopify\.com/);
    assert.equal(restock(['dashboard'], { cwd }).status, 2);

    const { child, base, exited } = await serve(cwd);
    try {
      const used = await fetch(`${base}${link[1]}`, { method: 'POST', redirect: 'manual', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: '' });
      assert.equal(used.status, 303);
      const cookie = used.headers.get('set-cookie')!.split(';')[0]!;
      const dashboard = await fetch(`${base}/dashboard`, { headers: { cookie } });
      assert.equal(dashboard.status, 200);
      assert.match(await dashboard.text(), /<h1>cli-shop\.myshopify\.com<\/h1>/);
    } finally {
      child.kill('SIGTERM');
      assert.equal(await exited, 0);
    }
  });

  it("a newcomer's path: serve on the embedded default, then the three operations", async () => {
    const cwd = freshDir();
    const { child, base, exited } = await serve(cwd);
    try {
      const health = await fetch(`${base}/api/health`);
      assert.equal(health.status, 200);
      assert.equal((await health.json()).status, 'ok');

      // The seed's paid index: payable on a test network, to the wallet this install made.
      const shown = restock(['wallet', 'show'], { cwd });
      assert.equal(shown.status, 0, shown.stderr);
      const address = /^Address: (0x[0-9a-fA-F]{40})$/m.exec(shown.stdout)?.[1];
      assert.ok(address, shown.stdout);
      const index = await fetch(`${base}/api`);
      assert.equal(index.status, 402);
      const required = JSON.parse(Buffer.from(index.headers.get('payment-required')!, 'base64').toString('utf8'));
      assert.deepEqual(
        required.accepts.map((offer: { network: string; payTo: string; asset: string }) => [offer.network, offer.payTo, offer.asset]),
        [['eip155:84532', address, '0x036CbD53842c5426634e7929541eC2318f3dCF7e']],
      );
      assert.match((await index.json()).detail, /test networks only/);
      assert.match(index.headers.get('www-authenticate') ?? '', /Payment .*method="tempo"/, "an MPP tempo challenge, on Tempo's testnet");
      const landing = await fetch(`${base}/`, { headers: { accept: 'text/markdown' } });
      assert.match(await landing.text(), /test networks only/, 'the landing page says so beside the prices');
      const document = await (await fetch(`${base}/openapi.json`)).json();
      assert.deepEqual(document.paths['/api'].get['x-payment-info'].x402.accepts, required.accepts);

      const registered = await fetch(`${base}/api/agent/register`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ type: 'anonymous' }),
      });
      assert.equal(registered.status, 201);
      const authorization = `Bearer ${(await registered.json()).credential}`;

      const subscribe = await fetch(`${base}/api/v1/alerts/subscribe`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization },
        body: JSON.stringify({ productId: 'gid://shopify/Product/123', variantId: 'gid://shopify/ProductVariant/456', email: 'shopper@example.com' }),
      });
      assert.equal(subscribe.status, 200);
      assert.equal((await subscribe.json()).status, 'active');

      const checkout = await fetch(`${base}/api/v1/plans/checkout`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization },
        body: JSON.stringify({ plan: 'starter', shop: 'my-store.myshopify.com' }),
      });
      assert.equal(checkout.status, 200);
      const { checkoutUrl } = await checkout.json();
      const port = new URL(base).port;
      assert.ok(checkoutUrl.startsWith(`http://localhost:${port}/checkout/`), checkoutUrl);
      const page = await fetch(checkoutUrl.replace('localhost', '127.0.0.1'));
      assert.equal(page.status, 200);
      assert.match(await page.text(), /my-store\.myshopify\.com/);
    } finally {
      child.kill('SIGTERM');
      assert.equal(await exited, 0);
    }
  });

  it('request logs carry capability URLs (claim, dashboard sign-in, unsubscribe, Shopify id_token) without their secret', async () => {
    const cwd = freshDir();
    assert.equal(restock(['store', 'create', 'logs-shop.myshopify.com', '--owner', 'owner@example.com'], { cwd }).status, 0);
    const signIn = /\/dashboard\/sign-in\/([A-Za-z0-9_-]{43})/.exec(restock(['dashboard', 'link', 'logs-shop.myshopify.com'], { cwd }).stdout)!;
    const { child, base, exited, output } = await serve(cwd, { LOG_LEVEL: 'info' });
    try {
      assert.equal((await fetch(`${base}${signIn[0]}`)).status, 200);
      await fetch(`${base}/unsubscribe/sub_secretpart.signature-secret`);
      await fetch(`${base}/dashboard?embedded=1&shop=logs-shop.myshopify.com&id_token=eyJsecret.payload.sig`);
      const registered = await fetch(`${base}/api/agent/register`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ type: 'anonymous' }),
      });
      const { claim_token: claimToken } = await registered.json();
      const claimPage = await fetch(`${base}/api/agent/claim?claim_token=${claimToken}`, { headers: { accept: 'text/html' } });
      assert.equal(claimPage.status, 200);
    } finally {
      child.kill('SIGTERM');
      assert.equal(await exited, 0);
    }
    assert.match(output(), /"url":"\/api\/agent\/claim\?claim_token=\[redacted\]"/);
    assert.doesNotMatch(output(), /clm_/);
    assert.match(output(), /"url":"\/dashboard\/sign-in\/\[redacted\]"/);
    assert.doesNotMatch(output(), new RegExp(signIn[1]!));
    assert.match(output(), /"url":"\/unsubscribe\/\[redacted\]"/);
    assert.doesNotMatch(output(), /secret/);
  });

  it('SIGTERM lets an in-flight request finish, then exits 0 with the write kept', async () => {
    const cwd = freshDir();
    const { child, base, exited, waitForLine } = await serve(cwd, { SHUTDOWN_TIMEOUT_MS: '20000' });
    const body = JSON.stringify({ productId: 'gid://shopify/Product/77', email: 'inflight@example.com' });
    const registered = await fetch(`${base}/api/agent/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', connection: 'close' },
      body: JSON.stringify({ type: 'anonymous' }),
    });
    const token = (await registered.json()).credential;
    const socket = net.connect(Number(new URL(base).port), '127.0.0.1');
    await new Promise((resolve) => socket.once('connect', resolve));
    let response = '';
    socket.on('data', (d) => (response += d));
    const closed = new Promise((resolve) => socket.once('close', resolve));
    socket.write(
      `POST /api/v1/alerts/subscribe HTTP/1.1\r\nHost: ${new URL(base).host}\r\nContent-Type: application/json\r\nAuthorization: Bearer ${token}\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body.slice(0, 10)}`,
    );
    // Logged as the request starts: its head is read, its body still to come.
    await waitForLine(/^(?=.*"msg":"incoming request")(?=.*"url":"\/api\/v1\/alerts\/subscribe")/, 30_000);
    child.kill('SIGTERM');
    await waitForLine(/"msg":"shutting down"/, 30_000);
    await eventually(() => refusesConnections(base), `${base} refuses connections after SIGTERM`, 30_000);
    assert.equal(child.exitCode, null, 'still running while a request is in flight');
    // write, not end: a client that half-closes its side has given up on the answer, and Node
    // aborts such requests.
    socket.write(body.slice(10));
    await closed;
    assert.match(response, /^HTTP\/1\.1 200 /);
    assert.match(response, /"status":"active"/);
    assert.equal(await exited, 0);

    const db = new SqliteDriver(path.join(cwd, 'data', 'restock.db'), { readonly: true });
    try {
      const row = db.prepare('select status from subscriptions where email = ?').get('inflight@example.com') as { status: string };
      assert.equal(row.status, 'active');
    } finally {
      db.close();
    }
  });
});

describe('what each command loads', () => {
  const LOADED_PACKAGES = fileURLToPath(new URL('./fixtures/loaded-packages.mjs', import.meta.url));
  /** The web's and the payment protocols' libraries: most of the service's code in memory. */
  const WEB_AND_PAYMENTS = ['@modelcontextprotocol/server', '@modelcontextprotocol/node', 'mppx', 'viem', '@x402/evm'];
  /** Whether a package was loaded: from node_modules, or as the build's bundle of it (`@x402/core` → vendor/x402-core-http). */
  const hasLoaded = (loaded: Set<string>, name: string) => loaded.has(name) || [...loaded].some((entry) => entry.startsWith(`vendor/${name.replace(/^@/, '').replaceAll('/', '-')}`));
  /** The drivers of what the embedded default leaves out: PostgreSQL, Redis, an SMTP server. */
  const UNCONFIGURED = ['pg', 'ioredis', 'nodemailer'];

  /**
   * Runs a long-lived command until it logs `ready`, then `meanwhile` (given the port, and a
   * function that returns the packages imported so far), stops it, and returns the npm packages it imported.
   */
  async function packagesLoadedBy(command: 'serve' | 'worker', ready: RegExp, meanwhile?: (port: number, importedSoFar: () => Promise<Set<string>>) => Promise<void>): Promise<Set<string>> {
    const dir = freshDir();
    const file = path.join(dir, 'packages.txt');
    const port = await freePort();
    const env = { DATA_DIR: dir, PORT: String(port), LOG_LEVEL: 'info', LOADED_PACKAGES_FILE: file };
    const child = spawn(process.execPath, [LOADED_PACKAGES, command], { cwd: dir, env: cleanEnv(env), stdio: ['ignore', 'pipe', 'pipe'] });
    const closed = new Promise((resolve) => child.once('close', resolve));
    const read = () => new Set(readFileSync(file, 'utf8').split('\n').filter(Boolean));
    const importedSoFar = async () => {
      rmSync(file, { force: true });
      child.kill('SIGUSR2');
      for (let i = 0; i < 100 && !existsSync(file); i++) await sleep(50);
      return read();
    };
    try {
      await watchOutput(child).line(ready, 60_000);
      await meanwhile?.(port, importedSoFar);
    } finally {
      child.kill('SIGTERM');
      await closed;
    }
    return read();
  }

  it('restock worker leaves out the web and the payment protocols (it settles nothing until a payment is left to reconcile)', async () => {
    const loaded = await packagesLoadedBy('worker', /"msg":"Restock worker is running"/);
    for (const name of ['pino', 'better-sqlite3']) assert.ok(loaded.has(name), `the worker imports ${name}`);
    for (const name of WEB_AND_PAYMENTS) assert.ok(!hasLoaded(loaded, name), `the worker does not import ${name}`);
    assert.ok(!loaded.has('twilio'), 'nor Twilio before it texts');
    for (const name of UNCONFIGURED) assert.ok(!loaded.has(name), `nor ${name}, which the embedded default does not use`);
  });

  it('restock serve loads the payment protocols at its first 402, not before: a process no agent pays through never has them', async () => {
    const PAYMENTS = ['mppx', 'viem', '@x402/core', '@x402/evm'];
    const loaded = await packagesLoadedBy('serve', /"msg":"Restock is listening"/, async (port, importedSoFar) => {
      const listening = await importedSoFar();
      for (const name of ['fastify', 'better-sqlite3', '@modelcontextprotocol/server']) assert.ok(listening.has(name), `serve imports ${name} before it listens`);
      for (const name of PAYMENTS) assert.ok(!hasLoaded(listening, name), `serve does not import ${name} before its first 402`);
      assert.ok(!listening.has('twilio'), 'nor Twilio before it first texts or takes a Twilio webhook');
      for (const name of UNCONFIGURED) assert.ok(!listening.has(name), `nor ${name}, which the embedded default does not use`);
      // /openapi.json offers x402 all the same: its requirements come from the settings, not the SDK.
      const openapi = (await (await fetch(`http://127.0.0.1:${port}/openapi.json`)).json()) as { paths: Record<string, Record<string, { 'x-payment-info'?: { x402?: { accepts: Array<{ payTo: string }> } } }>> };
      const payTo = openapi.paths['/api']?.get?.['x-payment-info']?.x402?.accepts[0]?.payTo;
      assert.match(payTo ?? '', /^0x[0-9a-fA-F]{40}$/, 'GET /api offers x402 in /openapi.json');
      const afterOpenApi = await importedSoFar();
      for (const name of PAYMENTS) assert.ok(!hasLoaded(afterOpenApi, name), `/openapi.json does not import ${name}`);
      const demand = await fetch(`http://127.0.0.1:${port}/api`);
      assert.equal(demand.status, 402);
      assert.ok(demand.headers.get('payment-required'), 'the first 402 carries the x402 requirements');
      assert.ok(demand.headers.get('www-authenticate')?.startsWith('Payment '), 'and an MPP challenge');
    });
    for (const name of PAYMENTS) assert.ok(hasLoaded(loaded, name), `serve imports ${name} for its first 402`);
  });
});
