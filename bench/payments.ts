/**
 * What pay per request costs. See docs/performance.md, "Pay per request".
 *
 *   npm run bench:payments
 *
 * Two measurements in one run, against one Restock server configured for x402 (a local anvil
 * chain with Circle's USDC and an x402 facilitator served over HTTP, from
 * test/fixtures/x402-chain.ts) and for MPP through Stripe (a test key: a 402 only builds
 * challenges, it never calls Stripe):
 *
 * 1. The 402 path under load. A bare Fastify route (bench/bare-server.ts) and then Restock's
 *    POST /api/v1/alerts/subscribe and GET /api, without a token or a payment, are each loaded
 *    with autocannon the same way. Restock answers each with a 402 carrying PAYMENT-REQUIRED (the
 *    x402 requirements) and WWW-Authenticate: Payment (the MPP challenges). The figure is the
 *    ratio 402-path req/s divided by bare req/s; the aim is 0.5 or more.
 * 2. The paid x402 path, one request at a time: each request carries a freshly signed
 *    PAYMENT-SIGNATURE, so Restock claims it in its ledger, has the facilitator verify it
 *    (signature, balance, a simulated transfer on chain), runs the handler, and has the
 *    facilitator settle it (a transaction anvil mines) before answering. Restock reaches the
 *    facilitator through a timing relay in this process, so the time of /verify and /settle is
 *    known per request. The same number of unpaid 402 round trips is timed the same way for
 *    comparison, and a few payers at once show what concurrency does (with settlements passed
 *    on one at a time, see startTimingRelay).
 *
 * Settings: BENCH_DURATION (seconds measured per load target, default 10), BENCH_WARMUP (seconds
 * of load before measuring, default 2), BENCH_CONNECTIONS (default 50), BENCH_ROUNDS (the load
 * sequence again, default 1, with the median ratio at the end), BENCH_PAID (sequential paid
 * requests, default 100), BENCH_PAID_CONCURRENCY (payers at once, default 4; 0 skips that part),
 * BENCH_PAID_CONCURRENT (paid requests they make together, default 100), BENCH_PROFILE=<dir> (Restock
 * writes a V8 CPU profile there), BENCH_JSON=1 (one machine-readable summary line).
 *
 * Everything listens on 127.0.0.1. The run fails (exit 1) when a load answer is anything but
 * the expected status (200 bare, 402 Restock), on socket errors or timeouts, when a paid request
 * is not a 200 with a successful PAYMENT-RESPONSE, when the receiving address did not gain
 * exactly 0.05 USDC per paid request, or when the ledger does not hold one settled payment and
 * one subscription per paid request.
 */
import { createHmac, randomBytes } from 'node:crypto';
import http from 'node:http';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import SqliteDriver from 'better-sqlite3';
import { x402Client } from '@x402/core/client';
import { decodePaymentRequiredHeader, decodePaymentResponseHeader, encodePaymentSignatureHeader } from '@x402/core/http';
import type { PaymentRequired } from '@x402/core/types';
import { registerExactEvmScheme } from '@x402/evm/exact/client';
import { Challenge } from 'mppx';
import { generatePrivateKey, privateKeyToAccount, type PrivateKeyAccount } from 'viem/accounts';
import { startX402Chain, type X402Chain } from '../test/fixtures/x402-chain.ts';
import { exitCodeFor, guardProcess, intSetting, profileSetting, runMain } from './lib.ts';
import { HOST, SUBSCRIBE_PATH, baseUrl, freePort, restockEnv, startServer, stopChild, type Child } from './lib.ts';
import { codesOf, cpuSeconds, load, measureLoad as measureWith, type LoadRow, type Result } from './lib.ts';
import { percentile, printChecks, printMedianRatios, printSetting, printTable, sqliteScratch, type ScratchDatabase } from './lib.ts';
import { startBareServer } from './lib.ts';

