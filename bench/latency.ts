/**
 * Restock-to-alert latency under load: from the inventory report that brings a variant back in
 * stock to its one waiting shopper's alert arriving at a real SMTP server, while other shoppers
 * subscribe at a steady rate. Aims: p50 under 1 s, p99 under 5 s, with 200 subscribes/s running.
 *
 *   npm run bench:latency                          Restock on SQLite (FULL)
 *   BENCH_RESTOCKS=10 npm run bench:latency        a quick check
 *   BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432 npm run bench:latency
 *                                                  also PostgreSQL, in a database made and dropped here
 *
 * Settings: BENCH_RESTOCKS (measured restocks per database, default 40), BENCH_RATE (background
 * subscribes per second, default 200), BENCH_WARMUP (seconds of background load before the first
 * restock, default 2), BENCH_WARMUP_RESTOCKS (restocks before the measured ones, timed but not
 * counted, default 1), BENCH_PAUSE_MS (between one restock's alert and the next restock's
 * subscribe, default 250), BENCH_ALERT_TIMEOUT (seconds a restock's alert may take, default 30),
 * BENCH_SQLITE=0 (PostgreSQL only), BENCH_JSON=1 (one machine-readable summary line). The
 * service's own settings (DISPATCH_POLL_MS, SMTP_POOL_SIZE, ...) pass through from the
 * environment; the run prints the poll interval it ran with.
 *
 * Processes, all on 127.0.0.1: the SMTP sink (bench/fanout-sink.ts, as bench/fanout.ts runs it)
 * and, per database, `restock serve` with its dispatch worker inside on a fresh database, its
 * SMTP_URL the sink and METRICS_TOKEN set. The bench creates the store with `restock store
 * create` and claims a store-bound agent through the API (the claim code read at the sink), as
 * bench/fanout.ts does. Then, with the agent's bearer token:
 *
 * - Background load: POST /api/v1/alerts/subscribe at BENCH_RATE requests/s, paced by a timer
 *   (one request every 1/rate s, not autocannon's bursts at the start of each second), each a new
 *   e-mail on one of a few products no run ever restocks. Every answer must be 2xx; the rate
 *   achieved while the measured restocks ran (over the whole load when they took under 2 s)
 *   must be within 10% of the asked rate.
 * - Restocks, one after another: one shopper (a new e-mail) subscribes to a variant never
 *   reported before; the clock starts when POST /api/v1/stores/:domain/inventory reports that
 *   variant in stock (the body bench/fanout.ts sends) and stops at the moment the sink received
 *   the message to that shopper (the sink's own clock: its phase figures give the last arrival,
 *   which is that message when nothing else came; else the moment the bench heard of it).
 *
 * Afterwards the sink must have received exactly one message per restock, each to its shopper,
 * and nothing else; /metrics is read for the service's own restock-to-first-alert histogram
 * (count, and p50 / p99 estimated from its buckets as Prometheus' histogram_quantile does) and
 * its count of alerts sent. Anything else fails the run (exit 1). The aims are reported, not
 * enforced.
 */
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import type { PhaseStats, SinkEvent } from './fanout-sink.ts';
import { dialectsSetting, exitCodeFor, guardProcess, intSetting, pgSetting, runMain } from './lib.ts';
import { baseUrl, freePort, HOST, restockEnv, startServer, stopChild, SUBSCRIBE_PATH, type Child } from './lib.ts';
import { postgresScratch, sqliteScratch, type ScratchDatabase } from './lib.ts';
import { percentile, printChecks, printSetting, printTable, restockCli } from './lib.ts';
import { expectStatus, requestJson } from './lib.ts';
import { claimStoreAgent, startIpcChild, stopIpcChild, type IpcChild, type SinkControl } from './ipc-child.ts';

// ---------------------------------------------------------------------------------------------
// Settings

type Dialect = 'sqlite' | 'postgres';

const RESTOCKS = intSetting('BENCH_RESTOCKS', 40, 1, 1000);
const RATE = intSetting('BENCH_RATE', 200, 1, 5000);
const WARMUP_S = intSetting('BENCH_WARMUP', 2, 0, 60);
const WARMUP_RESTOCKS = intSetting('BENCH_WARMUP_RESTOCKS', 1, 0, 20);
const PAUSE_MS = intSetting('BENCH_PAUSE_MS', 250, 0, 10_000);
const ALERT_TIMEOUT_S = intSetting('BENCH_ALERT_TIMEOUT', 30, 1, 600);
const PG_ADMIN = pgSetting();
const DIALECTS: Dialect[] = dialectsSetting(PG_ADMIN);

