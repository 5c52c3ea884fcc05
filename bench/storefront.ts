/**
 * What every product page of every customer store costs the service: the storefront widget's
 * requests, each as a ratio against a bare Fastify route (bench/bare-server.ts) loaded the same
 * way in the same run. See docs/performance.md, "Storefront".
 *
 *   npm run bench:storefront                      bare, then the four storefront targets on SQLite (FULL)
 *   BENCH_ROUNDS=3 BENCH_DURATION=8 npm run bench:storefront
 *
 * Targets, in this order per round, against one Restock server:
 *
 * 1. GET /storefront/v1/availability for a product whose stock is known (three variants, one
 *    sold out): what every product page view asks.
 * 2. GET /widget.js with `accept-encoding: gzip`: the script, minified and gzipped in memory.
 * 3. GET /widget.js with `If-None-Match` set to its ETag: a browser's or CDN's revalidation (304).
 * 4. POST /storefront/v1/subscribe with a new e-mail on every request: a shopper's sign-up, one
 *    subscription written durably per 201.
 *
 * Settings: BENCH_DURATION (seconds measured per target, default 10), BENCH_WARMUP (seconds of
 * load before measuring, default 2), BENCH_CONNECTIONS (default 50), BENCH_ROUNDS (default 1:
 * the whole sequence again, with the median ratios at the end), BENCH_TARGETS (comma list of
 * availability, widget, widget-304, subscribe; default all), BENCH_PROFILE=<dir> (Restock writes
 * a V8 CPU profile there; with one target, the profile is that target's), BENCH_JSON=1 (one
 * machine-readable summary line).
 *
 * Restock runs as in the other benches: `node bin/restock.js serve` on 127.0.0.1 and a free port,
 * SQLite FULL in a fresh temporary DATA_DIR, RUN_WORKER=false, LOG_LEVEL=warn, every rate limit
 * (STOREFRONT_LIMIT_PER_HOUR among them) out of reach. Its data comes the way a merchant's does:
 * `restock store create`, then an agent the owner claims for the store through the API (the code
 * read from the embedded outbox), which reports the product's stock through
 * POST /api/v1/stores/:domain/inventory. The run fails (exit 1) when an answer is not the
 * target's expected status, on socket errors or timeouts, when the checked answers differ from
 * what the widget needs, or when the subscriptions table, read after Restock stopped, does not
 * hold one row per 201.
 */
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import path from 'node:path';
import { brotliCompressSync, constants as zlibConstants, gunzipSync } from 'node:zlib';
import type autocannon from 'autocannon';
import SqliteDriver from 'better-sqlite3';
import { loadWidgetAsset, type WidgetAsset } from '../src/storefront/widget-asset.ts';
import { exitCodeFor, fail, guardProcess, intSetting, profileSetting, runMain } from './lib.ts';
import { baseUrl, freePort, restockEnv, startServer, stopChild, type Child } from './lib.ts';
import { codesOf, cpuSeconds, load, type Result } from './lib.ts';
import { printChecks, printMedianRatios, printSetting, printTable, restockCli, sqliteScratch } from './lib.ts';
import { expectStatus, requestJson, startBareServer } from './lib.ts';


const DURATION = intSetting('BENCH_DURATION', 10, 1, 600);
const WARMUP = intSetting('BENCH_WARMUP', 2, 0, 60);
const CONNECTIONS = intSetting('BENCH_CONNECTIONS', 50, 1, 1000);
const ROUNDS = intSetting('BENCH_ROUNDS', 1, 1, 20);
const PROFILE_DIR = profileSetting();
const TARGET_KEYS = ['availability', 'widget', 'widget-304', 'subscribe'] as const;
type TargetKey = (typeof TARGET_KEYS)[number];
const SELECTED = targetsSetting();

