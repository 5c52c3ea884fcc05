/**
 * What metrics and tracing cost on the write path: POST /api/v1/alerts/subscribe with a registered
 * agent's bearer token, against servers that differ in one setting, loaded in turns in one run.
 *
 *   metrics: METRICS_TOKEN set and /metrics scraped every second  vs  neither
 *   tracing: OTEL_EXPORTER_OTLP_ENDPOINT at a sink in this process  vs  unset
 *
 *   node --import tsx bench/metrics.ts                        SQLite (embedded default, FULL)
 *   BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432 node --import tsx bench/metrics.ts
 *                                                             also PostgreSQL
 *
 * The figure is the ratio req/s on ÷ off per pair (aim: ≥ 0.97 for metrics). Both servers of a
 * pair run `restock serve` from the same environment but for that setting, each on a fresh
 * database, and take the load in slices in the order A B B A ... (see bench/auth.ts for why).
 *
 * Settings: BENCH_DURATION (seconds measured per side, default 10), BENCH_SLICE (default 1),
 * BENCH_WARMUP (default 2), BENCH_CONNECTIONS (default 50), BENCH_ROUNDS (default 3; the median
 * ratio is the result), BENCH_PAIRS (metrics,tracing), BENCH_SQLITE=0 (PostgreSQL only).
 * The run fails on any non-2xx answer, socket error or timeout, a failed scrape, a tracing side
 * whose spans never reached the sink, or a subscription acknowledged but not stored.
 */
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import type autocannon from 'autocannon';
import { loadConfig } from '../src/config.ts';
import { Database } from '../src/core/db/database.ts';
import { baseUrl, codesOf, cpuSeconds, dialectsSetting, exitCodeFor, expectStatus, freePort, guardProcess, intSetting, load, median, outcomeOf, pgSetting, postgresScratch, printSetting, printTable } from './lib.ts';
import { problemsOf, requestJson, restockCli, restockEnv, runMain, sqliteScratch, startServer, stopChild, SUBSCRIBE_PATH } from './lib.ts';
import type { Child, Outcome, ScratchDatabase } from './lib.ts';

type Pair = 'metrics' | 'tracing';
type Dialect = 'sqlite' | 'postgres';

const DURATION = intSetting('BENCH_DURATION', 10, 1, 600);
const WARMUP = intSetting('BENCH_WARMUP', 2, 0, 60);
const CONNECTIONS = intSetting('BENCH_CONNECTIONS', 50, 1, 1000);
const SLICE = intSetting('BENCH_SLICE', 1, 1, 600);
const ROUNDS = intSetting('BENCH_ROUNDS', 3, 1, 20);
const PG_ADMIN = pgSetting();
const DIALECTS: Dialect[] = dialectsSetting(PG_ADMIN);
const PAIRS = (process.env.BENCH_PAIRS ?? 'metrics,tracing').split(',').filter((p): p is Pair => p === 'metrics' || p === 'tracing');
const METRICS_TOKEN = 'bench-metrics-token-0123456789abcdef';
/**
 * The agent is one the store's owner claimed for the store: an unbound agent may hold only a few
 * waiting subscriptions per store, which a run would exhaust in its first second.
 */
const SHOP = 'bench-metrics.myshopify.com';
const OWNER = 'owner@bench-metrics.example.com';

guardProcess(ROUNDS * DIALECTS.length * PAIRS.length * 2 * (WARMUP + DURATION + 60) * 1000);

interface Row extends Outcome {
  label: string;
  on: boolean;
  ok: number;
  seconds: number;
  warmupOk: number;
  /** Server CPU (user + system) while measured; undefined where /proc cannot tell. */
  cpuSeconds: number | undefined;
  problems: string[];
  checks: string[];
}

interface Running {
  child: Child;
  base: string;
  requests: autocannon.Request[];
  ledger: { ok: number; ids: Set<string>; firstProblem: string | undefined };
  row: Row;
  database: ScratchDatabase;
  scraper?: Scraper;
}