/** The achieved background rate may fall this far below (or rise above) the asked one. */
const RATE_TOLERANCE = 0.1;
/** The shortest restock window whose own rate is checked; a shorter one is checked over the whole load. */
const MIN_RATE_WINDOW_S = 2;
/** Subscribes in flight at most; past it the load falls behind (and the rate check says so). */
const MAX_IN_FLIGHT = 256;
const SUBSCRIBE_TIMEOUT_MS = 10_000;
/** After the last alert, how long a duplicate gets to show up before the sink's figures are read. */
const SETTLE_MS = 2000;
/** The aims: p50 and p99 of restock report → first alert at the mail server. */
const AIM_P50_MS = 1000;
const AIM_P99_MS = 5000;

const DOMAIN = 'latency-bench.myshopify.com';
const OWNER = 'owner@latency-bench.example';
const SECRET = 'latency-bench-secret-0123456789abcdef01234567';
const METRICS_TOKEN = 'latency-bench-metrics-token-0123456789abcdef';
const HISTOGRAM = 'restock_restock_to_first_alert_seconds';
const TAG = randomBytes(3).toString('hex');
/** Products the background shoppers wait for; none is ever reported in stock. */
const BACKGROUND_PRODUCTS = 10;

const restocksPerDatabase = WARMUP_RESTOCKS + RESTOCKS;
guardProcess(DIALECTS.length * (240 + WARMUP_S + restocksPerDatabase * (ALERT_TIMEOUT_S + 5 + PAUSE_MS / 1000)) * 1000 + 60_000);

const now = () => performance.timeOrigin + performance.now();
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

// ---------------------------------------------------------------------------------------------
// The SMTP sink, a child with an IPC channel (bench/ipc-child.ts, as bench/fanout.ts runs it)

type Sink = IpcChild<SinkEvent> & SinkControl & { url: string };

async function startSink(): Promise<Sink> {
  const child = startIpcChild<SinkEvent>('the SMTP sink', path.join('bench', 'fanout-sink.ts'), process.env);
  const ready = await child.next((e): e is Extract<SinkEvent, { type: 'ready' }> => e.type === 'ready', 30_000, 'ready');
  return { ...child, url: `smtp://${HOST}:${ready.port}`, command: (c) => void child.process.send(c) };
}

/** The sink's figures of the current phase, now. */
async function sinkReport(sink: Sink): Promise<PhaseStats> {
  const reported = sink.next((e): e is { type: 'complete' | 'report' } & PhaseStats => e.type === 'report', 10_000, 'report');
  sink.command({ type: 'report' });
  const { type: _type, ...stats } = await reported;
  return stats;
}

// ---------------------------------------------------------------------------------------------
// Background load: new subscriptions at a steady rate

interface LoadFigures {
  sent: number;
  answered: number;
  ok: number;
  errors: number;
  /** Requests the pacing owed but did not send, MAX_IN_FLIGHT being reached. */
  skipped: number;
  firstProblem: string | undefined;
  /** Each answer's time from send to the end of its body, ms. */
  latencies: number[];
  /** From the first request to the stop, seconds. */
  seconds: number;
}

/**
 * One request every 1000/rate ms on keep-alive connections, by the clock (a late timer sends
 * what it owes at once), each a new e-mail on one of BACKGROUND_PRODUCTS products.
 */
