/**
 * What a shopper's click on an alert costs the service: GET /r/{domain}/{token}, the signed link
 * of every alert e-mail, answered 302 to the product page with the store's UTM parameters, as a
 * ratio against a bare Fastify route (bench/bare-server.ts) loaded the same way in the same run.
 * See docs/performance.md, "Alert click redirect".
 *
 *   npm run bench:click
 *   BENCH_ROUNDS=3 BENCH_DURATION=8 npm run bench:click
 *
 * Targets, in this order per round, against one Restock server (`restock serve`, SQLite FULL,
 * RUN_WORKER=false, LOG_LEVEL=warn, in a fresh temporary DATA_DIR):
 *
 * 1. first clicks: a browser's user agent walking the links of alerts nobody clicked yet, one
 *    after the other, so each answer records the alert's first click (a durable insert).
 * 2. repeat clicks: a browser again, round-robin over links clicked before; each request still
 *    tries the insert, which finds the click there and changes nothing.
 * 3. scanner: the same links fetched by a link scanner's user agent, which is not a click, so
 *    nothing is written: the redirect's reads alone.
 *
 * The alerts are ledger rows with status 'sent' inserted directly through the database (no
 * mail is sent), for a product whose stock and page address were reported through the API by
 * an agent the owner claimed for the store. Their links come from the service itself
 * (`app.restock.conversions.clickUrl`), built in this process on the same database before the
 * server starts, so both sign with the service secret kept there.
 *
 * Settings: BENCH_DURATION (seconds measured per target, default 10), BENCH_WARMUP (default 2),
 * BENCH_CONNECTIONS (default 50), BENCH_ROUNDS (default 1), BENCH_ALERTS (sent alerts to seed,
 * default 150,000: enough that the first-click walk never comes back to a clicked link),
 * BENCH_REPEAT_LINKS (already clicked links the repeat and scanner targets go round, default
 * 5,000), BENCH_JSON=1. The run fails (exit 1) on any answer but a 302 to the product page, on
 * socket errors or timeouts, and when the clicks table, read after the server stopped, does not
 * hold exactly one row per link the first-click walk reached.
 */
import path from 'node:path';
import type autocannon from 'autocannon';
import SqliteDriver from 'better-sqlite3';
import { buildApp } from '../src/app.ts';
import { loadConfig } from '../src/config.ts';
import { Database } from '../src/core/db/database.ts';
import type { NotificationsTable } from '../src/core/db/schema.ts';
import { baseUrl, freePort, restockEnv, startServer, startBareServer, stopChild, type Child } from './lib.ts';
import { exitCodeFor, guardProcess, intSetting, measureLoad, printChecks, printMedianRatios, printSetting, printTable, restockCli, runMain, sqliteScratch, type LoadRow } from './lib.ts';

const DURATION = intSetting('BENCH_DURATION', 10, 1, 600);
const WARMUP = intSetting('BENCH_WARMUP', 2, 0, 60);
const CONNECTIONS = intSetting('BENCH_CONNECTIONS', 50, 1, 1000);
const ROUNDS = intSetting('BENCH_ROUNDS', 1, 1, 20);
const ALERTS = intSetting('BENCH_ALERTS', 150_000, 1000, 2_000_000);
const REPEAT_LINKS = intSetting('BENCH_REPEAT_LINKS', 5000, 1, 100_000);
guardProcess((ROUNDS * (4 * (WARMUP + DURATION) + 60) + 180) * 1000);

const SHOP = 'bench-clicks.myshopify.com';
const OWNER = 'owner@example.com';
const PRODUCT = 'gid://shopify/Product/8001';
const VARIANT = 'gid://shopify/ProductVariant/80011';
const PRODUCT_URL = `https://${SHOP}/products/bench-mug`;
const BROWSER = 'Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1';
const SCANNER = 'Mozilla/5.0 (compatible; Barracuda Sentinel (EE))';
const SEED_BATCH = 500;

// ---------------------------------------------------------------------------------------------
// Set-up, in this process, before the server starts: the product, the sent alerts, their links