const DURATION = intSetting('BENCH_DURATION', 10, 1, 600);
const WARMUP = intSetting('BENCH_WARMUP', 2, 0, 60);
const CONNECTIONS = intSetting('BENCH_CONNECTIONS', 50, 1, 1000);
const ROUNDS = intSetting('BENCH_ROUNDS', 1, 1, 20);
const PAID = intSetting('BENCH_PAID', 100, 1, 10_000);
const PAID_CONCURRENCY = intSetting('BENCH_PAID_CONCURRENCY', 4, 0, 64);
const PAID_CONCURRENT = PAID_CONCURRENCY === 0 ? 0 : intSetting('BENCH_PAID_CONCURRENT', 100, 1, 10_000);
const PROFILE_DIR = profileSetting();

/** Paid requests before the timed ones: the first one also fetches the facilitator's /supported. */
const PAID_WARMUP = 3;
/** USD 0.05 in USDC's 6 decimals: what subscribeAlert costs. */
const PRICE = 50_000n;
const API_INDEX_PATH = '/api';
const REQUEST_TIMEOUT_MS = 20_000;
/** The service's secret, so the bench can check each MPP challenge id as mppx would. */
const SERVICE_SECRET = randomBytes(32).toString('hex');
const MPP_SECRET = createHmac('sha256', Buffer.from(SERVICE_SECRET, 'utf8')).update('mpp-challenge-binding').digest('hex');
/** Unpaid requests sent at once after the load, whose challenge ids must all verify and differ. */
const CHALLENGE_BURST = 50;
/** The payer holds 100 USDC by default; enough for 2,000 requests. */
const PAYER_BALANCE = BigInt(PAID_WARMUP + PAID + PAID_CONCURRENT) * PRICE + 1_000_000n;

// Generous: three load targets per round, chain start-up, and up to a second per paid request.
guardProcess((ROUNDS * (3 * (WARMUP + DURATION) + 60) + 120 + (PAID_WARMUP + PAID + PAID_CONCURRENT)) * 1000);

const subscriptionBody = (email: string, shop?: string) =>
  JSON.stringify({ productId: 'gid://shopify/Product/123', variantId: 'gid://shopify/ProductVariant/456', email, ...(shop ? { shop } : {}) });

/**
 * A payer is an agent bound to no store, so it may hold 50 waiting subscriptions per store (the
 * third-party cap): the paid requests name a new store every 40 so that none is refused for it.
 */
let paidSoFar = 0;
const PAID_PER_STORE = 40;
const nextPaidStore = () => `bench-paid-${Math.floor(paidSoFar++ / PAID_PER_STORE)}.myshopify.com`;

// ---------------------------------------------------------------------------------------------
// The timing relay between Restock and the facilitator

interface TimingRelay {
  url: string;
  /** Milliseconds per call, in the order the calls finished, by path (`/verify`, `/settle`). */
  timings: Map<string, number[]>;
  close(): Promise<void>;
}

/**
 * Forwards every request to the facilitator and notes how long the facilitator took to answer
 * it. The facilitator's HTTP server gives no timings of its own, and the fixture is shared with
 * the tests, so the measurement sits in front of it: one extra loopback hop per call, with
 * keep-alive on both sides.
 *
 * It passes on one /settle at a time. The local facilitator sends every settlement from one
 * account and lets each transaction look up that account's nonce, so two settlements at once
 * can take the same nonce and one is rejected ("nonce too low"), which Restock then reports as a
 * refused settlement. A hosted facilitator assigns its nonces itself; queueing here stands in for
 * that, at the price of settling one transaction at a time (a lower bound for concurrent payers).
 */