function startLoad(port: number, token: string, prefix: string) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
  const figures: LoadFigures = { sent: 0, answered: 0, ok: 0, errors: 0, skipped: 0, firstProblem: undefined, latencies: [], seconds: 0 };
  let inFlight = 0;
  let owed = 0;
  let stopped = false;
  const started = now();
  let timer: NodeJS.Timeout | undefined;

  const send = () => {
    const n = figures.sent++;
    const product = n % BACKGROUND_PRODUCTS;
    const body = JSON.stringify({
      productId: `gid://shopify/Product/${7_000_000 + product}`,
      variantId: `gid://shopify/ProductVariant/${7_100_000 + product}`,
      email: `${prefix}${n}@example.com`,
    });
    const sentAt = now();
    let settled = false;
    const settle = (problem: string | undefined) => {
      if (settled) return;
      settled = true;
      inFlight--;
      if (problem === undefined) return;
      figures.firstProblem ??= problem;
    };
    inFlight++;
    const req = http.request(
      {
        host: HOST,
        port,
        path: SUBSCRIBE_PATH,
        method: 'POST',
        agent,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), authorization: `Bearer ${token}` },
        timeout: SUBSCRIBE_TIMEOUT_MS,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => {
          if (settled) return;
          figures.answered++;
          figures.latencies.push(now() - sentAt);
          const status = res.statusCode ?? 0;
          if (status >= 200 && status <= 299) {
            figures.ok++;
            settle(undefined);
          } else settle(`${status} ${Buffer.concat(chunks).toString('utf8').slice(0, 300)}`);
        });
        res.on('error', (err) => {
          if (settled) return;
          figures.errors++;
          settle(`response error: ${err.message}`);
        });
      },
    );
    req.on('timeout', () => req.destroy(new Error(`no answer within ${SUBSCRIBE_TIMEOUT_MS} ms`)));
    req.on('error', (err) => {
      if (settled) return;
      figures.errors++;
      settle(`request error: ${err.message}`);
    });
    req.end(body);
  };

  const tick = () => {
    if (stopped) return;
    const due = Math.floor(((now() - started) * RATE) / 1000);
    while (owed < due) {
      owed++;
      if (inFlight >= MAX_IN_FLIGHT) figures.skipped++;
      else send();
    }
    timer = setTimeout(tick, Math.max(1, Math.min(10, Math.floor(500 / RATE))));
  };
  tick();

  return {
    figures,
    /** 2xx answers so far, for the rate over a window. */
    okNow: () => figures.ok,
    /** Stops sending and waits for the answers in flight (at most the request timeout). */
    async stop(): Promise<void> {
      if (stopped) return;
      stopped = true;
      clearTimeout(timer);
      figures.seconds = (now() - started) / 1000;
      const until = now() + SUBSCRIBE_TIMEOUT_MS + 2000;
      while (inFlight > 0 && now() < until) await sleep(10);
      agent.destroy();
      if (inFlight > 0) figures.firstProblem ??= `${inFlight} subscribes still unanswered when the load stopped`;
    },
  };
}

// ---------------------------------------------------------------------------------------------
// /metrics: the service's own histogram

interface Histogram {
  count: number;
  sum: number;
  /** Cumulative counts by upper bound, +Inf last. */
  buckets: Array<{ le: number; n: number }>;
}

function histogramOf(text: string, name: string): Histogram | undefined {
  const buckets: Histogram['buckets'] = [];
  let count: number | undefined;
  let sum: number | undefined;
  for (const line of text.split('\n')) {
    const bucket = new RegExp(`^${name}_bucket\\{le="([^"]+)"\\} (\\S+)$`).exec(line);
    if (bucket) buckets.push({ le: bucket[1] === '+Inf' ? Infinity : Number(bucket[1]), n: Number(bucket[2]) });
    else if (line.startsWith(`${name}_count `)) count = Number(line.slice(name.length + 7));
    else if (line.startsWith(`${name}_sum `)) sum = Number(line.slice(name.length + 5));
  }
  if (count === undefined || buckets.length === 0) return undefined;
  return { count, sum: sum ?? NaN, buckets: buckets.sort((a, b) => a.le - b.le) };
}

/** The q-quantile from a histogram's buckets, interpolated linearly inside the bucket, as histogram_quantile does. */
function bucketQuantile(h: Histogram, q: number): number {
  if (h.count === 0) return NaN;
  const rank = q * h.count;
  let lowerLe = 0;
  let lowerN = 0;
  for (const { le, n } of h.buckets) {
    if (n >= rank) {
      if (!Number.isFinite(le)) return lowerLe;
      return n === lowerN ? le : lowerLe + ((le - lowerLe) * (rank - lowerN)) / (n - lowerN);
    }
    lowerLe = le;
    lowerN = n;
  }
  return lowerLe;
}