function targetsSetting(): Set<TargetKey> {
  const raw = process.env.BENCH_TARGETS;
  if (raw === undefined || raw.trim() === '') return new Set(TARGET_KEYS);
  const keys = raw.split(',').map((k) => k.trim()).filter(Boolean);
  for (const key of keys) if (!(TARGET_KEYS as readonly string[]).includes(key)) fail(`BENCH_TARGETS: expected ${TARGET_KEYS.join(', ')}, got ${key}`);
  if (keys.length === 0) fail('BENCH_TARGETS: nothing to run');
  return new Set(keys as TargetKey[]);
}

const SHOP = 'bench-shop.myshopify.com';
const OWNER = 'owner@example.com';
const PRODUCT = 'gid://shopify/Product/7001';
const VARIANTS = [
  { variantId: 'gid://shopify/ProductVariant/70011', available: 12 },
  { variantId: 'gid://shopify/ProductVariant/70012', available: 0 },
  { variantId: 'gid://shopify/ProductVariant/70013', available: 3 },
];
const SOLD_OUT = VARIANTS[1]!.variantId;
/** A store's page is on another origin; the browser says which, as the widget's calls are cross-origin. */
const PAGE_ORIGIN = `https://${SHOP}`;
const AVAILABILITY_PATH = `/storefront/v1/availability?${new URLSearchParams({ shop: SHOP, productId: PRODUCT })}`;
const SUBSCRIBE_PATH = '/storefront/v1/subscribe';
/** The per-address storefront limit is 60 an hour by default; the load comes from one address. */
const UNREACHABLE_RATE_LIMIT = '1000000000';
const REQUEST_TIMEOUT_MS = 10_000;
// The bare baseline and the selected targets per round, plus start-up, set-up and the stops.
guardProcess((ROUNDS * ((1 + SELECTED.size) * (WARMUP + DURATION) + 60) + 120) * 1000);

// ---------------------------------------------------------------------------------------------
// Set-up: the store, a store-bound agent, the product's stock

/** The claim code Restock mailed to the owner; with no SMTP_URL its mail stays in the database. */
function mailedCode(dataDir: string): string {
  const driver = new SqliteDriver(path.join(dataDir, 'restock.db'), { readonly: true });
  try {
    const row = driver
      .prepare("select text_body from mail_outbox where recipient = ? and purpose = 'agent-claim-code' order by created_at desc limit 1")
      .get(OWNER) as { text_body: string } | undefined;
    const code = row && /code: (\d{6})/.exec(row.text_body)?.[1];
    if (!code) throw new Error(`no claim code mailed to ${OWNER}`);
    return code;
  } finally {
    driver.close();
  }
}

/** The owner claims an anonymous agent naming the store, which gives it inventory:alerts there. */
async function storeAgentToken(base: string, dataDir: string): Promise<string> {
  const registered = expectStatus('agent registration', await requestJson(base, 'POST', '/api/agent/register', { type: 'anonymous' }), 201);
  expectStatus('claim code request', await requestJson(base, 'POST', '/api/agent/claim', { claim_token: registered.claim_token, email: OWNER, store: SHOP }), 200);
  const claimed = expectStatus('claim', await requestJson(base, 'POST', '/api/agent/claim', { claim_token: registered.claim_token, otp: mailedCode(dataDir) }), 200);
  if (claimed.store !== SHOP || typeof claimed.credential !== 'string') throw new Error(`the claim did not bind the agent to ${SHOP}: ${JSON.stringify(claimed)}`);
  return claimed.credential;
}

async function reportStock(base: string, token: string): Promise<void> {
  const items = VARIANTS.map((v) => ({ productId: PRODUCT, ...v, productTitle: 'Bench mug' }));
  const reported = expectStatus('inventory report', await requestJson(base, 'POST', `/api/v1/stores/${SHOP}/inventory`, { items }, token), 200);
  if (reported.items?.length !== VARIANTS.length) throw new Error(`the inventory report answered ${JSON.stringify(reported)}`);
}

interface RestockServer {
  child: Child;
  base: string;
  dataDir: string;
  drop: () => Promise<void>;
}