async function startTimingRelay(target: string): Promise<TimingRelay> {
  const upstream = new URL(target);
  const agent = new http.Agent({ keepAlive: true });
  const timings = new Map<string, number[]>();
  let settlements: Promise<void> = Promise.resolve();

  const forward = (request: http.IncomingMessage, response: http.ServerResponse, pathname: string) =>
    new Promise<void>((resolve) => {
      const started = performance.now();
      response.once('close', () => resolve());
      const forwarded = http.request(
        { host: upstream.hostname, port: upstream.port, path: request.url, method: request.method, headers: { ...request.headers, host: upstream.host }, agent },
        (answer) => {
          response.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(response);
          answer.once('end', () => timings.set(pathname, [...(timings.get(pathname) ?? []), performance.now() - started]));
        },
      );
      forwarded.once('error', (error) => {
        response.writeHead(502, { 'content-type': 'application/json' });
        response.end(JSON.stringify({ error: error.message }));
      });
      request.pipe(forwarded);
    });

  const server = http.createServer((request, response) => {
    const pathname = new URL(request.url ?? '/', target).pathname;
    if (pathname === '/settle') settlements = settlements.then(() => forward(request, response, pathname));
    else void forward(request, response, pathname);
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(0, HOST, resolve));
  const { port } = server.address() as { port: number };
  return {
    url: baseUrl(port),
    timings,
    async close() {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
      agent.destroy();
      await closed;
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Servers

interface RestockServer {
  child: Child;
  base: string;
  database: ScratchDatabase;
  dataDir: string;
}

/** Restock on a scratch SQLite database, offering x402 on the local chain and MPP through Stripe. */
async function startRestock(chain: X402Chain, facilitatorUrl: string): Promise<RestockServer> {
  const database = sqliteScratch('restock-bench-payments', 'FULL');
  const port = await freePort();
  const env = restockEnv(port, {
    ...database.env,
    RUN_WORKER: 'false',
    RESTOCK_SECRET: SERVICE_SECRET,
    X402_PAY_TO: chain.payTo.address,
    X402_NETWORK: chain.network,
    X402_ASSET: chain.usdc,
    X402_FACILITATOR_URL: facilitatorUrl,
    // Enough for MPP to offer a Stripe charge; building that challenge never calls Stripe.
    STRIPE_SECRET_KEY: 'sk_test_x',
    STRIPE_NETWORK_ID: 'profile_bench',
    STRIPE_API_URL: '',
  });
  try {
    const profile = PROFILE_DIR ? ['--cpu-prof', `--cpu-prof-dir=${PROFILE_DIR}`] : [];
    const child = await startServer('restock', [...profile, path.join('bin', 'restock.js'), 'serve'], env, port, '/api/health');
    return { child, base: baseUrl(port), database, dataDir: database.env.DATA_DIR! };
  } catch (err) {
    await database.drop();
    throw err;
  }
}

// ---------------------------------------------------------------------------------------------
// 1. The 402 path under load

function measureLoad(label: string, pid: number | undefined, url: string, expected: number, requests?: Parameters<typeof load>[2]['requests']): Promise<LoadRow> {
  return measureWith(label, pid, url, expected, { warmup: WARMUP, duration: DURATION, connections: CONNECTIONS, ...(requests ? { requests } : {}) });
}

/**
 * One unpaid request looked at closely, since under load only the status is counted: a 402
 * with x402 requirements for the local chain at 0.05 USDC, and a Stripe MPP challenge.
 */
async function checkPaymentRequired(label: string, response: Response, chain: X402Chain): Promise<string[]> {
  await response.arrayBuffer();
  if (response.status !== 402) return [`${label}: answered ${response.status}, not 402`];
  const problems: string[] = [];
  const header = response.headers.get('payment-required');
  const accepts = header ? decodePaymentRequiredHeader(header).accepts : [];
  const offer = accepts[0];
  if (accepts.length !== 1 || offer?.network !== chain.network || offer.asset !== chain.usdc || offer.payTo !== chain.payTo.address || offer.amount !== String(PRICE)) {
    problems.push(`${label}: PAYMENT-REQUIRED does not offer 0.05 USDC on the local chain: ${JSON.stringify(accepts)}`);
  }
  const challenges = response.headers.get('www-authenticate') ?? '';
  if (!/Payment /.test(challenges) || !/method="stripe"/.test(challenges)) problems.push(`${label}: no MPP stripe challenge in WWW-Authenticate: ${challenges.slice(0, 200)}`);
  problems.push(...unverifiedChallenges(label, response));
  return problems;
}

/** MPP challenges of a 402 whose id is not the HMAC of the challenge under the service's key. */
function unverifiedChallenges(label: string, response: Response): string[] {
  return Challenge.fromResponseList(response)
    .filter((challenge) => !Challenge.verify(challenge, { secretKey: MPP_SECRET }))
    .map((challenge) => `${label}: MPP challenge ${challenge.id} (${challenge.method}) does not verify`);
}

/**
 * Under load only statuses are counted, and the 402's challenge ids are signed on a fast path of
 * our own: a burst of unpaid requests checks every id verifies with mppx and none repeats.
 */
async function checkChallengeBurst(url: string): Promise<{ problems: string[]; check: string }> {
  const responses = await Promise.all(Array.from({ length: CHALLENGE_BURST }, () => fetch(url, { signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) })));
  const problems: string[] = [];
  const ids: string[] = [];
  for (const response of responses) {
    await response.arrayBuffer();
    problems.push(...unverifiedChallenges('challenge burst', response));
    ids.push(...Challenge.fromResponseList(response).map((challenge) => challenge.id));
  }
  const distinct = new Set(ids).size;
  if (distinct !== ids.length) problems.push(`challenge burst: ${ids.length - distinct} repeated MPP challenge ids`);
  return { problems, check: `challenge burst: ${CHALLENGE_BURST} unpaid requests at once, ${ids.length} MPP challenge ids, all verified with mppx, ${distinct} distinct` };
}

async function loadRound(restock: RestockServer): Promise<LoadRow[]> {
  const rows: LoadRow[] = [];
  const bare = await startBareServer();
  try {
    rows.push(await measureLoad('bare GET /', bare.child.process.pid, bare.url, 200));
  } finally {
    const stopProblem = await stopChild(bare.child);
    if (stopProblem) rows[0]?.problems.push(stopProblem);
  }
  // The same body on every request: the 402 goes out before the body is read, so its content
  // does not matter, but a real client would send one.
  const subscribe = [{ method: 'POST' as const, path: SUBSCRIBE_PATH, headers: { 'content-type': 'application/json' }, body: subscriptionBody('bench@example.com') }];
  const pid = restock.child.process.pid;
  rows.push(await measureLoad('402 POST subscribe', pid, restock.base + SUBSCRIBE_PATH, 402, subscribe));
  rows.push(await measureLoad('402 GET /api', pid, restock.base + API_INDEX_PATH, 402));
  return rows;
}

// ---------------------------------------------------------------------------------------------
// 2. The paid x402 path

interface Spread {
  n: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
}

function spreadOf(values: number[]): Spread {
  const sorted = Float64Array.from(values).sort();
  return { n: values.length, p50: percentile(sorted, 50), p90: percentile(sorted, 90), p99: percentile(sorted, 99), max: sorted[sorted.length - 1] ?? NaN };
}

/** Signs x402 "exact" payments as one payer (the chain's own by default), each with a fresh EIP-3009 nonce. */
function payer(chain: X402Chain, required: PaymentRequired, account: PrivateKeyAccount = chain.payer.account): () => Promise<string> {
  const client = new x402Client();
  registerExactEvmScheme(client, { signer: account, networks: [chain.network] });
  // The local USDC is not an asset the client knows, and its default per-payment cap would refuse it.
  client.setSpendControls(false);
  return async () => encodePaymentSignatureHeader(await client.createPaymentPayload(required));
}

async function paymentRequiredOf(url: string): Promise<PaymentRequired> {
  const response = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: subscriptionBody('offer@example.com'), signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) });
  await response.arrayBuffer();
  const header = response.headers.get('payment-required');
  if (response.status !== 402 || !header) throw new Error(`expected a 402 with PAYMENT-REQUIRED, got ${response.status}`);
  return decodePaymentRequiredHeader(header);
}