/** A counter's value summed over the lines whose labels include `labels`. */
function counterSum(text: string, name: string, labels: string): number {
  let total = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`) || !line.includes(labels)) continue;
    total += Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return total;
}

// ---------------------------------------------------------------------------------------------
// One database

interface RestockTiming {
  /** From sending the inventory report to the message's arrival at the sink, ms. */
  latencyMs: number;
  /** To the inventory report's answer, ms. */
  reportMs: number;
  /** Whether the arrival is the sink's own time (else the moment the bench heard of it). */
  sinkClock: boolean;
}

interface MetricsReading {
  count: number;
  sumSeconds: number;
  p50Seconds: number;
  p99Seconds: number;
  firstBound: number;
  sent: number;
}

interface Row {
  label: string;
  dialect: Dialect;
  warmups: RestockTiming[];
  timings: RestockTiming[];
  /** Sorted latencies of the measured restocks, ms. */
  sorted: Float64Array;
  /** Background subscribes answered 2xx per second while the measured restocks ran, and over the whole load. */
  rate: { asked: number; achieved: number; windowSeconds: number; overall: number; overallSeconds: number };
  subscribeMs: { p50: number; p99: number };
  metrics: MetricsReading | undefined;
  problems: string[];
  checks: string[];
}

async function restockOnce(base: string, token: string, sink: Sink, prefix: string, i: number): Promise<RestockTiming> {
  const email = `${prefix}${i}@example.com`;
  const product = {
    productId: `gid://shopify/Product/${8_000_000 + i}`,
    variantId: `gid://shopify/ProductVariant/${8_100_000 + i}`,
    productTitle: `Latency Widget ${i}`,
    variantTitle: 'Blue / M',
    productUrl: `https://${DOMAIN}/products/widget-${i}`,
    imageUrl: 'https://cdn.example.com/widget.png',
  };
  const subscribed = await requestJson(base, 'POST', SUBSCRIBE_PATH, { productId: product.productId, variantId: product.variantId, email }, token);
  if (subscribed.status < 200 || subscribed.status > 299) throw new Error(`the shopper's subscribe answered ${subscribed.status}: ${subscribed.text.slice(0, 300)}`);
  if (subscribed.json?.status !== 'active') throw new Error(`the shopper's subscription is ${subscribed.json?.status}, not active: ${subscribed.text.slice(0, 300)}`);

  sink.command({ type: 'capture', address: email });
  const captured = sink.next((e): e is Extract<SinkEvent, { type: 'captured' }> => e.type === 'captured' && e.address === email, ALERT_TIMEOUT_S * 1000, `alert to ${email} (restock ${i})`);
  captured.catch(() => {});
  const start = now();
  const reported = await requestJson(base, 'POST', `/api/v1/stores/${DOMAIN}/inventory`, { items: [{ ...product, available: 1 }] }, token);
  const reportMs = now() - start;
  const items = expectStatus('inventory report', reported, 200).items as Array<{ restockId?: string }>;
  if (!items[0]?.restockId) throw new Error(`the report started no restock: ${reported.text.slice(0, 300)}`);
  const mail = await captured;
  const heardAt = now();
  // The phase counts only this run's shoppers: when this message is the only one since the
  // last restock, the sink's last arrival is its arrival.
  const stats = await sinkReport(sink);
  const sinkClock = stats.received === i + 1 && stats.lastAt !== null && stats.lastAt >= start;
  if (!mail.raw.includes(`Subject: ${product.productTitle} is back in stock`)) {
    throw new Error(`the message to ${email} does not look like the alert of restock ${i}:\n${mail.raw.slice(0, 1000)}`);
  }
  return { latencyMs: (sinkClock ? stats.lastAt! : heardAt) - start, reportMs, sinkClock };
}