async function claimedAgentToken(app: Awaited<ReturnType<typeof buildApp>>, database: Database): Promise<string> {
  const ask = async (url: string, payload: unknown, status: number) => {
    const res = await app.inject({ method: 'POST', url, payload: payload as Record<string, unknown> });
    if (res.statusCode !== status) throw new Error(`${url} answered ${res.statusCode}: ${res.body.slice(0, 300)}`);
    return res.json();
  };
  const registered = await ask('/api/agent/register', { type: 'anonymous' }, 201);
  await ask('/api/agent/claim', { claim_token: registered.claim_token, email: OWNER, store: SHOP }, 200);
  const mail = await database.db.selectFrom('mail_outbox').select('text_body').where('recipient', '=', OWNER).orderBy('created_at', 'desc').executeTakeFirst();
  const otp = mail && /code: (\d{6})/.exec(mail.text_body)?.[1];
  if (!otp) throw new Error(`no claim code mailed to ${OWNER}`);
  return (await ask('/api/agent/claim', { claim_token: registered.claim_token, otp }, 200)).credential;
}

/** Zero-padded, so the ids sort as the alerts' numbers do. */
const alertId = (n: number) => `ntf_bench${String(n).padStart(10, '0')}`;

function sentNotification(n: number, sentAt: string): NotificationsTable {
  const id = alertId(n);
  const email = `shopper-${n}@example.com`;
  return {
    id, restock_id: 'rst_bench', subscription_id: `sub_bench${n}`, store_domain: SHOP, email, email_key: email, product_id: PRODUCT, variant_id: VARIANT,
    batch: Math.floor(n / 100), position: n % 100, status: 'sent', reason: 'Back in stock', outcome: '250 2.0.0 Ok: queued', attempts: 1,
    next_attempt_at: sentAt, lease_owner: null, lease_until: null, created_at: sentAt, sent_at: sentAt, locale: null, held_by_plan: 0, third_party: 0,
    kind: 'alert', reminder_of: null, channel: 'email', contact_point_id: null, provider_ref: null, delivery_status: null,
  };
}

/** Reports the product's stock and page through the API, inserts the sent alerts, and returns their links' paths. */
async function seed(env: NodeJS.ProcessEnv): Promise<string[]> {
  // Quieter than the server: the set-up's app would warn about payment offers nobody takes here.
  const config = loadConfig({ ...env, LOG_LEVEL: 'error' });
  const database = Database.open(config.database);
  const app = await buildApp(config, database);
  try {
    const token = await claimedAgentToken(app, database);
    const items = [{ productId: PRODUCT, variantId: VARIANT, available: 5, productTitle: 'Bench mug', productUrl: PRODUCT_URL }];
    const report = await app.inject({ method: 'POST', url: `/api/v1/stores/${SHOP}/inventory`, headers: { authorization: `Bearer ${token}` }, payload: { items } });
    if (report.statusCode !== 200) throw new Error(`inventory report answered ${report.statusCode}: ${report.body.slice(0, 300)}`);
    const sentAt = new Date(Date.now() - 3600_000).toISOString();
    for (let start = 0; start < ALERTS; start += SEED_BATCH) {
      const rows = Array.from({ length: Math.min(SEED_BATCH, ALERTS - start) }, (_, i) => sentNotification(start + i, sentAt));
      await database.write((trx) => trx.insertInto('notifications').values(rows).execute());
    }
    return Array.from({ length: ALERTS }, (_, n) => new URL(app.restock.conversions.clickUrl(SHOP, sentNotification(n, sentAt).id)).pathname);
  } finally {
    await app.close();
    await database.close();
  }
}

// ---------------------------------------------------------------------------------------------
// Traffic

/** Answers under load, beyond autocannon's counts: where each 302 pointed. */
interface Tally {
  sent: number;
  answered: number;
  landed: number;
  firstProblem?: string;
}