interface PaidOutcome {
  ms: number;
  /** Empty when the answer was a 200 with a successful PAYMENT-RESPONSE. */
  problem: string;
  transaction: string;
}

/** One paid subscribe: timed from sending to the last byte of the answer. */
async function paidRequest(url: string, signature: string, email: string): Promise<PaidOutcome> {
  const started = performance.now();
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'payment-signature': signature },
    body: subscriptionBody(email, nextPaidStore()),
    signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
  });
  const text = await response.text();
  const ms = performance.now() - started;
  const receipt = response.headers.get('payment-response');
  if (response.status !== 200 || !receipt) return { ms, problem: `${response.status} ${receipt ? '' : 'without PAYMENT-RESPONSE '}${text.slice(0, 600)}`, transaction: '' };
  const settled = decodePaymentResponseHeader(receipt);
  if (!settled.success) return { ms, problem: `200 with a failed PAYMENT-RESPONSE: ${JSON.stringify(settled)}`, transaction: '' };
  return { ms, problem: '', transaction: settled.transaction };
}

/** One unpaid subscribe, the 402 round trip a paying client makes first. */
async function unpaidRequest(url: string): Promise<{ ms: number; status: number }> {
  const started = performance.now();
  const response = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: subscriptionBody('unpaid@example.com'), signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) });
  await response.arrayBuffer();
  return { ms: performance.now() - started, status: response.status };
}