async function runDatabase(sink: Sink, dialect: Dialect): Promise<Row> {
  const label = `restock ${dialect}`;
  const scratch: ScratchDatabase = dialect === 'sqlite' ? sqliteScratch('restock-latency', 'FULL') : await postgresScratch(PG_ADMIN!, 'restock_latency');
  let service: Child | undefined;
  let load: ReturnType<typeof startLoad> | undefined;
  try {
    const port = await freePort();
    const env = restockEnv(port, {
      ...scratch.env,
      SMTP_URL: sink.url,
      RESTOCK_SECRET: SECRET,
      METRICS_TOKEN,
      // /metrics on the service's own port, with the token; no tracing.
      METRICS_PORT: '',
      OTEL_EXPORTER_OTLP_ENDPOINT: '',
      RUN_WORKER: 'true',
      LOG_LEVEL: 'warn',
    });
    process.stdout.write(`  ${label}: database, store, agent ... `);
    await restockCli(['migrate'], env);
    await restockCli(['store', 'create', DOMAIN, '--owner', OWNER], env);
    service = await startServer(label, [path.join('bin', 'restock.js'), 'serve'], env, port, '/api/health');
    const base = baseUrl(port);
    const agent = await claimStoreAgent(base, sink, OWNER, DOMAIN);
    process.stdout.write('ready\n');

    const prefix = `lat${dialect[0]}-${TAG}-`;
    sink.command({ type: 'expect', phase: label, prefix, count: restocksPerDatabase });
    load = startLoad(port, agent.token, `bg${dialect[0]}-${TAG}-`);
    process.stdout.write(`  ${label}: ${RATE} subscribes/s, ${WARMUP_S} s of warm-up, then ${WARMUP_RESTOCKS} + ${RESTOCKS} restocks ... `);
    await sleep(WARMUP_S * 1000);

    const warmups: RestockTiming[] = [];
    const timings: RestockTiming[] = [];
    let windowStart = 0;
    let okAtStart = 0;
    for (let i = 0; i < restocksPerDatabase; i++) {
      if (i === WARMUP_RESTOCKS) {
        windowStart = now();
        okAtStart = load.okNow();
      }
      const timing = await restockOnce(base, agent.token, sink, prefix, i);
      (i < WARMUP_RESTOCKS ? warmups : timings).push(timing);
      if (i < restocksPerDatabase - 1) await sleep(PAUSE_MS);
    }
    const windowSeconds = (now() - windowStart) / 1000;
    const okInWindow = load.okNow() - okAtStart;
    await load.stop();
    const loadFigures = load.figures;
    load = undefined;
    const sorted = Float64Array.from(timings.map((t) => t.latencyMs)).sort();
    process.stdout.write(`p50 ${percentile(sorted, 50).toFixed(0)} ms, p99 ${percentile(sorted, 99).toFixed(0)} ms\n`);

    await sleep(SETTLE_MS);
    const stats = await sinkReport(sink);
    const problems: string[] = [];
    const checks: string[] = [];
    const achieved = okInWindow / windowSeconds;
    const rate = { asked: RATE, achieved, windowSeconds, overall: loadFigures.ok / loadFigures.seconds, overallSeconds: loadFigures.seconds };
    // A window of a few restocks is too short to tell a rate: then the whole load's counts.
    const [checked, over] = windowSeconds >= MIN_RATE_WINDOW_S ? [achieved, 'while the measured restocks ran'] : [rate.overall, 'over the whole load'];
    if (Math.abs(checked - RATE) > RATE * RATE_TOLERANCE) problems.push(`background subscribes ran at ${checked.toFixed(1)}/s ${over}, not within ${RATE_TOLERANCE * 100}% of ${RATE}/s`);
    if (loadFigures.ok !== loadFigures.sent) {
      problems.push(`${loadFigures.sent - loadFigures.ok} of ${loadFigures.sent} background subscribes were not answered 2xx (${loadFigures.errors} errors; first: ${loadFigures.firstProblem})`);
    }
    if (loadFigures.skipped > 0) problems.push(`the load fell behind: ${loadFigures.skipped} subscribes not sent, ${MAX_IN_FLIGHT} already in flight`);
    if (stats.received !== restocksPerDatabase || stats.distinct !== restocksPerDatabase || stats.duplicates > 0 || stats.unexpected > 0) {
      problems.push(
        `the sink got ${stats.received} messages for ${restocksPerDatabase} restocks: ${stats.distinct} shoppers alerted, ${stats.duplicates} duplicates, ` +
          `${stats.unexpected} to someone else (first: ${stats.firstUnexpected})`,
      );
    }
    const sinkTimed = [...warmups, ...timings].filter((t) => t.sinkClock).length;
    checks.push(
      `${label}: sink got ${stats.received} messages, one to each of the ${stats.distinct} shoppers of ${restocksPerDatabase} restocks, ${stats.duplicates} duplicates, ${stats.unexpected} other; ` +
        `${sinkTimed} of ${restocksPerDatabase} arrivals timed by the sink's clock, the rest when the bench heard of them`,
    );
    const subscribeSorted = Float64Array.from(loadFigures.latencies).sort();
    checks.push(
      `${label}: background load ${loadFigures.sent} subscribes sent, ${loadFigures.ok} answered 2xx, ${loadFigures.errors} errors, ${loadFigures.skipped} not sent; ` +
        `${okInWindow} answered 2xx in the ${windowSeconds.toFixed(1)} s the measured restocks took (${achieved.toFixed(1)}/s), ` +
        `${loadFigures.ok} in the ${loadFigures.seconds.toFixed(1)} s of the whole load (${rate.overall.toFixed(1)}/s)`,
    );

    const scraped = await fetch(`${base}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` }, signal: AbortSignal.timeout(10_000) });
    const text = await scraped.text();
    let metrics: MetricsReading | undefined;
    if (scraped.status !== 200) problems.push(`GET /metrics answered ${scraped.status}: ${text.slice(0, 300)}`);
    else {
      const h = histogramOf(text, HISTOGRAM);
      const sent = counterSum(text, 'restock_alerts_settled_total', 'outcome="sent"');
      if (!h) checks.push(`${label}: /metrics exports no ${HISTOGRAM} histogram`);
      else {
        metrics = { count: h.count, sumSeconds: h.sum, p50Seconds: bucketQuantile(h, 0.5), p99Seconds: bucketQuantile(h, 0.99), firstBound: h.buckets[0]!.le, sent };
        if (h.count !== restocksPerDatabase) problems.push(`${HISTOGRAM} counted ${h.count} restocks, expected ${restocksPerDatabase}`);
      }
      if (sent !== restocksPerDatabase) problems.push(`restock_alerts_settled_total{outcome="sent"} is ${sent}, expected ${restocksPerDatabase}`);
    }
    return {
      label,
      dialect,
      warmups,
      timings,
      sorted,
      rate,
      subscribeMs: { p50: percentile(subscribeSorted, 50), p99: percentile(subscribeSorted, 99) },
      metrics,
      problems,
      checks,
    };
  } finally {
    await load?.stop();
    if (service) {
      const stopProblem = await stopChild(service);
      if (stopProblem) console.error(`${label}: ${stopProblem}`);
    }
    await scratch.drop();
  }
}