/** GETs of `paths` in turn with that user agent; `walk` keeps its place across calls (the first-click walk goes on from one phase to the next). */
function linkTraffic(paths: string[], userAgent: string, walk = { next: 0 }): { requests: autocannon.Request[]; tally: Tally; walk: { next: number } } {
  const tally: Tally = { sent: 0, answered: 0, landed: 0 };
  const requests: autocannon.Request[] = [
    {
      method: 'GET',
      headers: { 'user-agent': userAgent, accept: 'text/html' },
      setupRequest: (request) => {
        tally.sent++;
        return { ...request, path: paths[walk.next++ % paths.length]! };
      },
      onResponse: (status, _body, _context, headers) => {
        tally.answered++;
        const location = (headers as Record<string, string> | undefined)?.location ?? '';
        if (status === 302 && location.startsWith(`${PRODUCT_URL}?`)) tally.landed++;
        else tally.firstProblem ??= `${status} location ${location}`;
      },
    },
  ];
  return { requests, tally, walk };
}

/** Links clicked before, by a browser again and by a link scanner. */
function revisitTraffic(clicked: string[]) {
  if (clicked.length === 0) throw new Error('the first-click walk answered too few requests to revisit any link');
  return { count: clicked.length, repeat: linkTraffic(clicked, BROWSER), scanner: linkTraffic(clicked, SCANNER) };
}

type Row = LoadRow;

function measure(label: string, pid: number | undefined, url: string, expected: number, requests?: autocannon.Request[]): Promise<Row> {
  return measureLoad(label, pid, url, expected, { warmup: WARMUP, duration: DURATION, connections: CONNECTIONS, ...(requests ? { requests } : {}) });
}

function report(rows: Row[]): void {
  const baseline = rows[0]!.result.requests.average;
  printTable(
    ['target', 'req/s avg', 'p50 ms', 'p99 ms', 'answers', 'errors', 'CPU us/req', 'vs bare'],
    [16, 10, 7, 7, 9, 7, 10, 8],
    rows.map((r) => [
      r.label,
      r.result.requests.average.toFixed(0),
      String(r.result.latency.p50),
      String(r.result.latency.p99),
      String(r.result['2xx'] + r.result.non2xx),
      String(r.result.errors),
      r.cpuUsPerRequest === undefined ? 'n/a' : r.cpuUsPerRequest.toFixed(0),
      (r.result.requests.average / baseline).toFixed(2),
    ]),
  );
}

// ---------------------------------------------------------------------------------------------
// The check afterwards: one click row per link the first-click walk reached, none from the others

/**
 * Links past the first `revisited` were requested by the first-click walk alone, so their rows
 * are its own: one per link it reached (less at most the requests cut off unanswered). The rows
 * of all links tell the same for the walk with the revisits, which must add none.
 */
function checkClicks(dataDir: string, walk: { next: number }, revisited: number, first: Tally, tallies: Tally[]): { checks: string[]; problems: string[] } {
  const driver = new SqliteDriver(path.join(dataDir, 'restock.db'), { readonly: true });
  let clicks: { all: number; walkOnly: number };
  try {
    clicks = driver
      .prepare('select count(*) as "all", coalesce(sum(notification_id >= ?), 0) as walkOnly from alert_clicks where store_domain = ?')
      .get(alertId(revisited), SHOP) as typeof clicks;
  } finally {
    driver.close();
  }
  const problems: string[] = [];
  const reached = Math.min(walk.next, ALERTS);
  const unanswered = first.sent - first.answered;
  if (walk.next > ALERTS) problems.push(`the first-click walk went round (${walk.next} requests for ${ALERTS} alerts): raise BENCH_ALERTS`);
  const within = (n: number, links: number) => n <= links && n >= links - unanswered;
  if (!within(clicks.walkOnly, reached - revisited)) problems.push(`${clicks.walkOnly} click rows for the ${reached - revisited} links only the first-click walk requested`);
  if (!within(clicks.all, reached)) problems.push(`${clicks.all} click rows for the ${reached} links requested by browsers`);
  for (const t of [first, ...tallies]) if (t.answered !== t.landed) problems.push(`${t.answered - t.landed} answers did not land on the product: ${t.firstProblem}`);
  return {
    checks: [`clicks: ${clicks.all} rows for the ${reached} links requested by browsers (${unanswered} requests cut off unanswered when a phase ended); ${clicks.walkOnly} of them for the ${reached - revisited} links only the first-click walk requested`],
    problems,
  };
}