async function startRestock(): Promise<RestockServer> {
  const database = sqliteScratch('restock-bench-storefront', 'FULL');
  const dataDir = database.env.DATA_DIR!;
  try {
    const port = await freePort();
    const env = restockEnv(port, { ...database.env, RUN_WORKER: 'false', STOREFRONT_LIMIT_PER_HOUR: UNREACHABLE_RATE_LIMIT });
    await restockCli(['store', 'create', SHOP, '--owner', OWNER], env);
    const profile = PROFILE_DIR ? ['--cpu-prof', `--cpu-prof-dir=${PROFILE_DIR}`] : [];
    const child = await startServer('restock', [...profile, path.join('bin', 'restock.js'), 'serve'], env, port, '/api/health');
    const base = baseUrl(port);
    try {
      await reportStock(base, await storeAgentToken(base, dataDir));
    } catch (err) {
      await stopChild(child);
      throw err;
    }
    return { child, base, dataDir, drop: database.drop };
  } catch (err) {
    await database.drop();
    throw err;
  }
}

// ---------------------------------------------------------------------------------------------
// Answers looked at closely, since under load only their status is counted

async function checkAnswers(base: string, widget: WidgetAsset): Promise<string[]> {
  const problems: string[] = [];
  const availability = await fetch(base + AVAILABILITY_PATH, { headers: { origin: PAGE_ORIGIN }, signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) });
  const body = (await availability.json()) as { soldOut?: unknown; variants?: Array<{ variantId: string; soldOut: boolean }> };
  const expected = VARIANTS.map((v) => ({ variantId: v.variantId, soldOut: v.available <= 0 }));
  if (availability.status !== 200 || body.soldOut !== false || JSON.stringify(body.variants) !== JSON.stringify(expected)) {
    problems.push(`availability answered ${availability.status} ${JSON.stringify(body)}, expected soldOut false and ${JSON.stringify(expected)}`);
  }
  if (availability.headers.get('cache-control') !== 'public, max-age=30') problems.push(`availability cache-control: ${availability.headers.get('cache-control')}`);
  if (availability.headers.get('access-control-allow-origin') !== '*') problems.push('availability is not open to other origins');

  // fetch would decompress on its own; the raw bytes are what a page downloads.
  const served = await rawGet(base, '/widget.js', { 'accept-encoding': 'gzip' });
  if (served.status !== 200 || served.headers['content-encoding'] !== 'gzip' || !served.body.equals(widget.gzipped) || !gunzipSync(served.body).equals(widget.body)) {
    problems.push(`GET /widget.js (gzip) answered ${served.status}, ${served.body.length} bytes, encoding ${served.headers['content-encoding']}, not the ${widget.gzipped.length} gzipped bytes`);
  }
  if (served.headers.etag !== widget.gzippedEtag) problems.push(`GET /widget.js etag ${served.headers.etag}, expected ${widget.gzippedEtag}`);
  const revalidated = await rawGet(base, '/widget.js', { 'accept-encoding': 'gzip', 'if-none-match': widget.gzippedEtag });
  if (revalidated.status !== 304 || revalidated.body.length !== 0) problems.push(`GET /widget.js with If-None-Match answered ${revalidated.status}, ${revalidated.body.length} bytes`);
  return problems;
}

async function rawGet(base: string, route: string, headers: Record<string, string>): Promise<{ status: number; headers: Record<string, string>; body: Buffer }> {
  return new Promise((resolve, reject) => {
    const req = http.request(`${base}${route}`, { headers, timeout: REQUEST_TIMEOUT_MS }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers as Record<string, string>, body: Buffer.concat(chunks) }));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`${route} timed out`)));
    req.on('error', reject);
    req.end();
  });
}

// ---------------------------------------------------------------------------------------------
// Load

interface Target {
  key: TargetKey;
  label: string;
  path: string;
  expected: number;
  requests?: autocannon.Request[];
}