// ---------------------------------------------------------------------------------------------
// Report

const fmt = (value: number | null | undefined, digits: number) => (value === null || value === undefined || !Number.isFinite(value) ? 'n/a' : value.toFixed(digits));

function report(rows: Row[]): void {
  printTable(
    ['run', 'restocks', 'p50 ms', 'p90 ms', 'p99 ms', 'max ms', 'report p50 ms', 'subscribes/s', 'subscribe p50/p99 ms'],
    [16, 8, 7, 7, 7, 7, 13, 12, 20],
    rows.map((r) => [
      r.label,
      String(r.timings.length),
      fmt(percentile(r.sorted, 50), 0),
      fmt(percentile(r.sorted, 90), 0),
      fmt(percentile(r.sorted, 99), 0),
      fmt(r.sorted[r.sorted.length - 1], 0),
      fmt(percentile(Float64Array.from(r.timings.map((t) => t.reportMs)).sort(), 50), 0),
      `${fmt(r.rate.achieved, 1)}/${r.rate.asked}`,
      `${fmt(r.subscribeMs.p50, 1)}/${fmt(r.subscribeMs.p99, 1)}`,
    ]),
  );
  console.log('');
  for (const r of rows) {
    const p50 = percentile(r.sorted, 50);
    const p99 = percentile(r.sorted, 99);
    console.log(
      `${r.label}: restock report → alert at the mail server, with ${fmt(r.rate.achieved, 1)} subscribes/s (asked ${r.rate.asked}) over ${fmt(r.rate.windowSeconds, 1)} s; ` +
        `aim: p50 ${fmt(p50, 0)} ms ${p50 < AIM_P50_MS ? '<' : 'NOT <'} ${AIM_P50_MS} ms, p99 ${fmt(p99, 0)} ms ${p99 < AIM_P99_MS ? '<' : 'NOT <'} ${AIM_P99_MS} ms` +
        (r.timings.length < 100 ? ` (with fewer than 100 restocks, p99 is the highest)` : ''),
    );
    console.log(`  all ${r.timings.length} in order, ms: ${r.timings.map((t) => t.latencyMs.toFixed(0)).join(' ')}`);
    if (r.warmups.length > 0) console.log(`  warm-up restock${r.warmups.length === 1 ? '' : 's'} (not counted), ms: ${r.warmups.map((t) => t.latencyMs.toFixed(0)).join(' ')}`);
    const m = r.metrics;
    if (m) {
      console.log(
        `  /metrics ${HISTOGRAM} (detection → the alert's outcome written): count ${m.count}, mean ${fmt((m.sumSeconds / m.count) * 1000, 0)} ms, ` +
          `p50 ≈ ${fmt(m.p50Seconds, 2)} s, p99 ≈ ${fmt(m.p99Seconds, 2)} s from buckets` +
          (m.p99Seconds <= m.firstBound ? ` (every one in the first bucket, le="${m.firstBound}": the buckets cannot place them more finely)` : '') +
          `; restock_alerts_settled_total{outcome="sent"} ${m.sent}`,
      );
    } else console.log(`  /metrics: the service exports no ${HISTOGRAM} histogram`);
  }
  printChecks(rows.flatMap((r) => r.checks));
}