// ---------------------------------------------------------------------------------------------

async function main(): Promise<number> {
  printSetting();
  console.log(`bench: alert click redirect vs bare, ${CONNECTIONS} connections, ${WARMUP} s warm-up + ${DURATION} s measured per target, ${ROUNDS} round(s), 127.0.0.1, SQLite FULL`);
  const database = sqliteScratch('restock-bench-click', 'FULL');
  const dataDir = database.env.DATA_DIR!;
  const problems: string[] = [];
  const checks: string[] = [];
  const rounds: Row[][] = [];
  let restock: Child | undefined;
  try {
    const port = await freePort();
    const env = restockEnv(port, { ...database.env, RUN_WORKER: 'false' });
    await restockCli(['store', 'create', SHOP, '--owner', OWNER], env);
    process.stdout.write(`  restock: store, claimed agent, product page, ${ALERTS} sent alerts and their links ... `);
    const started = Date.now();
    const paths = await seed(env);
    process.stdout.write(`${((Date.now() - started) / 1000).toFixed(1)} s\n`);
    restock = await startServer('restock', [path.join('bin', 'restock.js'), 'serve'], env, port, '/api/health');
    const base = baseUrl(port);

    const walk = { next: 0 };
    const first = linkTraffic(paths, BROWSER, walk);
    let revisits: ReturnType<typeof revisitTraffic> | undefined;
    for (let i = 1; i <= ROUNDS; i++) {
      if (ROUNDS > 1) console.log(`\nround ${i} of ${ROUNDS}`);
      const bare = await startBareServer();
      const rows: Row[] = [];
      try {
        rows.push(await measure('bare GET /', bare.child.process.pid, bare.url, 200));
      } finally {
        const stopProblem = await stopChild(bare.child);
        if (stopProblem) problems.push(stopProblem);
      }
      const pid = restock.process.pid;
      rows.push(await measure('first clicks', pid, base, 302, first.requests));
      // Links every one of which was answered (at most one request per connection is in flight).
      revisits ??= revisitTraffic(paths.slice(0, Math.min(REPEAT_LINKS, walk.next - CONNECTIONS)));
      rows.push(await measure('repeat clicks', pid, base, 302, revisits.repeat.requests));
      rows.push(await measure('scanner', pid, base, 302, revisits.scanner.requests));
      rounds.push(rows);
      report(rows);
    }
    const stopProblem = await stopChild(restock);
    restock = undefined;
    if (stopProblem) problems.push(stopProblem);
    const outcome = checkClicks(dataDir, walk, revisits?.count ?? 0, first.tally, revisits ? [revisits.repeat.tally, revisits.scanner.tally] : []);
    checks.push(...outcome.checks);
    problems.push(...outcome.problems);
  } finally {
    if (restock) await stopChild(restock);
    await database.drop();
  }
  for (const rows of rounds) for (const r of rows) problems.push(...r.problems.map((p) => `${r.label}: ${p}`));
  printMedianRatios(rounds);
  printChecks(checks);
  if (process.env.BENCH_JSON === '1') {
    const summary = rounds.map((rows) => rows.map((r) => ({ label: r.label, rps: Math.round(r.result.requests.average), p50: r.result.latency.p50, p99: r.result.latency.p99, cpuUsPerRequest: r.cpuUsPerRequest === undefined ? null : Math.round(r.cpuUsPerRequest), ratio: Number((r.result.requests.average / rows[0]!.result.requests.average).toFixed(3)) })));
    console.log(`BENCH_JSON ${JSON.stringify({ connections: CONNECTIONS, duration: DURATION, alerts: ALERTS, rounds: summary, failed: problems.length > 0 })}`);
  }
  return exitCodeFor(problems);
}

runMain(main);