/** Where the tracing side's spans go: accepts every OTLP/HTTP post and counts it. */
interface Sink {
  url: string;
  posts: number;
  bytes: number;
  close(): Promise<void>;
}

async function startSink(): Promise<Sink> {
  const sink = { posts: 0, bytes: 0 } as Sink;
  const server = http.createServer((req, res) => {
    req.on('data', (chunk: Buffer) => (sink.bytes += chunk.length));
    req.on('end', () => {
      sink.posts++;
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  sink.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  sink.close = () => new Promise<void>((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  });
  return sink;
}

/** A Prometheus server's habit, once a second: GET /metrics with the token. */
interface Scraper {
  scrapes: number;
  failures: string[];
  stop(): void;
}

function startScraper(base: string): Scraper {
  const scraper: Scraper = { scrapes: 0, failures: [], stop: () => clearInterval(timer) };
  const timer = setInterval(() => {
    fetch(`${base}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` }, signal: AbortSignal.timeout(5000) }).then(
      async (res) => {
        const body = await res.text();
        if (res.status === 200 && body.includes('restock_http_request_duration_seconds_count')) scraper.scrapes++;
        else scraper.failures.push(`scrape answered ${res.status}`);
      },
      (err: unknown) => scraper.failures.push(`scrape failed: ${String(err)}`),
    );
  }, 1000);
  return scraper;
}

const rps = (row: Row) => row.ok / row.seconds;
const cpuUsPerRequest = (row: Row) => (row.cpuSeconds === undefined || row.ok === 0 ? undefined : (row.cpuSeconds * 1e6) / row.ok);

async function startSide(dialect: Dialect, pair: Pair, on: boolean, sink: Sink): Promise<Running> {
  const label = `${dialect} ${pair} ${on ? 'on' : 'off'}`;
  const database = dialect === 'sqlite' ? sqliteScratch('restock-bench-metrics', 'FULL') : await postgresScratch(PG_ADMIN!, 'restock_bench_metrics');
  const setting = pair === 'metrics' ? { METRICS_TOKEN: on ? METRICS_TOKEN : '' } : { OTEL_EXPORTER_OTLP_ENDPOINT: on ? sink.url : '' };
  const port = await freePort();
  const env = restockEnv(port, { ...database.env, METRICS_TOKEN: '', METRICS_PORT: '', OTEL_EXPORTER_OTLP_ENDPOINT: '', RUN_WORKER: 'false', ...setting });
  await restockCli(['migrate'], env);
  await restockCli(['store', 'create', SHOP, '--owner', OWNER], env);
  const child = await startServer(label, [path.join('bin', 'restock.js'), 'serve'], env, port, '/api/health');
  const base = baseUrl(port);
  let token: string;
  try {
    token = await claimedAgentToken(base, env);
  } catch (err) {
    await stopChild(child);
    throw err;
  }
  const row: Row = { label, on, ok: 0, seconds: 0, warmupOk: 0, cpuSeconds: 0, non2xx: 0, statusCodes: new Map(), errors: 0, timeouts: 0, mismatches: 0, problems: [], checks: [] };
  return { child, base, ...subscribeTraffic(token), row, database, ...(pair === 'metrics' && on ? { scraper: startScraper(base) } : {}) };
}

/** An agent the owner claimed for the store, the claim code read from the local outbox. */
async function claimedAgentToken(base: string, env: NodeJS.ProcessEnv): Promise<string> {
  const registered = expectStatus('agent registration', await requestJson(base, 'POST', '/api/agent/register', { type: 'anonymous' }), 201);
  expectStatus('claim code request', await requestJson(base, 'POST', '/api/agent/claim', { claim_token: registered.claim_token, email: OWNER, store: SHOP }), 200);
  const database = Database.open(loadConfig(env).database);
  try {
    const mail = await database.db.selectFrom('mail_outbox').select('text_body').where('recipient', '=', OWNER).orderBy('created_at', 'desc').executeTakeFirst();
    const otp = mail && /code: (\d{6})/.exec(mail.text_body)?.[1];
    if (!otp) throw new Error(`no claim code mailed to ${OWNER}`);
    return expectStatus('claim', await requestJson(base, 'POST', '/api/agent/claim', { claim_token: registered.claim_token, otp }), 200).credential;
  } finally {
    await database.close();
  }
}

/** Authenticated subscribes, each for a new address, and the ids acknowledged. */
function subscribeTraffic(token: string): Pick<Running, 'requests' | 'ledger'> {
  const tag = randomBytes(4).toString('hex');
  const ledger: Running['ledger'] = { ok: 0, ids: new Set(), firstProblem: undefined };
  let sent = 0;
  const requests: autocannon.Request[] = [
    {
      method: 'POST',
      path: SUBSCRIBE_PATH,
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      setupRequest: (request) => ({ ...request, body: JSON.stringify({ productId: 'gid://shopify/Product/123', variantId: 'gid://shopify/ProductVariant/456', email: `m${tag}-${++sent}@example.com` }) }),
      onResponse: (status, body) => {
        if (status < 200 || status > 299) {
          ledger.firstProblem ??= `${status} ${body.slice(0, 300)}`;
          return;
        }
        ledger.ok++;
        const id = (JSON.parse(body) as { subscriptionId?: string }).subscriptionId;
        if (id) ledger.ids.add(id);
      },
    },
  ];
  return { requests, ledger };
}

async function slice(s: Running, seconds: number, warm: boolean): Promise<void> {
  const cpuBefore = cpuSeconds(s.child.process.pid);
  const result = await load(s.base + SUBSCRIBE_PATH, seconds, { connections: CONNECTIONS, requests: s.requests });
  const cpuAfter = cpuSeconds(s.child.process.pid);
  if (warm) {
    s.row.warmupOk += result['2xx'];
    s.row.problems.push(...problemsOf(outcomeOf(result)).map((p) => `warm-up: ${p}`));
    return;
  }
  s.row.seconds += result.duration;
  s.row.cpuSeconds = cpuBefore === undefined || cpuAfter === undefined || s.row.cpuSeconds === undefined ? undefined : s.row.cpuSeconds + (cpuAfter - cpuBefore);
  s.row.ok += result['2xx'];
  s.row.non2xx += result.non2xx;
  for (const [code, n] of codesOf(result)) s.row.statusCodes.set(code, (s.row.statusCodes.get(code) ?? 0) + n);
  s.row.errors += result.errors;
  s.row.timeouts += result.timeouts;
  s.row.mismatches += result.mismatches;
}

async function measurePair(dialect: Dialect, pair: Pair, onFirst: boolean): Promise<Row[]> {
  const sink = await startSink();
  const sides: Running[] = [];
  try {
    for (const on of onFirst ? [true, false] : [false, true]) sides.push(await startSide(dialect, pair, on, sink));
    for (const s of sides) if (WARMUP > 0) await slice(s, WARMUP, true);
    const turns = Math.ceil(DURATION / SLICE) * 2;
    process.stdout.write(`  ${dialect} ${pair}: ${turns} slices of ${SLICE} s, alternating ... `);
    for (let turn = 0; turn < turns; turn++) await slice(sides[turn % 4 === 0 || turn % 4 === 3 ? 0 : 1]!, SLICE, false);
    process.stdout.write(sides.map((s) => `${s.row.on ? 'on' : 'off'} ${Math.round(rps(s.row))} req/s`).join(', ') + '\n');
    for (const s of sides) s.row.problems.push(...problemsOf(s.row));
  } finally {
    for (const s of sides) {
      s.scraper?.stop();
      const stopProblem = await stopChild(s.child);
      if (stopProblem) s.row.problems.push(stopProblem);
      const stored = new Set((await s.database.readRows()).map((r) => r.id));
      const lost = [...s.ledger.ids].filter((id) => !stored.has(id)).length;
      s.row.checks.push(`${s.row.label}: ${s.ledger.ids.size} acknowledged subscriptions, ${lost} of them not stored`);
      if (lost > 0) s.row.problems.push(`LOST WRITES: ${lost} acknowledged subscriptions are not stored`);
      if (s.ledger.firstProblem) s.row.problems.push(`first non-2xx answer: ${s.ledger.firstProblem}`);
      if (s.scraper) {
        s.row.checks.push(`${s.row.label}: ${s.scraper.scrapes} scrapes of /metrics during the run`);
        s.row.problems.push(...s.scraper.failures.slice(0, 5));
        if (s.scraper.scrapes === 0) s.row.problems.push('no scrape succeeded');
      }
      if (pair === 'tracing' && s.row.on) {
        s.row.checks.push(`${s.row.label}: the sink took ${sink.posts} OTLP posts, ${(sink.bytes / 1e6).toFixed(1)} MB`);
        if (sink.posts === 0) s.row.problems.push('no spans reached the sink');
      }
      await s.database.drop();
    }
    await sink.close();
  }
  return sides.map((s) => s.row);
}

function ratioOf(rows: Row[]): number | undefined {
  const on = rows.find((r) => r.on);
  const off = rows.find((r) => !r.on);
  return on && off ? rps(on) / rps(off) : undefined;
}

async function main(): Promise<number> {
  printSetting();
  console.log(
    `bench: subscribeAlert with ${PAIRS.join(' and ')} on vs off, ${DIALECTS.join(' and ')}, ${CONNECTIONS} connections, ` +
      `${WARMUP} s warm-up + ${DURATION} s measured per server in ${SLICE} s slices, ${ROUNDS} round${ROUNDS === 1 ? '' : 's'}`,
  );
  const ratios = new Map<string, number[]>();
  /** CPU per request off ÷ on: what throughput would be on a machine nothing else loads. */
  const cpuRatios = new Map<string, number[]>();
  const problems: string[] = [];
  for (let i = 1; i <= ROUNDS; i++) {
    console.log(`\nround ${i} of ${ROUNDS}`);
    const rows: Row[] = [];
    for (const dialect of DIALECTS) {
      for (const pair of PAIRS) {
        const pairRows = await measurePair(dialect, pair, i % 2 === 1);
        rows.push(...pairRows);
        const ratio = ratioOf(pairRows);
        const [on, off] = [pairRows.find((r) => r.on), pairRows.find((r) => !r.on)].map((r) => (r ? cpuUsPerRequest(r) : undefined));
        if (on !== undefined && off !== undefined) cpuRatios.set(`${dialect} ${pair}`, [...(cpuRatios.get(`${dialect} ${pair}`) ?? []), off / on]);
        const key = `${dialect} ${pair}`;
        if (ratio !== undefined) ratios.set(key, [...(ratios.get(key) ?? []), ratio]);
      }
    }
    printTable(['server', 'req/s', 'CPU us/req', '2xx', 'non-2xx', 'errors'], [24, 8, 10, 9, 8, 7], rows.map((r) => [r.label, rps(r).toFixed(0), cpuUsPerRequest(r)?.toFixed(0) ?? 'n/a', String(r.ok), String(r.non2xx), String(r.errors)]));
    for (const r of rows) for (const c of r.checks) console.log(`  ${c}`);
    problems.push(...rows.flatMap((r) => r.problems.map((p) => `${r.label}: ${p}`)));
  }
  console.log(`\nmedian ratios over ${ROUNDS} round${ROUNDS === 1 ? '' : 's'} (req/s on ÷ off):`);
  for (const [key, values] of ratios) console.log(`  ${key}: ${median(values).toFixed(3)} (${values.map((v) => v.toFixed(3)).join(', ')})`);
  console.log('median CPU per request off ÷ on (less sensitive to other load on the machine):');
  for (const [key, values] of cpuRatios) console.log(`  ${key}: ${median(values).toFixed(3)} (${values.map((v) => v.toFixed(3)).join(', ')})`);
  return exitCodeFor(problems);
}

runMain(main);