// ---------------------------------------------------------------------------------------------

async function main(): Promise<number> {
  printSetting();
  const poll = process.env.DISPATCH_POLL_MS?.trim() ? `DISPATCH_POLL_MS=${process.env.DISPATCH_POLL_MS}` : 'DISPATCH_POLL_MS unset (the default, 1000 ms)';
  console.log(
    `bench: ${RESTOCKS} restocks (+${WARMUP_RESTOCKS} warm-up) one after another, ${PAUSE_MS} ms apart, one waiting shopper each, ` +
      `under ${RATE} subscribes/s; ${poll}; ${DIALECTS.join(' and ')}, 127.0.0.1`,
  );
  const sink = await startSink();
  const rows: Row[] = [];
  try {
    for (const dialect of DIALECTS) rows.push(await runDatabase(sink, dialect));
  } finally {
    await stopIpcChild(sink);
  }
  report(rows);
  console.log(`\nbench: load average at the end ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}`);

  const problems = rows.flatMap((r) => r.problems.map((p) => `${r.label}: ${p}`));
  if (process.env.BENCH_JSON === '1') {
    const summary = rows.map((r) => ({
      label: r.label,
      restocks: r.timings.length,
      p50Ms: Number(fmt(percentile(r.sorted, 50), 1)),
      p90Ms: Number(fmt(percentile(r.sorted, 90), 1)),
      p99Ms: Number(fmt(percentile(r.sorted, 99), 1)),
      maxMs: Number(fmt(r.sorted[r.sorted.length - 1], 1)),
      latenciesMs: r.timings.map((t) => Number(t.latencyMs.toFixed(1))),
      reportP50Ms: Number(fmt(percentile(Float64Array.from(r.timings.map((t) => t.reportMs)).sort(), 50), 1)),
      subscribeRate: Number(r.rate.achieved.toFixed(1)),
      subscribeP99Ms: Number(fmt(r.subscribeMs.p99, 1)),
      metrics: r.metrics
        ? { count: r.metrics.count, meanMs: Number(((r.metrics.sumSeconds / r.metrics.count) * 1000).toFixed(1)), p50Seconds: Number(r.metrics.p50Seconds.toFixed(3)), p99Seconds: Number(r.metrics.p99Seconds.toFixed(3)), sent: r.metrics.sent }
        : null,
    }));
    console.log(`BENCH_JSON ${JSON.stringify({ restocks: RESTOCKS, warmupRestocks: WARMUP_RESTOCKS, rate: RATE, pauseMs: PAUSE_MS, pollMs: process.env.DISPATCH_POLL_MS?.trim() || null, runs: summary, loadAverage: os.loadavg(), failed: problems.length > 0 })}`);
  }
  return exitCodeFor(problems);
}

runMain(main);