interface PaidReport {
  unpaid: Spread;
  signing: Spread;
  paid: Spread;
  verify: Spread;
  settle: Spread;
  /** Per request: the paid time less the facilitator's /verify and /settle, i.e. Restock's own share. */
  restockOwn: Spread;
  concurrent?: { payers: number; spread: Spread; perSecond: number };
  /** What the concurrent part's payers (each funded for it) spent. */
  concurrentSpent: bigint;
  paidCount: number;
  transactions: Set<string>;
  problems: string[];
}

const sequence = (n: number) => Array.from({ length: n }, (_, i) => i);

async function sequentialPaid(url: string, sign: () => Promise<string>, relay: TimingRelay, tag: string, report: PaidReport): Promise<void> {
  const signing: number[] = [];
  const paid: number[] = [];
  relay.timings.clear();
  for (const i of sequence(PAID)) {
    // Signed before the clock starts: a client's signing is its own cost, reported apart.
    const signStarted = performance.now();
    const signature = await sign();
    signing.push(performance.now() - signStarted);
    const outcome = await paidRequest(url, signature, `p${tag}-${i}@example.com`);
    report.paidCount++;
    if (outcome.problem) report.problems.push(`paid request ${i}: ${outcome.problem}`);
    else report.transactions.add(outcome.transaction);
    paid.push(outcome.ms);
  }
  const verify = relay.timings.get('/verify') ?? [];
  const settle = relay.timings.get('/settle') ?? [];
  if (verify.length !== PAID || settle.length !== PAID) {
    report.problems.push(`the facilitator saw ${verify.length} /verify and ${settle.length} /settle calls for ${PAID} paid requests`);
  }
  report.signing = spreadOf(signing);
  report.paid = spreadOf(paid);
  report.verify = spreadOf(verify);
  report.settle = spreadOf(settle);
  // Requests ran one at a time, so the i-th verify and settle belong to the i-th request.
  report.restockOwn = spreadOf(paid.map((ms, i) => ms - (verify[i] ?? 0) - (settle[i] ?? 0)));
}

/**
 * PAID_CONCURRENCY payers taking paid requests off one count until PAID_CONCURRENT are made. Each
 * is a payer of its own: the service takes one x402 payment in flight per payer (docs/payments.md).
 */