interface Row {
  label: string;
  expected: number;
  result: Result;
  /** Server CPU (user + system) per answer while measured, in microseconds. */
  cpuUsPerRequest: number | undefined;
  /** 2xx answers during the warm-up, which also write subscriptions. */
  warmupOk: number;
  problems: string[];
}

/** Everything but `expected` is a problem: another status, a socket error, a timeout. */
function unexpectedAnswers(result: Result, expected: number): string[] {
  const problems: string[] = [];
  const others = [...codesOf(result)].filter(([code]) => code !== String(expected));
  if (others.length > 0) problems.push(`answers other than ${expected}: ${others.map(([code, n]) => `${code}x${n}`).join(', ')}`);
  if (result.errors > 0) problems.push(`${result.errors} errors (${result.timeouts} timeouts)`);
  return problems;
}

async function measure(label: string, pid: number | undefined, url: string, expected: number, requests?: autocannon.Request[]): Promise<Row> {
  const problems: string[] = [];
  let warmupOk = 0;
  if (WARMUP > 0) {
    process.stdout.write(`  ${label}: warming up ${WARMUP} s ... `);
    const warm = await load(url, WARMUP, { connections: CONNECTIONS, requests });
    warmupOk = warm['2xx'];
    problems.push(...unexpectedAnswers(warm, expected).map((p) => `warm-up: ${p}`));
    process.stdout.write(`${Math.round(warm.requests.average)} req/s\n`);
  }
  process.stdout.write(`  ${label}: measuring ${DURATION} s ... `);
  const cpuBefore = cpuSeconds(pid);
  const result = await load(url, DURATION, { connections: CONNECTIONS, requests });
  const cpuAfter = cpuSeconds(pid);
  const answered = result['2xx'] + result.non2xx;
  const cpuUsPerRequest = cpuBefore !== undefined && cpuAfter !== undefined && answered > 0 ? ((cpuAfter - cpuBefore) * 1e6) / answered : undefined;
  process.stdout.write(`${Math.round(result.requests.average)} req/s\n`);
  problems.push(...unexpectedAnswers(result, expected));
  return { label, expected, result, cpuUsPerRequest, warmupOk, problems };
}

/**
 * Sign-ups as the widget sends them, each with an e-mail no request used before, so every 201 is
 * a new row. Counts what the check afterwards needs: sent, answered, and answered 201.
 */
function subscribeTraffic() {
  const tag = randomBytes(4).toString('hex');
  const ledger = { tag, sent: 0, answered: 0, created: 0, firstProblem: undefined as string | undefined };
  const requests: autocannon.Request[] = [
    {
      method: 'POST',
      path: SUBSCRIBE_PATH,
      headers: { 'content-type': 'application/json', origin: PAGE_ORIGIN },
      setupRequest: (request) => {
        ledger.sent++;
        return { ...request, body: JSON.stringify({ shop: SHOP, productId: PRODUCT, variantId: SOLD_OUT, email: `s${tag}-${ledger.sent}@example.com` }) };
      },
      onResponse: (status, body) => {
        ledger.answered++;
        if (status === 201) ledger.created++;
        else ledger.firstProblem ??= `${status} ${body.slice(0, 300)}`;
      },
    },
  ];
  return { requests, ledger };
}

type Ledger = ReturnType<typeof subscribeTraffic>['ledger'];

function targets(widget: WidgetAsset, subscribe: autocannon.Request[]): Target[] {
  const get = (headers: Record<string, string>): autocannon.Request[] => [{ method: 'GET', path: '/widget.js', headers }];
  const all: Target[] = [
    { key: 'availability', label: 'availability', path: AVAILABILITY_PATH, expected: 200, requests: [{ method: 'GET', path: AVAILABILITY_PATH, headers: { origin: PAGE_ORIGIN } }] },
    { key: 'widget', label: 'widget.js gzip', path: '/widget.js', expected: 200, requests: get({ 'accept-encoding': 'gzip' }) },
    { key: 'widget-304', label: 'widget.js 304', path: '/widget.js', expected: 304, requests: get({ 'accept-encoding': 'gzip', 'if-none-match': widget.gzippedEtag }) },
    { key: 'subscribe', label: 'subscribe', path: SUBSCRIBE_PATH, expected: 201, requests: subscribe },
  ];
  return all.filter((t) => SELECTED.has(t.key));
}