async function concurrentPaid(url: string, chain: X402Chain, required: PaymentRequired, tag: string, report: PaidReport): Promise<void> {
  const funds = BigInt(PAID_CONCURRENT) * 1_000_000n;
  const accounts = sequence(PAID_CONCURRENCY).map(() => privateKeyToAccount(generatePrivateKey()));
  for (const account of accounts) await chain.mintUsdc(account.address, funds);
  const signers = accounts.map((account) => payer(chain, required, account));
  const latencies: number[] = [];
  let next = 0;
  const started = performance.now();
  const payerLoop = async (sign: () => Promise<string>) => {
    while (next < PAID_CONCURRENT) {
      const i = next++;
      const outcome = await paidRequest(url, await sign(), `c${tag}-${i}@example.com`);
      report.paidCount++;
      if (outcome.problem) report.problems.push(`concurrent paid request ${i}: ${outcome.problem}`);
      else report.transactions.add(outcome.transaction);
      latencies.push(outcome.ms);
    }
  };
  await Promise.all(signers.map(payerLoop));
  const seconds = (performance.now() - started) / 1000;
  for (const account of accounts) report.concurrentSpent += funds - (await chain.usdcBalance(account.address));
  report.concurrent = { payers: PAID_CONCURRENCY, spread: spreadOf(latencies), perSecond: PAID_CONCURRENT / seconds };
}

async function measurePaid(restock: RestockServer, chain: X402Chain, relay: TimingRelay): Promise<PaidReport> {
  const url = restock.base + SUBSCRIBE_PATH;
  const tag = Date.now().toString(36);
  const required = await paymentRequiredOf(url);
  const sign = payer(chain, required);
  const empty = spreadOf([]);
  const report: PaidReport = { unpaid: empty, signing: empty, paid: empty, verify: empty, settle: empty, restockOwn: empty, concurrentSpent: 0n, paidCount: 0, transactions: new Set(), problems: [] };

  process.stdout.write(`  paid x402: ${PAID_WARMUP} warm-up payments ... `);
  for (const i of sequence(PAID_WARMUP)) {
    const outcome = await paidRequest(url, await sign(), `w${tag}-${i}@example.com`);
    report.paidCount++;
    if (outcome.problem) report.problems.push(`warm-up paid request ${i}: ${outcome.problem}`);
    else report.transactions.add(outcome.transaction);
  }
  process.stdout.write('done\n');

  process.stdout.write(`  unpaid 402: ${PAID} sequential round trips ... `);
  const unpaid: number[] = [];
  for (const i of sequence(PAID)) {
    const { ms, status } = await unpaidRequest(url);
    if (status !== 402) report.problems.push(`unpaid request ${i} answered ${status}, not 402`);
    unpaid.push(ms);
  }
  report.unpaid = spreadOf(unpaid);
  process.stdout.write(`p50 ${report.unpaid.p50.toFixed(2)} ms\n`);

  process.stdout.write(`  paid x402: ${PAID} sequential payments ... `);
  await sequentialPaid(url, sign, relay, tag, report);
  process.stdout.write(`p50 ${report.paid.p50.toFixed(1)} ms\n`);

  if (PAID_CONCURRENCY > 0) {
    process.stdout.write(`  paid x402: ${PAID_CONCURRENT} payments by ${PAID_CONCURRENCY} payers at once ... `);
    await concurrentPaid(url, chain, required, tag, report);
    process.stdout.write(`${report.concurrent!.perSecond.toFixed(1)} paid req/s\n`);
  }
  return report;
}

// ---------------------------------------------------------------------------------------------
// Checks after the paid part

/** Counts in Restock's own database, read after it stopped. */
function ledgerCounts(dataDir: string): { payments: Map<string, number>; subscriptions: number } {
  const driver = new SqliteDriver(path.join(dataDir, 'restock.db'), { readonly: true });
  try {
    const rows = driver.prepare('select status, count(*) as n from payments group by status').all() as Array<{ status: string; n: number }>;
    const { n } = driver.prepare('select count(*) as n from subscriptions').get() as { n: number };
    return { payments: new Map(rows.map((r) => [r.status, r.n])), subscriptions: n };
  } finally {
    driver.close();
  }
}