async function round(restock: RestockServer, list: Target[]): Promise<Row[]> {
  const rows: Row[] = [];
  const bare = await startBareServer();
  try {
    rows.push(await measure('bare GET /', bare.child.process.pid, bare.url, 200));
  } finally {
    const stopProblem = await stopChild(bare.child);
    if (stopProblem) rows[0]?.problems.push(stopProblem);
  }
  for (const target of list) rows.push(await measure(target.label, restock.child.process.pid, restock.base + target.path, target.expected, target.requests));
  return rows;
}

// ---------------------------------------------------------------------------------------------
// The write check, after Restock stopped

/**
 * Every 201 must be a stored row. A few more rows may be there: when a load phase ends,
 * autocannon closes its sockets with a request in flight on each, and Restock still commits
 * those; at most as many as were sent but never answered.
 */
function checkSubscriptions(dataDir: string, ledger: Ledger, counted: number): { checks: string[]; problems: string[] } {
  const driver = new SqliteDriver(path.join(dataDir, 'restock.db'), { readonly: true });
  let stored: { n: number; emails: number; agentless: number; variant: number };
  try {
    stored = driver
      .prepare(
        "select count(*) as n, count(distinct email) as emails, sum(agent_id is null) as agentless, sum(variant_id = ?) as variant " +
          "from subscriptions where store_domain = ? and product_id = ? and status = 'active' and email like ?",
      )
      .get(SOLD_OUT, SHOP, PRODUCT, `s${ledger.tag}-%`) as typeof stored;
  } finally {
    driver.close();
  }
  const unanswered = ledger.sent - ledger.answered;
  const extra = stored.n - ledger.created;
  const problems: string[] = [];
  if (ledger.created !== counted) problems.push(`the bench saw ${ledger.created} answers 201 but autocannon counted ${counted} 2xx`);
  if (extra < 0) problems.push(`LOST WRITES: ${-extra} subscriptions answered 201 are not stored`);
  if (extra > unanswered) problems.push(`${extra} unexplained rows (only ${unanswered} requests were unanswered)`);
  if (stored.emails !== stored.n) problems.push(`${stored.n - stored.emails} rows repeat an e-mail`);
  if (stored.agentless !== stored.n || stored.variant !== stored.n) problems.push('rows not in the shape of a shopper sign-up (agent or variant)');
  const checks = [
    `subscribe: ${stored.n} rows = ${ledger.created} answered 201 (warm-ups included) + ${extra} from the ${unanswered} requests cut off unanswered when a load phase ended`,
    problems.length === 0 ? `subscribe: OK, every 201 is a stored, active subscription of ${SHOP}, one per e-mail` : 'subscribe: CHECK FAILED, see below',
  ];
  if (ledger.firstProblem) checks.push(`subscribe: first answer other than 201: ${ledger.firstProblem}`);
  return { checks, problems };
}

// ---------------------------------------------------------------------------------------------
// Report

/** The widget as the server makes it at start-up, and what brotli would make of it. */
function widgetSizes(widget: WidgetAsset): string {
  const brotli = brotliCompressSync(widget.body, { params: { [zlibConstants.BROTLI_PARAM_QUALITY]: zlibConstants.BROTLI_MAX_QUALITY } });
  return `widget.js: ${widget.body.length} bytes minified (esbuild, es2019), ${widget.gzipped.length} gzip -9 (served), ${brotli.length} brotli q11 (not served)`;
}