/** Money and records: one settled payment, one subscription, one transaction and 0.05 USDC per paid request. */
function checkPaid(report: PaidReport, received: bigint, spent: bigint, ledger: ReturnType<typeof ledgerCounts>): { checks: string[]; problems: string[] } {
  const expected = BigInt(report.paidCount) * PRICE;
  const problems: string[] = [];
  if (received !== expected) problems.push(`payTo received ${received} USDC units, expected ${report.paidCount} x ${PRICE} = ${expected}`);
  if (spent !== expected) problems.push(`the payer spent ${spent} USDC units, expected ${expected}`);
  if (report.transactions.size !== report.paidCount) problems.push(`${report.transactions.size} distinct settlement transactions for ${report.paidCount} paid requests`);
  const settled = ledger.payments.get('settled') ?? 0;
  const other = [...ledger.payments].filter(([status]) => status !== 'settled');
  if (settled !== report.paidCount || other.length > 0) {
    problems.push(`ledger: ${settled} settled payments for ${report.paidCount} paid requests${other.length ? `, and ${other.map(([s, n]) => `${n} ${s}`).join(', ')}` : ''}`);
  }
  if (ledger.subscriptions !== report.paidCount) problems.push(`${ledger.subscriptions} subscriptions stored for ${report.paidCount} paid requests`);
  const checks = [
    `paid: payTo received ${received} USDC units = ${report.paidCount} x ${PRICE}? ${received === expected ? 'yes' : 'NO'}; ` +
      `${report.transactions.size} distinct transactions; ledger ${[...ledger.payments].map(([s, n]) => `${n} ${s}`).join(', ') || 'empty'}; ` +
      `${ledger.subscriptions} subscriptions`,
  ];
  return { checks, problems: problems.map((p) => `paid: ${p}`) };
}

// ---------------------------------------------------------------------------------------------
// Report

const ms = (v: number) => (Number.isNaN(v) ? 'n/a' : v < 10 ? v.toFixed(2) : v.toFixed(1));

function reportLoad(rows: LoadRow[]): void {
  const baseline = rows[0]!.result.requests.average;
  printTable(
    ['target', 'req/s avg', 'p50 ms', 'p99 ms', 'answers', 'expected', 'errors', 'CPU us/req', 'vs bare'],
    [20, 10, 7, 7, 9, 9, 7, 10, 8],
    rows.map((r, i) => [
      r.label,
      r.result.requests.average.toFixed(0),
      String(r.result.latency.p50),
      String(r.result.latency.p99),
      String(r.result['2xx'] + r.result.non2xx),
      i === 0 ? '200' : '402',
      String(r.result.errors),
      r.cpuUsPerRequest === undefined ? 'n/a' : r.cpuUsPerRequest.toFixed(0),
      (r.result.requests.average / baseline).toFixed(2),
    ]),
  );
  console.log('');
  for (const r of rows.slice(1)) console.log(`ratio ${r.label} / bare = ${(r.result.requests.average / baseline).toFixed(2)} (aim >= 0.5)`);
}

function reportPaid(report: PaidReport): void {
  const line = (label: string, s: Spread) => [label, String(s.n), ms(s.p50), ms(s.p90), ms(s.p99), ms(s.max)];
  const lines = [
    line('unpaid 402 round trip', report.unpaid),
    line('paid x402 request', report.paid),
    line('  facilitator /verify', report.verify),
    line('  facilitator /settle', report.settle),
    line('  Restock own share', report.restockOwn),
    line('client signing (apart)', report.signing),
  ];
  if (report.concurrent) lines.push(line(`paid, ${report.concurrent.payers} payers at once`, report.concurrent.spread));
  printTable(['sequential, one client', 'n', 'p50 ms', 'p90 ms', 'p99 ms', 'max ms'], [26, 5, 7, 7, 7, 7], lines);
  if (report.concurrent) console.log(`\n${report.concurrent.payers} payers at once: ${report.concurrent.perSecond.toFixed(1)} paid req/s`);
}

function jsonSummary(rounds: LoadRow[][], paid: PaidReport | undefined, failed: boolean): string {
  const round = (rows: LoadRow[]) =>
    rows.map((r) => ({
      label: r.label,
      rps: Math.round(r.result.requests.average),
      p50: r.result.latency.p50,
      p99: r.result.latency.p99,
      cpuUsPerRequest: r.cpuUsPerRequest === undefined ? null : Math.round(r.cpuUsPerRequest),
      ratio: Number((r.result.requests.average / rows[0]!.result.requests.average).toFixed(3)),
    }));
  const paidSummary = paid && {
    unpaid: paid.unpaid,
    paid: paid.paid,
    verify: paid.verify,
    settle: paid.settle,
    restockOwn: paid.restockOwn,
    signing: paid.signing,
    concurrent: paid.concurrent ?? null,
  };
  return `BENCH_JSON ${JSON.stringify({ connections: CONNECTIONS, duration: DURATION, rounds: rounds.map(round), paid: paidSummary ?? null, failed })}`;
}

// ---------------------------------------------------------------------------------------------

async function main(): Promise<number> {
  printSetting();
  console.log(
    `bench: 402 path vs bare, ${CONNECTIONS} connections, ${WARMUP} s warm-up + ${DURATION} s measured per target, ` +
      `${ROUNDS} round${ROUNDS === 1 ? '' : 's'}; then ${PAID} sequential paid x402 requests` +
      (PAID_CONCURRENCY > 0 ? ` and ${PAID_CONCURRENT} by ${PAID_CONCURRENCY} payers at once` : '') +
      '; 127.0.0.1, SQLite FULL',
  );

  process.stdout.write('  starting anvil, USDC and the facilitator ... ');
  const chain = await startX402Chain({ payerBalance: PAYER_BALANCE });
  process.stdout.write('done\n');
  const relay = await startTimingRelay(chain.facilitatorUrl);
  const rounds: LoadRow[][] = [];
  const problems: string[] = [];
  const checks: string[] = [];
  let paid: PaidReport | undefined;
  try {
    const restock = await startRestock(chain, relay.url);
    let stopped = false;
    try {
      for (const label of ['POST subscribe', 'GET /api']) {
        const url = restock.base + (label === 'GET /api' ? API_INDEX_PATH : SUBSCRIBE_PATH);
        const init: RequestInit = label === 'GET /api' ? {} : { method: 'POST', headers: { 'content-type': 'application/json' }, body: subscriptionBody('look@example.com') };
        problems.push(...(await checkPaymentRequired(label, await fetch(url, { ...init, signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) }), chain)));
      }
      for (let i = 1; i <= ROUNDS; i++) {
        if (ROUNDS > 1) console.log(`\nround ${i} of ${ROUNDS}`);
        const rows = await loadRound(restock);
        rounds.push(rows);
        reportLoad(rows);
      }
      const burst = await checkChallengeBurst(restock.base + API_INDEX_PATH);
      checks.push(burst.check);
      problems.push(...burst.problems);
      console.log('');
      const balancesBefore = { payTo: await chain.usdcBalance(chain.payTo.address), payer: await chain.usdcBalance(chain.payer.address) };
      paid = await measurePaid(restock, chain, relay);
      const received = (await chain.usdcBalance(chain.payTo.address)) - balancesBefore.payTo;
      const spent = balancesBefore.payer - (await chain.usdcBalance(chain.payer.address)) + paid.concurrentSpent;
      const stopProblem = await stopChild(restock.child);
      stopped = true;
      if (stopProblem) problems.push(stopProblem);
      reportPaid(paid);
      const outcome = checkPaid(paid, received, spent, ledgerCounts(restock.dataDir));
      checks.push(...outcome.checks);
      problems.push(...paid.problems.map((p) => `paid: ${p}`), ...outcome.problems);
    } finally {
      if (!stopped) await stopChild(restock.child);
      await restock.database.drop();
    }
  } finally {
    await relay.close();
    await chain.close();
  }

  for (const rows of rounds) for (const r of rows) problems.push(...r.problems.map((p) => `${r.label}: ${p}`));
  printMedianRatios(rounds);
  printChecks(checks);
  if (process.env.BENCH_JSON === '1') console.log(jsonSummary(rounds, paid, problems.length > 0));
  return exitCodeFor(problems);
}

runMain(main);