function report(rows: Row[]): void {
  const baseline = rows[0]!.result.requests.average;
  printTable(
    ['target', 'req/s avg', 'p50 ms', 'p99 ms', 'answers', 'expected', 'errors', 'bytes/ans', 'CPU us/req', 'vs bare'],
    [16, 10, 7, 7, 9, 8, 7, 9, 10, 8],
    rows.map((r) => {
      const answers = r.result['2xx'] + r.result.non2xx;
      return [
        r.label,
        r.result.requests.average.toFixed(0),
        String(r.result.latency.p50),
        String(r.result.latency.p99),
        String(answers),
        String(r.expected),
        String(r.result.errors),
        answers > 0 ? (r.result.throughput.total / answers).toFixed(0) : 'n/a',
        r.cpuUsPerRequest === undefined ? 'n/a' : r.cpuUsPerRequest.toFixed(0),
        (r.result.requests.average / baseline).toFixed(2),
      ];
    }),
  );
  console.log('');
  for (const r of rows.slice(1)) console.log(`ratio ${r.label} / bare = ${(r.result.requests.average / baseline).toFixed(2)}`);
}

function jsonSummary(rounds: Row[][], widget: string, failed: boolean): string {
  const summary = rounds.map((rows) =>
    rows.map((r) => ({
      label: r.label,
      rps: Math.round(r.result.requests.average),
      p50: r.result.latency.p50,
      p99: r.result.latency.p99,
      answers: r.result['2xx'] + r.result.non2xx,
      cpuUsPerRequest: r.cpuUsPerRequest === undefined ? null : Math.round(r.cpuUsPerRequest),
      ratio: Number((r.result.requests.average / rows[0]!.result.requests.average).toFixed(3)),
    })),
  );
  return `BENCH_JSON ${JSON.stringify({ connections: CONNECTIONS, duration: DURATION, widget, rounds: summary, failed })}`;
}

// ---------------------------------------------------------------------------------------------

async function main(): Promise<number> {
  printSetting();
  console.log(
    `bench: storefront targets vs bare, ${CONNECTIONS} connections, ${WARMUP} s warm-up + ${DURATION} s measured per target, ` +
      `${ROUNDS} round${ROUNDS === 1 ? '' : 's'}, 127.0.0.1, SQLite FULL`,
  );
  // The same function the server calls at start-up, so the sizes are those of what it serves.
  const widget = await loadWidgetAsset();
  const sizes = widgetSizes(widget);
  console.log(`bench: ${sizes}`);

  process.stdout.write('  restock: store, store-bound agent, stock of 3 variants (1 sold out) ... ');
  const restock = await startRestock();
  process.stdout.write('done\n');
  const rounds: Row[][] = [];
  const problems: string[] = [];
  const checks: string[] = [];
  const { requests: subscribe, ledger } = subscribeTraffic();
  let stopped = false;
  try {
    problems.push(...(await checkAnswers(restock.base, widget)));
    const list = targets(widget, subscribe);
    for (let i = 1; i <= ROUNDS; i++) {
      if (ROUNDS > 1) console.log(`\nround ${i} of ${ROUNDS}`);
      const rows = await round(restock, list);
      rounds.push(rows);
      report(rows);
    }
    const stopProblem = await stopChild(restock.child);
    stopped = true;
    if (stopProblem) problems.push(stopProblem);
    if (SELECTED.has('subscribe')) {
      const counted = rounds.flat().filter((r) => r.label === 'subscribe').reduce((sum, r) => sum + r.warmupOk + r.result['2xx'], 0);
      const outcome = checkSubscriptions(restock.dataDir, ledger, counted);
      checks.push(...outcome.checks);
      problems.push(...outcome.problems);
    }
  } finally {
    if (!stopped) await stopChild(restock.child);
    await restock.drop();
  }

  for (const rows of rounds) for (const r of rows) problems.push(...r.problems.map((p) => `${r.label}: ${p}`));
  printMedianRatios(rounds);
  printChecks(checks);
  if (process.env.BENCH_JSON === '1') console.log(jsonSummary(rounds, sizes, problems.length > 0));
  return exitCodeFor(problems);
}

runMain(main);
