/**
 * Alert fan-out: one restock of a variant 100,000 shoppers wait for, from the inventory report to
 * the last alert received by a real SMTP server, against plain pooled nodemailer (its sockets
 * without Nagle's delay, as the service's are) sending as many messages to the same server in the
 * same run. See docs/performance.md, "Alert fan-out".
 *
 *   npm run bench:fanout                          baseline, then Restock on SQLite (FULL)
 *   BENCH_COUNT=5000 npm run bench:fanout         a quick check
 *   BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432 npm run bench:fanout
 *                                                 also PostgreSQL, in a database made and dropped here
 *
 * Settings: BENCH_COUNT (subscribers and messages, default 100000), BENCH_ROUNDS (default 1;
 * baseline and services take turns, medians at the end), BENCH_SQLITE=0 (PostgreSQL only),
 * BENCH_TIMEOUT (seconds a delivery phase may take, default 1800), BENCH_PROFILE=<dir> (the
 * service writes V8 CPU profiles there), BENCH_JSON=1 (one machine-readable summary line),
 * BENCH_WORKERS=n (below).
 * SMTP_POOL_SIZE (default 5) and DISPATCH_CLAIM_SIZE (default 500) apply to both sides: the
 * pool's connections, and how many sendMail calls are outstanding at once.
 *
 * Processes, all on 127.0.0.1: the SMTP sink (bench/fanout-sink.ts, smtp-server draining and
 * counting each message), the baseline (bench/fanout-baseline.ts) and `restock serve` with its
 * dispatch worker inside, on a fresh database each time. For each service run the bench creates
 * the store with `restock store create`, claims a store-bound agent through the API (the claim
 * code is read at the sink), inserts the waiting subscriptions straight into the table in the
 * shape the API writes (the bound agent's, strictly increasing signup times), then reports the
 * variant back in stock through POST /api/v1/stores/:domain/inventory. The clock starts when
 * that request is sent and stops when the sink has received the last message. Afterwards the
 * ledger must hold one `sent` row per subscriber and every subscriber must have got exactly one
 * mail; anything else fails the run (exit 1).
 *
 *   npm run bench:fanout -- --mixed               the mixed audience (below), 10,000 subscribers
 *   BENCH_ROUNDS=2 BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432 npm run bench:fanout -- --mixed
 *
 *   BENCH_WORKERS=2 BENCH_SQLITE=0 BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432 npm run bench:fanout
 *                                                 also PostgreSQL with the API alone (RUN_WORKER=false
 *                                                 restock serve) and two `restock worker` processes
 *
 * BENCH_WORKERS=n (PostgreSQL only, 2 to 8): after the embedded run, the same fan-out sent by n
 * `restock worker` processes sharing the work through leases and SKIP LOCKED. Each worker's SMTP
 * pool greets with an EHLO name of its own, so the sink tells how many messages each sent; the
 * report gives each worker's share, CPU per alert and peak RSS, and the run's alerts/s counts
 * every worker's messages. The same exactly-once checks apply (the sink: one message per
 * subscriber, no duplicate; the ledger: one sent row per subscription, every one notified).
 *
 * --mixed (or BENCH_MIXED=1): every subscriber has e-mail, BENCH_SMS_PERCENT (30) of them also a
 * confirmed phone and BENCH_PUSH_PERCENT (20) also a browser push subscription, chosen
 * independently (subscriber n: SMS when n mod 100 < 30, push when 37n mod 100 < 20, so 6% have
 * all three). Two more processes: the Twilio stand-in (bench/fanout-twilio.ts, the project's
 * test/fixtures/twilio-stand-in.ts, whose signed status callbacks come back to the service) and a
 * lean push service answering 201 (bench/fanout-push-sink.ts). Per database and round the service
 * runs twice on fresh databases, alternating which goes first: e-mail only, and mixed, with the
 * same settings (Twilio account, TENANT_OUTBOUND_ALLOW=127.0.0.1/32, the store's SMS quiet hours
 * off) and the same subscribers; only the phones and browsers differ. The clock stops at the last
 * message of any channel. Reported: messages per second per channel, and the ratio of the mixed
 * run's messages per second to the e-mail-only run's and to the baseline's. Besides the checks
 * above, the stand-in must have accepted exactly one text per phone and the push sink one
 * well-formed message per browser; the ledger must hold one sent row per channel of each
 * subscriber, every text with Twilio's Message SID and its `delivered` report recorded; and one
 * sampled push must decrypt (RFC 8291) to the alert. Settings: BENCH_SMS_PERCENT,
 * BENCH_PUSH_PERCENT; BENCH_COUNT defaults to 10,000 here.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createECDH, createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import SqliteDriver from 'better-sqlite3';
import pg from 'pg';
import { newId, newOpaqueId } from '../src/core/ids.ts';
import type { BaselineEvent } from './fanout-baseline.ts';
import { PUSH_PATH, type CounterEvent } from './fanout-counter.ts';
import type { PushSample, PushSinkCommand, PushSinkEvent } from './fanout-push-sink.ts';
import type { PhaseStats, SinkCommand, SinkEvent } from './fanout-sink.ts';
import type { CallbackStats, TwilioCommand, TwilioEvent } from './fanout-twilio.ts';
import { dialectsSetting, exitCodeFor, fail, guardProcess, intSetting, pgSetting, profileSetting, runMain } from './lib.ts';
import { baseUrl, cpuSeconds, freePort, restockEnv, startServer, stopChild, type Child } from './lib.ts';
import { postgresScratch, sqliteScratch, type ScratchDatabase } from './lib.ts';
import { median, printChecks, printSetting, printTable, restockCli } from './lib.ts';
import { expectStatus, killedOnExit, requestJson } from './lib.ts';
import { claimStoreAgent, startIpcChild, stopIpcChild, type IpcChild } from './ipc-child.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

// ---------------------------------------------------------------------------------------------
// Settings

type Dialect = 'sqlite' | 'postgres';


const ARGS = process.argv.slice(2);
for (const arg of ARGS) if (arg !== '--mixed') fail(`unknown argument ${arg} (the only one is --mixed)`);
/** The mixed audience: e-mail, SMS and web push (see the top of this file). */
const MIXED = ARGS.includes('--mixed') || process.env.BENCH_MIXED === '1';
const COUNT = intSetting('BENCH_COUNT', MIXED ? 10_000 : 100_000, 1, 2_000_000);
const SMS_PERCENT = intSetting('BENCH_SMS_PERCENT', 30, 0, 100);
const PUSH_PERCENT = intSetting('BENCH_PUSH_PERCENT', 20, 0, 100);
const ROUNDS = intSetting('BENCH_ROUNDS', 1, 1, 20);
const TIMEOUT_S = intSetting('BENCH_TIMEOUT', 1800, 10, 7200);
const POOL_SIZE = intSetting('SMTP_POOL_SIZE', 5, 1, 100);
const CLAIM_SIZE = intSetting('DISPATCH_CLAIM_SIZE', 500, 1, 5000);
const PG_ADMIN = pgSetting();
/** `restock worker` processes of the extra PostgreSQL run; 0: no such run. */
const WORKERS = intSetting('BENCH_WORKERS', 0, 0, 8);
const PROFILE_DIR = profileSetting();
const DIALECTS: Dialect[] = dialectsSetting(PG_ADMIN);

/** No message for this long during a delivery phase: the phase is given up. */
const STALL_MS = 60_000;
/** After the last message, how long the ledger may take to record it. */
const LEDGER_TIMEOUT_MS = 60_000;
const MAIL_FROM = 'Restock <alerts@restock.localhost>';
const DOMAIN = 'fanout-bench.myshopify.com';
const OWNER = 'owner@fanout-bench.example';
const PRODUCT = {
  productId: 'gid://shopify/Product/9100',
  variantId: 'gid://shopify/ProductVariant/9101',
  productTitle: 'Fan-out Widget',
  variantTitle: 'Blue / M',
  productUrl: `https://${DOMAIN}/products/widget`,
  imageUrl: 'https://cdn.example.com/widget.png',
};
const SECRET = 'fanout-bench-secret-0123456789abcdef0123456789';
const TAG = randomBytes(3).toString('hex');

/** The service's Twilio account in --mixed runs (the stand-in knows it): AC + 32 hex, 32 hex, E.164. */
const TWILIO = { accountSid: `AC${'f4'.repeat(16)}`, authToken: 'b7'.repeat(16), from: '+15005550006' };
const WORKER_RUN = WORKERS > 0 && DIALECTS.includes('postgres');
if (WORKERS === 1) fail('BENCH_WORKERS is 0 (off) or 2 to 8: one worker process is the embedded run over again');
if (WORKERS > 0 && !DIALECTS.includes('postgres')) fail('BENCH_WORKERS needs PostgreSQL (BENCH_DATABASE_URL): SQLite has one writer, so one process');
if (WORKERS > 0 && MIXED) fail('BENCH_WORKERS and --mixed are separate runs');
const SERVICE_RUNS = DIALECTS.length * (MIXED ? 2 : 1) + (WORKER_RUN ? 1 : 0);

guardProcess(ROUNDS * (TIMEOUT_S * (1 + SERVICE_RUNS) + 240 * SERVICE_RUNS + 120) * 1000 + 60_000);

const now = () => performance.timeOrigin + performance.now();

/** A process's resident set size now (VmRSS) or at its peak (VmHWM), in MB; undefined where /proc cannot tell. */
function rssMb(pid: number | undefined, field: 'VmRSS' | 'VmHWM'): number | undefined {
  if (pid === undefined) return undefined;
  try {
    const match = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    return match ? Number(match[1]) / 1024 : undefined;
  } catch {
    return undefined;
  }
}
const peakRssMb = (pid: number | undefined) => rssMb(pid, 'VmHWM');

/** Samples a process's RSS every 200 ms, so the report can say when the peak came. */
function sampleRss(pid: number | undefined) {
  const samples: Array<{ at: number; mb: number }> = [];
  const take = () => {
    const mb = rssMb(pid, 'VmRSS');
    if (mb !== undefined) samples.push({ at: now(), mb });
  };
  take();
  const timer = setInterval(take, 200);
  timer.unref();
  return {
    stop() {
      clearInterval(timer);
      take();
      return samples;
    },
  };
}

function rssStory(samples: Array<{ at: number; mb: number }>, start: number, firstAt: number | null): string {
  if (samples.length === 0) return 'n/a';
  const before = samples[0]!.mb;
  const peak = samples.reduce((a, b) => (b.mb > a.mb ? b : a));
  const atFirst = firstAt === null ? undefined : samples.find((s) => s.at >= firstAt);
  return (
    `${before.toFixed(0)} MB at the report, ${atFirst ? `${atFirst.mb.toFixed(0)} MB at the first alert, ` : ''}` +
    `highest sample ${peak.mb.toFixed(0)} MB at ${((peak.at - start) / 1000).toFixed(1)} s, ${samples[samples.length - 1]!.mb.toFixed(0)} MB at the end`
  );
}

// ---------------------------------------------------------------------------------------------
// The sink

type Sink = IpcChild<SinkEvent> & {
  url: string;
  command(command: SinkCommand): void;
  /** Waits until the phase's count has arrived; gives up on the deadline or a stall, with what came. */
  deliveries(phase: string, deadlineMs: number): Promise<Delivered>;
};

interface Delivered {
  stats: PhaseStats;
  complete: boolean;
}

/** The events every counting child sends (the SMTP sink, the Twilio stand-in, the push sink). */
type PhaseEvent = Extract<SinkEvent | CounterEvent, { type: 'progress' | 'complete' | 'report' }>;

/**
 * Waits until the phase's count has arrived at a counting child; gives up on the deadline or
 * after STALL_MS without a message, and then asks for what came.
 */
async function awaitPhase<E extends { type: string }>(child: IpcChild<E>, askReport: () => void, phase: string, deadlineMs: number): Promise<Delivered> {
  const events = child as unknown as IpcChild<PhaseEvent>;
  let lastProgress = now();
  let lastCount = 0;
  const off = events.on((e) => {
    if (e.type === 'progress' && e.phase === phase && e.received !== lastCount) {
      lastCount = e.received;
      lastProgress = now();
    }
  });
  const complete = events.next((e): e is Extract<PhaseEvent, { type: 'complete' }> => e.type === 'complete' && e.phase === phase, deadlineMs, 'complete');
  const stalled = new Promise<'stalled'>((resolve) => {
    const timer = setInterval(() => {
      if (now() - lastProgress > STALL_MS) {
        clearInterval(timer);
        resolve('stalled');
      }
    }, 1000);
    void complete.finally(() => clearInterval(timer)).catch(() => {});
  });
  try {
    const outcome = await Promise.race([complete.then((s) => ({ stats: s as PhaseStats })), stalled]);
    if (outcome !== 'stalled') return { stats: outcome.stats, complete: true };
  } catch {
    // the deadline: report what came
  } finally {
    off();
  }
  const reported = events.next((e): e is Extract<PhaseEvent, { type: 'report' }> => e.type === 'report', 10_000, 'report');
  askReport();
  return { stats: await reported, complete: false };
}

async function startSink(): Promise<Sink> {
  const child = startIpcChild<SinkEvent>('SMTP sink', path.join('bench', 'fanout-sink.ts'), process.env);
  const ready = await child.next((e): e is Extract<SinkEvent, { type: 'ready' }> => e.type === 'ready', 30_000, 'ready');
  const command = (c: SinkCommand) => void child.process.send(c);
  return {
    ...child,
    url: `smtp://127.0.0.1:${ready.port}`,
    command,
    deliveries: (phase, deadlineMs) => awaitPhase(child, () => command({ type: 'report' }), phase, deadlineMs),
  };
}

/** The Twilio stand-in and the push sink of --mixed runs. */
interface ChannelSinks {
  twilio: IpcChild<TwilioEvent> & { url: string; command(command: TwilioCommand): void };
  push: IpcChild<PushSinkEvent> & { origin: string; command(command: PushSinkCommand): void };
}

async function startChannelSinks(): Promise<ChannelSinks> {
  const twilio = startIpcChild<TwilioEvent>('Twilio stand-in', path.join('bench', 'fanout-twilio.ts'), {
    ...process.env,
    FANOUT_TWILIO_SID: TWILIO.accountSid,
    FANOUT_TWILIO_TOKEN: TWILIO.authToken,
    FANOUT_TWILIO_FROM: TWILIO.from,
  });
  const push = startIpcChild<PushSinkEvent>('push sink', path.join('bench', 'fanout-push-sink.ts'), process.env);
  const twilioReady = await twilio.next((e): e is Extract<TwilioEvent, { type: 'ready' }> => e.type === 'ready', 30_000, 'ready');
  const pushReady = await push.next((e): e is Extract<PushSinkEvent, { type: 'ready' }> => e.type === 'ready', 30_000, 'ready');
  return {
    twilio: { ...twilio, url: twilioReady.url, command: (c) => void twilio.process.send(c) },
    push: { ...push, origin: pushReady.origin, command: (c) => void push.process.send(c) },
  };
}

// ---------------------------------------------------------------------------------------------
// One run: the baseline or the service

interface Row {
  label: string;
  dialect: Dialect | 'baseline';
  stats: PhaseStats;
  complete: boolean;
  /** From the start (the report request, or the go) to the last message, in seconds. */
  seconds: number;
  /** From the start to the first message. */
  firstSeconds: number | null;
  /** Messages received per second over `seconds`. */
  rate: number;
  cpuSeconds: number | undefined;
  sinkCpuSeconds: number | undefined;
  peakRssMb: number | undefined;
  /** Time to the answer of the inventory report (service only). */
  reportMs?: number;
  /** Times to 10%, 50%, 90% of the messages, seconds from the start. */
  quantiles: Array<number | null>;
  problems: string[];
  checks: string[];
  /** --mixed runs: what each channel carried. */
  mixed?: MixedFigures;
  /** BENCH_WORKERS runs: each `restock worker` process (the API process apart). */
  workers?: WorkerFigures[];
}

interface WorkerFigures {
  name: string;
  /** Messages the sink received on this worker's connections, and their share of all. */
  messages: number;
  share: number;
  cpuMsPerMessage: number | undefined;
  peakRssMb: number | undefined;
}

type Channel = 'email' | 'sms' | 'push';
const CHANNELS: Channel[] = ['email', 'sms', 'push'];

interface ChannelFigures {
  expected: number;
  received: number;
  /** From the start to the channel's first and last message, seconds. */
  firstSeconds: number | null;
  lastSeconds: number | null;
  /** Messages per second from the start to the channel's last message. */
  rate: number;
}

interface MixedFigures {
  audience: 'email' | 'mixed';
  subscribers: number;
  channels: Record<Channel, ChannelFigures>;
  /** Every message of every channel, and per second from the start to the last of them. */
  messages: number;
  rate: number;
  /** The service's CPU per message, every channel. */
  cpuMsPerMessage: number | undefined;
  callbacks?: CallbackStats;
  /** SMS rows of the ledger by delivery_status (null: no report recorded). */
  deliveries?: Record<string, number>;
}

function quantileTimes(stats: PhaseStats, start: number, count = COUNT, bucketMs = 100): Array<number | null> {
  if (stats.firstAt === null) return [null, null, null];
  const offset = (stats.firstAt - start) / 1000;
  return [0.1, 0.5, 0.9].map((q) => {
    const goal = Math.ceil(q * count);
    let sum = 0;
    for (let i = 0; i < stats.buckets.length; i++) {
      sum += stats.buckets[i]!;
      if (sum >= goal) return offset + ((i + 1) * bucketMs) / 1000;
    }
    return null;
  });
}

/** What a counting child's phase says is wrong: too few, duplicates, unexpected, someone missed. */
function deliveryProblems(what: string, outcome: Delivered, count: number): string[] {
  const { stats, complete } = outcome;
  const problems: string[] = [];
  if (!complete) problems.push(`only ${stats.received} of ${count} ${what} arrived (deadline ${TIMEOUT_S} s, or nothing for ${STALL_MS / 1000} s)`);
  if (stats.duplicates > 0) problems.push(`DUPLICATES: ${stats.duplicates} ${what} went to a recipient that already had one`);
  if (stats.unexpected > 0) problems.push(`${stats.unexpected} ${what} to an unexpected recipient or malformed (first: ${stats.firstUnexpected})`);
  if (complete && stats.distinct !== count) problems.push(`${count - stats.distinct} of the ${count} recipients got no ${what}`);
  return problems;
}

function rowOf(label: string, dialect: Row['dialect'], outcome: Delivered, start: number): Omit<Row, 'cpuSeconds' | 'sinkCpuSeconds' | 'peakRssMb'> {
  const { stats, complete } = outcome;
  const end = stats.lastAt ?? now();
  const seconds = (end - start) / 1000;
  const problems = deliveryProblems('messages', outcome, COUNT);
  return {
    label,
    dialect,
    stats,
    complete,
    seconds,
    firstSeconds: stats.firstAt === null ? null : (stats.firstAt - start) / 1000,
    rate: stats.received / seconds,
    quantiles: quantileTimes(stats, start),
    problems,
    checks: [`${label}: sink got ${stats.received} messages, ${stats.distinct} distinct recipients of ${COUNT}, ${stats.duplicates} duplicates, ${stats.unexpected} unexpected`],
  };
}

async function runBaseline(sink: Sink, round: number): Promise<Row> {
  const prefix = `base${round}-${TAG}-`;
  const url = new URL(sink.url);
  // What SmtpTransport gives the library for SMTP_URL (its default timeouts and the pool size).
  for (const [key, value] of Object.entries({ pool: 'true', connectionTimeout: '10000', greetingTimeout: '10000', socketTimeout: '30000', maxConnections: String(POOL_SIZE) })) {
    url.searchParams.set(key, value);
  }
  const child = startIpcChild<BaselineEvent>('baseline', path.join('bench', 'fanout-baseline.ts'), {
    ...process.env,
    FANOUT_SMTP_URL: url.toString(),
    FANOUT_COUNT: String(COUNT),
    FANOUT_PREFIX: prefix,
    FANOUT_WINDOW: String(CLAIM_SIZE),
    FANOUT_FROM: MAIL_FROM,
  });
  try {
    await child.next((e): e is Extract<BaselineEvent, { type: 'ready' }> => e.type === 'ready', 30_000, 'ready');
    sink.command({ type: 'expect', phase: `baseline ${round}`, prefix, count: COUNT });
    process.stdout.write(`  baseline: sending ${COUNT} messages ... `);
    const pid = child.process.pid;
    const cpu0 = cpuSeconds(pid);
    const sinkCpu0 = cpuSeconds(sink.process.pid);
    const start = now();
    child.process.send({ type: 'go' });
    const sent = child.next((e): e is Extract<BaselineEvent, { type: 'sent' }> => e.type === 'sent', TIMEOUT_S * 1000 + 30_000, 'the end of sending');
    sent.catch(() => {});
    const outcome = await sink.deliveries(`baseline ${round}`, TIMEOUT_S * 1000);
    const row = rowOf('baseline nodemailer', 'baseline', outcome, start);
    if (outcome.complete) {
      const result = await sent;
      if (result.failed > 0) row.problems.push(`${result.failed} sendMail calls failed (first: ${result.firstError})`);
    }
    const cpu1 = cpuSeconds(pid);
    const sinkCpu1 = cpuSeconds(sink.process.pid);
    process.stdout.write(`${Math.round(row.rate)} msgs/s\n`);
    return {
      ...row,
      cpuSeconds: cpu0 !== undefined && cpu1 !== undefined ? cpu1 - cpu0 : undefined,
      sinkCpuSeconds: sinkCpu0 !== undefined && sinkCpu1 !== undefined ? sinkCpu1 - sinkCpu0 : undefined,
      peakRssMb: peakRssMb(pid),
    };
  } finally {
    await stopIpcChild(child);
  }
}

// ---------------------------------------------------------------------------------------------
// The service's set-up: database, store, agent, subscribers

/** What was seeded: the e-mail prefix, and in --mixed runs the phones and browsers. */
interface Seeded {
  prefix: string;
  seconds: number;
  audience: Audience;
}

/**
 * Who waits, and on which channels. Subscriber n has the e-mail `<prefix>n@example.com`; in a
 * mixed audience also the phone `<phonePrefix>n` (7 digits) when n mod 100 < BENCH_SMS_PERCENT,
 * and the browser `<push origin>/wpush/v2/<pushPrefix>n` when 37n mod 100 < BENCH_PUSH_PERCENT
 * (37 is prime to 100: every 100 consecutive subscribers hold each share exactly, independently
 * of the SMS one).
 */
interface Audience {
  kind: 'email' | 'mixed';
  prefix: string;
  phonePrefix: string;
  pushPrefix: string;
  pushOrigin: string;
  sms: number[];
  push: number[];
}

/** Two digits that keep one run's phone numbers apart from the others'. */
let phaseCode = 10;

function audienceOf(kind: Audience['kind'], prefix: string, pushOrigin: string): Audience {
  const code = phaseCode++;
  const sms: number[] = [];
  const push: number[] = [];
  if (kind === 'mixed') {
    for (let n = 0; n < COUNT; n++) {
      if (n % 100 < SMS_PERCENT) sms.push(n);
      if ((37 * n) % 100 < PUSH_PERCENT) push.push(n);
    }
  }
  return { kind, prefix, phonePrefix: `+1555${code}`, pushPrefix: `${prefix}p`, pushOrigin, sms, push };
}

const phoneOf = (audience: Audience, n: number) => `${audience.phonePrefix}${String(n).padStart(7, '0')}`;
const endpointOf = (audience: Audience, n: number) => `${audience.pushOrigin}${PUSH_PATH}${audience.pushPrefix}${n}`;

/**
 * `COUNT` active subscriptions to the variant, as the API writes them: by the bound agent
 * (`agentId`), or from the storefront's form (null), with the address key and the consent.
 */
function subscriptionRows(prefix: string, agentId: string | null) {
  const first = Date.now() - COUNT - 60_000;
  return Array.from({ length: COUNT }, (_, i) => {
    const at = new Date(first + i).toISOString();
    const email = `${prefix}${i}@example.com`;
    return {
      id: newId('sub'),
      product_id: PRODUCT.productId,
      variant_id: PRODUCT.variantId,
      email,
      email_key: email,
      status: 'active',
      store_domain: DOMAIN,
      agent_id: agentId,
      created_at: at,
      updated_at: at,
      consent_method: agentId ? 'agent-api' : 'storefront-form',
      consent_text: agentId ? `subscribed through the API by agent ${agentId}` : 'Notify me when available',
      consent_page: agentId ? null : PRODUCT.productUrl,
    };
  });
}

type SubscriptionSeedRow = ReturnType<typeof subscriptionRows>[number];

/** The shoppers' time zones (quiet hours are off for the bench's store, so they only cost the check). */
const TIME_ZONES = ['America/New_York', 'Europe/Paris', 'Asia/Tokyo', null];

interface ContactSeedRow {
  id: string;
  subscription_id: string;
  store_domain: string;
  channel: 'sms' | 'push';
  address: string;
  address_key: string;
  /** What the channel keeps beyond the address (migration 0025): a browser's push keys, `{}` for a phone. */
  details: string;
  status: 'active';
  time_zone: string | null;
  consent_method: string;
  consent_text: string;
  consent_page: string;
  consent_at: string;
  confirmed_at: string;
  confirmation_sent_at: string | null;
  created_at: string;
  updated_at: string;
}

/**
 * The phones and browsers of a mixed audience, as the storefront's form writes them: a phone
 * with its consent, confirmed by the shopper's YES a minute after the "reply YES" text; a browser
 * with real P-256 keys and a 16-byte auth secret, active from the start (the permission prompt
 * was the yes). The first browser's private key is kept, so the push sink can decrypt its alert.
 */
function contactRows(audience: Audience, subscriptions: SubscriptionSeedRow[]): { rows: ContactSeedRow[]; sample: PushSample | undefined } {
  const rows: ContactSeedRow[] = [];
  let sample: PushSample | undefined;
  const common = (n: number) => {
    const sub = subscriptions[n]!;
    const confirmed = new Date(Date.parse(sub.created_at) + 60_000).toISOString();
    return { subscription_id: sub.id, store_domain: DOMAIN, status: 'active' as const, time_zone: TIME_ZONES[n % TIME_ZONES.length] ?? null, consent_page: PRODUCT.productUrl, consent_at: sub.created_at, created_at: sub.created_at, updated_at: confirmed, confirmed };
  };
  for (const n of audience.sms) {
    const { confirmed, ...c } = common(n);
    const phone = phoneOf(audience, n);
    rows.push({
      ...c,
      id: newOpaqueId('cp'),
      channel: 'sms',
      address: phone,
      address_key: phone,
      details: '{}',
      consent_method: 'storefront-checkbox',
      consent_text: 'Text me when it is back in stock. Msg & data rates may apply. Reply STOP to opt out.',
      confirmed_at: confirmed,
      confirmation_sent_at: c.created_at,
    });
  }
  for (const n of audience.push) {
    const { confirmed: _confirmed, ...c } = common(n);
    const endpoint = endpointOf(audience, n);
    const ecdh = createECDH('prime256v1');
    const publicKey = ecdh.generateKeys().toString('base64url');
    const auth = randomBytes(16).toString('base64url');
    sample ??= { endpoint, publicKey, auth, privateKey: ecdh.getPrivateKey().toString('base64url') };
    rows.push({
      ...c,
      id: newOpaqueId('cp'),
      channel: 'push',
      address: endpoint,
      address_key: createHash('sha256').update(endpoint).digest('base64url'),
      details: JSON.stringify({ p256dh: publicKey, auth }),
      consent_method: 'browser-permission',
      consent_text: 'allowed notifications from this site when asked by the browser',
      confirmed_at: c.created_at,
      confirmation_sent_at: null,
    });
  }
  return { rows, sample };
}

interface DatabaseAccess {
  /** Seeds the audience; returns the push sample's keys, when there are browsers. */
  seed(audience: Audience, agentId: string | null): Promise<{ seconds: number; sample: PushSample | undefined }>;
  /** The ledger as it stands: rows per status and channel, distinct subscriptions sent, subscriptions notified, the restock. */
  ledger(): Promise<Ledger>;
  close(): Promise<void>;
}

interface Ledger {
  byStatus: Record<string, number>;
  /** Per channel, rows per status. */
  byChannel: Record<string, Record<string, number>>;
  /** Per channel, distinct subscriptions with a sent row. */
  distinctSent: Record<string, number>;
  /** Sent texts with Twilio's Message SID recorded. */
  smsWithRef: number;
  /** Sent texts by delivery_status ('none': no report recorded). */
  deliveries: Record<string, number>;
  notified: number;
  restock: { status: string; batches: number; planned: number } | undefined;
  /** Earliest and latest sent_at, ISO. */
  firstSentAt: string | null;
  lastSentAt: string | null;
}

const SEED_CHUNK = 5000;
const SUBSCRIPTION_COLUMNS = ['id', 'product_id', 'variant_id', 'email', 'email_key', 'status', 'store_domain', 'agent_id', 'created_at', 'updated_at', 'consent_method', 'consent_text', 'consent_page'] as const;
const CONTACT_COLUMNS = [
  'id',
  'subscription_id',
  'store_domain',
  'channel',
  'address',
  'address_key',
  'details',
  'status',
  'time_zone',
  'consent_method',
  'consent_text',
  'consent_page',
  'consent_at',
  'confirmed_at',
  'confirmation_sent_at',
  'created_at',
  'updated_at',
] as const;
const TIMESTAMP_COLUMNS = new Set(['created_at', 'updated_at', 'consent_at', 'confirmed_at', 'confirmation_sent_at']);

/** The ledger's queries, the same text on both databases. */
const LEDGER_SQL = {
  byChannel: 'select channel, status, count(*) as n from notifications group by channel, status',
  distinct: "select channel, count(distinct subscription_id) as n from notifications where status = 'sent' group by channel",
  sent: "select min(sent_at) as first, max(sent_at) as last from notifications where status = 'sent'",
  sms: "select count(provider_ref) as refs, coalesce(delivery_status, 'none') as delivery, count(*) as n from notifications where channel = 'sms' and status = 'sent' group by coalesce(delivery_status, 'none')",
  notified: "select count(*) as n from subscriptions where status = 'notified'",
  restock: 'select status, batches, planned from restocks',
};

function ledgerOf(
  byChannelRows: Array<{ channel: string; status: string; n: number | string }>,
  distinctRows: Array<{ channel: string; n: number | string }>,
  smsRows: Array<{ refs: number | string; delivery: string; n: number | string }>,
  rest: Pick<Ledger, 'notified' | 'restock' | 'firstSentAt' | 'lastSentAt'>,
): Ledger {
  const byStatus: Record<string, number> = {};
  const byChannel: Record<string, Record<string, number>> = {};
  for (const r of byChannelRows) {
    byStatus[r.status] = (byStatus[r.status] ?? 0) + Number(r.n);
    (byChannel[r.channel] ??= {})[r.status] = Number(r.n);
  }
  const deliveries: Record<string, number> = {};
  let smsWithRef = 0;
  for (const r of smsRows) {
    deliveries[r.delivery] = Number(r.n);
    smsWithRef += Number(r.refs);
  }
  return { byStatus, byChannel, distinctSent: Object.fromEntries(distinctRows.map((r) => [r.channel, Number(r.n)])), smsWithRef, deliveries, ...rest };
}

function sqliteAccess(file: string): DatabaseAccess {
  const driver = new SqliteDriver(file, { timeout: 10_000 });
  const insertInto = (table: string, columns: readonly string[]) => driver.prepare(`insert into ${table} (${columns.join(', ')}) values (${columns.map((c) => `@${c}`).join(', ')})`);
  return {
    async seed(audience, agentId) {
      const start = now();
      const rows = subscriptionRows(audience.prefix, agentId);
      const contacts = contactRows(audience, rows);
      const subscriptions = insertInto('subscriptions', SUBSCRIPTION_COLUMNS);
      const points = insertInto('contact_points', CONTACT_COLUMNS);
      const many = driver.transaction((statement: SqliteDriver.Statement, chunk: object[]) => {
        for (const row of chunk) statement.run(row);
      });
      // Chunks, so the running service's worker never waits long for the write lock.
      for (const [statement, all] of [[subscriptions, rows], [points, contacts.rows]] as const) {
        for (let i = 0; i < all.length; i += SEED_CHUNK) {
          many(statement, all.slice(i, i + SEED_CHUNK));
          await new Promise((resolve) => setImmediate(resolve));
        }
      }
      return { seconds: (now() - start) / 1000, sample: contacts.sample };
    },
    async ledger() {
      const all = <T>(statement: string) => driver.prepare(statement).all() as T[];
      const sent = driver.prepare(LEDGER_SQL.sent).get() as { first: string | null; last: string | null };
      return ledgerOf(all(LEDGER_SQL.byChannel), all(LEDGER_SQL.distinct), all(LEDGER_SQL.sms), {
        notified: (driver.prepare(LEDGER_SQL.notified).get() as { n: number }).n,
        restock: driver.prepare(LEDGER_SQL.restock).get() as Ledger['restock'],
        firstSentAt: sent.first,
        lastSentAt: sent.last,
      });
    },
    async close() {
      driver.close();
    },
  };
}

function postgresAccess(url: string): DatabaseAccess {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5000 });
  const connected = client.connect();
  /** One `insert ... select from unnest(...)` per chunk: a column of values per parameter. */
  async function insertAll(table: string, columns: readonly string[], rows: Array<Record<string, unknown>>) {
    const types = columns.map((c) => (TIMESTAMP_COLUMNS.has(c) ? 'timestamptz[]' : 'text[]'));
    const statement = `insert into ${table} (${columns.join(', ')}) select * from unnest(${types.map((t, i) => `$${i + 1}::${t}`).join(', ')})`;
    for (let i = 0; i < rows.length; i += SEED_CHUNK) {
      const chunk = rows.slice(i, i + SEED_CHUNK);
      await client.query(statement, columns.map((c) => chunk.map((row) => row[c] ?? null)));
    }
  }
  return {
    async seed(audience, agentId) {
      await connected;
      const start = now();
      const rows = subscriptionRows(audience.prefix, agentId);
      const contacts = contactRows(audience, rows);
      await insertAll('subscriptions', SUBSCRIPTION_COLUMNS, rows);
      await insertAll('contact_points', CONTACT_COLUMNS, contacts.rows as unknown as Array<Record<string, unknown>>);
      await client.query('analyze subscriptions');
      await client.query('analyze contact_points');
      return { seconds: (now() - start) / 1000, sample: contacts.sample };
    },
    async ledger() {
      await connected;
      const rows = async <T extends pg.QueryResultRow>(statement: string) => (await client.query<T>(statement)).rows;
      const sent = (await rows<{ first: Date | null; last: Date | null }>(LEDGER_SQL.sent))[0]!;
      return ledgerOf(await rows(LEDGER_SQL.byChannel), await rows(LEDGER_SQL.distinct), await rows(LEDGER_SQL.sms), {
        notified: Number((await rows<{ n: string }>(LEDGER_SQL.notified))[0]!.n),
        restock: (await rows<{ status: string; batches: number; planned: number }>(LEDGER_SQL.restock))[0],
        firstSentAt: sent.first?.toISOString() ?? null,
        lastSentAt: sent.last?.toISOString() ?? null,
      });
    },
    async close() {
      await connected.catch(() => {});
      await client.end().catch(() => {});
    },
  };
}

/** Messages each channel must carry: one per subscriber by e-mail, one per phone, one per browser. */
function expectedOf(audience: Audience): Record<Channel, number> {
  return { email: COUNT, sms: audience.sms.length, push: audience.push.length };
}

/** Polls until every planned alert is settled (or the time is up); returns the last look. */
async function settledLedger(db: DatabaseAccess, total: number): Promise<{ ledger: Ledger; waitedMs: number }> {
  const start = now();
  for (;;) {
    const ledger = await db.ledger();
    const pending = (ledger.byStatus.queued ?? 0) + (ledger.byStatus.sending ?? 0);
    const settled = (ledger.byStatus.sent ?? 0) >= total || (ledger.restock?.status !== 'dispatching' && pending === 0);
    if (settled || now() - start > LEDGER_TIMEOUT_MS) return { ledger, waitedMs: now() - start };
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

function ledgerProblems(ledger: Ledger, expected: Record<Channel, number>): string[] {
  const problems: string[] = [];
  const total = Object.values(ledger.byStatus).reduce((a, b) => a + b, 0);
  const wanted = expected.email + expected.sms + expected.push;
  if (total !== wanted) problems.push(`the ledger has ${total} rows, expected ${wanted}`);
  for (const channel of CHANNELS) {
    const sent = ledger.byChannel[channel]?.sent ?? 0;
    if (sent !== expected[channel]) problems.push(`the ledger has ${sent} sent ${channel} rows, expected ${expected[channel]} (${JSON.stringify(ledger.byChannel[channel] ?? {})})`);
    if ((ledger.distinctSent[channel] ?? 0) !== sent) problems.push(`DUPLICATES in the ledger: ${sent} sent ${channel} rows for ${ledger.distinctSent[channel] ?? 0} subscriptions`);
  }
  if (ledger.smsWithRef !== expected.sms) problems.push(`${ledger.smsWithRef} sent texts carry Twilio's Message SID, expected ${expected.sms}`);
  if (ledger.notified !== COUNT) problems.push(`${ledger.notified} subscriptions are notified, expected ${COUNT}`);
  if (ledger.restock?.status !== 'done') problems.push(`the restock is ${ledger.restock?.status ?? 'missing'}, expected done`);
  return problems;
}

/** A --mixed service run: which audience, and the SMS and push sinks. */
interface MixRun {
  kind: Audience['kind'];
  sinks: ChannelSinks;
}

/** Waits for the Twilio stand-in's status callbacks to have been answered by the service. */
async function settleCallbacks(sinks: ChannelSinks): Promise<CallbackStats> {
  const settled = sinks.twilio.next((e): e is Extract<TwilioEvent, { type: 'settled' }> => e.type === 'settled', 75_000, 'settled');
  sinks.twilio.command({ type: 'settle' });
  const { type: _type, ...stats } = await settled;
  return stats;
}

/** A `restock worker` process, running once it has said so. */
interface WorkerChild {
  name: string;
  /** The EHLO name its SMTP pool greets the sink with. */
  ehlo: string;
  process: ChildProcess;
  output(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

async function startWorker(n: number, env: NodeJS.ProcessEnv, smtpUrl: string, extraArgs: string[]): Promise<WorkerChild> {
  const ehlo = `worker${n}.fanout.localhost`;
  const name = `restock worker ${n}`;
  const url = new URL(smtpUrl);
  url.searchParams.set('name', ehlo);
  // Info, for the line that says the worker runs; it logs nothing per alert.
  const child = spawn(process.execPath, [...extraArgs, path.join('bin', 'restock.js'), 'worker'], { cwd: ROOT, env: { ...env, SMTP_URL: url.toString(), LOG_LEVEL: 'info' }, stdio: ['ignore', 'pipe', 'pipe'] });
  killedOnExit(child);
  let tail = '';
  let ready: () => void = () => {};
  const running = new Promise<void>((resolve) => (ready = resolve));
  const keep = (chunk: Buffer) => {
    tail = (tail + chunk.toString()).slice(-65_536);
    if (tail.includes('Restock worker is running')) ready();
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => {
      resolve({ code, signal });
    }),
  );
  let timer: NodeJS.Timeout | undefined;
  const outcome = await Promise.race([
    running.then(() => 'running' as const),
    exited.then(() => 'exited' as const),
    new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), 60_000))),
  ]);
  clearTimeout(timer);
  const worker = { name, ehlo, process: child, output: () => tail, exited };
  if (outcome !== 'running') {
    await stopWorker(worker);
    throw new Error(`${name} ${outcome === 'exited' ? 'exited' : 'did not say it runs within 60 s'}:\n${tail}`);
  }
  return worker;
}

/** SIGTERM (the worker finishes and records what is in flight), then the exit; killed after 30 s. */
async function stopWorker(worker: WorkerChild): Promise<string | undefined> {
  if (worker.process.exitCode !== null || worker.process.signalCode !== null) return undefined;
  worker.process.kill('SIGTERM');
  let timer: NodeJS.Timeout | undefined;
  const outcome = await Promise.race([worker.exited, new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), 30_000)))]);
  clearTimeout(timer);
  if (outcome === 'timeout') {
    worker.process.kill('SIGKILL');
    await worker.exited;
    return `${worker.name} did not exit within 30 s of SIGTERM and was killed`;
  }
  return outcome.code === 0 ? undefined : `${worker.name} exited with ${outcome.code ?? outcome.signal} after SIGTERM:\n${worker.output()}`;
}

async function runService(sink: Sink, dialect: Dialect, round: number, mix?: MixRun, workers = 0): Promise<Row> {
  const label = mix ? `restock ${dialect} ${mix.kind === 'mixed' ? 'mixed' : 'e-mail only'}` : workers > 0 ? `restock ${dialect} ${workers} workers` : `restock ${dialect}`;
  const scratch: ScratchDatabase = dialect === 'sqlite' ? sqliteScratch('restock-fanout', 'FULL') : await postgresScratch(PG_ADMIN!, 'restock_fanout');
  let service: Child | undefined;
  const workerChildren: WorkerChild[] = [];
  let db: DatabaseAccess | undefined;
  let result: Row | undefined;
  try {
    const port = await freePort();
    const env = restockEnv(port, {
      ...scratch.env,
      SMTP_URL: sink.url,
      SMTP_POOL_SIZE: String(POOL_SIZE),
      DISPATCH_CLAIM_SIZE: String(CLAIM_SIZE),
      FREQUENCY_CAP_MINUTES: '0',
      // One batch takes everyone (stock = subscribers, × the multiplier); no pause should there be more.
      BATCH_INTERVAL_SECONDS: '0',
      // The report wakes the in-process worker at once; a short poll only bounds a missed wake-up.
      DISPATCH_POLL_MS: '100',
      RESTOCK_SECRET: SECRET,
      LOG_LEVEL: 'warn',
      // The API alone: the worker processes send.
      ...(workers > 0 && { RUN_WORKER: 'false' }),
      // Both runs of --mixed, e-mail only too: the service's Twilio account (the stand-in), push
      // endpoints on loopback allowed, and the address Twilio's status callbacks are signed for.
      ...(mix && {
        TWILIO_ACCOUNT_SID: TWILIO.accountSid,
        TWILIO_AUTH_TOKEN: TWILIO.authToken,
        TWILIO_FROM: TWILIO.from,
        TWILIO_API_URL: mix.sinks.twilio.url,
        TENANT_OUTBOUND_ALLOW: '127.0.0.1/32',
        BASE_URL: baseUrl(port),
      }),
    });
    process.stdout.write(`  ${label}: database, store, agent, ${COUNT} subscribers ... `);
    await restockCli(['migrate'], env);
    await restockCli(['store', 'create', DOMAIN, '--owner', OWNER], env);
    // One file per thread (the main thread's ends in .0.001.cpuprofile, or the lowest sequence).
    const profile = PROFILE_DIR ? ['--cpu-prof', `--cpu-prof-dir=${PROFILE_DIR}`] : [];
    service = await startServer(label, [...profile, path.join('bin', 'restock.js'), 'serve'], env, port, '/api/health');
    for (let n = 1; n <= workers; n++) workerChildren.push(await startWorker(n, env, sink.url, profile));
    const base = baseUrl(port);
    const agent = await claimStoreAgent(base, sink, OWNER, DOMAIN);
    if (mix) {
      // No quiet hours: texts go whatever the hour in the shoppers' time zones.
      expectStatus('store settings', await requestJson(base, 'PATCH', `/api/v1/stores/${DOMAIN}`, { smsQuietHours: { start: 0, end: 0 } }, agent.token), 200);
    }
    db = dialect === 'sqlite' ? sqliteAccess(path.join(scratch.env.DATA_DIR!, 'restock.db')) : postgresAccess(scratch.env.DATABASE_URL!);
    const prefix = `fan${round}${dialect[0]}${mix ? mix.kind[0] : ''}-${TAG}-`;
    const audience = audienceOf(mix?.kind ?? 'email', prefix, mix?.sinks.push.origin ?? '');
    const expected = expectedOf(audience);
    // The classic run's subscribers are the bound agent's; --mixed's come from the storefront's form, as phones and browsers do.
    const seeded = await db.seed(audience, mix ? null : agent.agentId);
    process.stdout.write(`seeded in ${seeded.seconds.toFixed(1)} s\n`);

    const phase = `${label} ${round}`;
    sink.command({ type: 'expect', phase, prefix, count: COUNT });
    if (mix) {
      mix.sinks.twilio.command({ type: 'expect', phase, prefix: audience.phonePrefix, count: expected.sms, range: COUNT });
      mix.sinks.push.command({ type: 'expect', phase, prefix: audience.pushPrefix, count: expected.push, range: COUNT, ...(seeded.sample && { sample: seeded.sample }) });
    }
    const sampled = mix && seeded.sample ? mix.sinks.push.next((e): e is Extract<PushSinkEvent, { type: 'sample' }> => e.type === 'sample', TIMEOUT_S * 1000, 'the sampled push') : undefined;
    sampled?.catch(() => {});
    const what = mix?.kind === 'mixed' ? `${expected.email} e-mails, ${expected.sms} texts, ${expected.push} pushes` : `${COUNT} subscribers`;
    process.stdout.write(`  ${label}: restock reported, alerting ${what} ... `);
    const pid = service.process.pid;
    const workerCpu0 = workerChildren.map((w) => cpuSeconds(w.process.pid));
    const workerRss = workerChildren.map((w) => sampleRss(w.process.pid));
    const sinkPids = { smtp: sink.process.pid, twilio: mix?.sinks.twilio.process.pid, push: mix?.sinks.push.process.pid };
    const cpu0 = cpuSeconds(pid);
    const sinkCpu0 = Object.fromEntries(Object.entries(sinkPids).map(([k, p]) => [k, cpuSeconds(p)]));
    const rssSampler = sampleRss(pid);
    const start = now();
    const reported = await requestJson(base, 'POST', `/api/v1/stores/${DOMAIN}/inventory`, { items: [{ ...PRODUCT, available: COUNT }] }, agent.token);
    const reportMs = now() - start;
    const items = expectStatus('inventory report', reported, 200).items as Array<{ restockId?: string }>;
    if (!items[0]?.restockId) throw new Error(`the report started no restock: ${reported.text.slice(0, 300)}`);
    const none: Delivered = { stats: { phase, received: 0, expected: 0, distinct: 0, duplicates: 0, unexpected: 0, firstAt: null, lastAt: null, buckets: [], firstUnexpected: null }, complete: true };
    const [outcome, texts, pushes] = await Promise.all([
      sink.deliveries(phase, TIMEOUT_S * 1000),
      mix && expected.sms > 0 ? awaitPhase(mix.sinks.twilio, () => mix.sinks.twilio.command({ type: 'report' }), phase, TIMEOUT_S * 1000) : none,
      mix && expected.push > 0 ? awaitPhase(mix.sinks.push, () => mix.sinks.push.command({ type: 'report' }), phase, TIMEOUT_S * 1000) : none,
    ]);
    const cpu1 = cpuSeconds(pid);
    const sinkCpu = Object.fromEntries(Object.entries(sinkPids).map(([k, p]) => [k, cpuSeconds(p)])) as Record<string, number | undefined>;
    const sinkSeconds = (k: string) => (sinkCpu0[k] !== undefined && sinkCpu[k] !== undefined ? sinkCpu[k]! - sinkCpu0[k]! : undefined);
    const workerCpu1 = workerChildren.map((w) => cpuSeconds(w.process.pid));
    const rss = peakRssMb(pid);
    const rssSamples = rssSampler.stop();
    const row = rowOf(label, dialect, outcome, start);
    let cpuSecondsUsed = cpu0 !== undefined && cpu1 !== undefined ? cpu1 - cpu0 : undefined;
    row.checks.push(`${label}: ${workers > 0 ? 'API process' : 'service'} RSS ${rssStory(rssSamples, start, outcome.stats.firstAt)}; peak (VmHWM) ${fmt(rss, 0)} MB`);
    if (workers > 0) {
      const byClient = outcome.stats.byClient ?? {};
      row.workers = workerChildren.map((w, i) => {
        const messages = byClient[w.ehlo] ?? 0;
        const used = workerCpu0[i] !== undefined && workerCpu1[i] !== undefined ? workerCpu1[i]! - workerCpu0[i]! : undefined;
        row.checks.push(`${label}: ${w.name} RSS ${rssStory(workerRss[i]!.stop(), start, outcome.stats.firstAt)}; peak (VmHWM) ${fmt(peakRssMb(w.process.pid), 0)} MB`);
        return { name: w.name, messages, share: messages / Math.max(1, outcome.stats.received), cpuMsPerMessage: used === undefined || messages === 0 ? undefined : (used * 1000) / messages, peakRssMb: peakRssMb(w.process.pid) };
      });
      const others = Object.entries(byClient).filter(([ehlo]) => !workerChildren.some((w) => w.ehlo === ehlo));
      if (others.length > 0) row.problems.push(`messages came from connections no worker opened: ${JSON.stringify(Object.fromEntries(others))}`);
      // Every process of the service counts: the API's (the report) and each worker's.
      const used = workerChildren.map((_, i) => (workerCpu0[i] !== undefined && workerCpu1[i] !== undefined ? workerCpu1[i]! - workerCpu0[i]! : undefined));
      cpuSecondsUsed = cpuSecondsUsed === undefined || used.some((u) => u === undefined) ? undefined : cpuSecondsUsed + used.reduce((a, b) => a! + b!, 0)!;
    }
    if (mix) {
      const delivered = { email: outcome, sms: texts, push: pushes };
      const figures = Object.fromEntries(
        CHANNELS.map((channel) => {
          const { stats } = delivered[channel];
          const lastSeconds = stats.lastAt === null ? null : (stats.lastAt - start) / 1000;
          return [
            channel,
            {
              expected: expected[channel],
              received: stats.received,
              firstSeconds: stats.firstAt === null ? null : (stats.firstAt - start) / 1000,
              lastSeconds,
              rate: lastSeconds ? stats.received / lastSeconds : 0,
            },
          ];
        }),
      ) as Record<Channel, ChannelFigures>;
      const messages = CHANNELS.reduce((sum, c) => sum + figures[c].received, 0);
      const lastAt = Math.max(...CHANNELS.map((c) => delivered[c].stats.lastAt ?? 0));
      row.seconds = (lastAt - start) / 1000;
      row.rate = messages / row.seconds;
      row.problems.push(...deliveryProblems('texts', texts, expected.sms), ...deliveryProblems('pushes', pushes, expected.push));
      row.mixed = { audience: audience.kind, subscribers: COUNT, channels: figures, messages, rate: row.rate, cpuMsPerMessage: cpuSecondsUsed === undefined ? undefined : (cpuSecondsUsed * 1000) / messages };
      row.checks.push(
        `${label}: Twilio stand-in got ${texts.stats.received} texts, ${texts.stats.distinct} distinct phones of ${expected.sms}, ${texts.stats.duplicates} duplicates, ${texts.stats.unexpected} unexpected; ` +
          `push sink got ${pushes.stats.received} pushes, ${pushes.stats.distinct} distinct browsers of ${expected.push}, ${pushes.stats.duplicates} duplicates, ${pushes.stats.unexpected} unexpected or malformed; ` +
          `CPU s: SMTP sink ${fmt(sinkSeconds('smtp'), 1)}, Twilio stand-in ${fmt(sinkSeconds('twilio'), 1)}, push sink ${fmt(sinkSeconds('push'), 1)}`,
      );
      if (sampled) {
        const sample: { plaintext?: string; error?: string } = await sampled.catch((err: Error) => ({ error: err.message }));
        const payload = sample.plaintext === undefined ? undefined : (JSON.parse(sample.plaintext) as { title?: string; url?: string });
        // The link is the service's click redirect (/r/<store>/<signed alert id>), as in the e-mail.
        if (!payload?.title?.includes(PRODUCT.productTitle) || !payload.url?.startsWith(`${base}/r/${DOMAIN}/`)) {
          row.problems.push(`the sampled push did not decrypt to the alert: ${sample.error ?? sample.plaintext}`);
        } else row.checks.push(`${label}: the sampled push decrypted (RFC 8291) to ${sample.plaintext}`);
      }
      if (expected.sms > 0) {
        row.mixed.callbacks = await settleCallbacks(mix.sinks);
        if (row.mixed.callbacks.unsettled) row.problems.push('the Twilio stand-in still had status callbacks unanswered 60 s after the last text');
      }
    }
    process.stdout.write(mix ? `${Math.round(row.rate)} messages/s\n` : `${Math.round(row.rate)} alerts/s\n`);

    const { ledger, waitedMs } = await settledLedger(db, expected.email + expected.sms + expected.push);
    row.problems.push(...ledgerProblems(ledger, expected));
    row.checks.push(
      `${label}: ledger ${JSON.stringify(ledger.byChannel)}, distinct subscriptions sent ${JSON.stringify(ledger.distinctSent)}, ${ledger.notified} notified, ` +
        `restock ${ledger.restock?.status} after ${ledger.restock?.batches} batch(es), settled ${(waitedMs / 1000).toFixed(1)} s after the last message ` +
        `(sent_at ${ledger.firstSentAt} .. ${ledger.lastSentAt})`,
    );
    if (row.mixed && expected.sms > 0) {
      row.mixed.deliveries = ledger.deliveries;
      const callbacks = row.mixed.callbacks!;
      row.checks.push(`${label}: status callbacks answered ${JSON.stringify(callbacks.answers)} (${callbacks.finalAnswered} 'delivered' answered 2xx); sent texts by delivery_status ${JSON.stringify(ledger.deliveries)}`);
      // Every text's report must land on its ledger row, also when it comes before the send is settled.
      const recorded = ledger.deliveries.delivered ?? 0;
      if (callbacks.finalAnswered !== expected.sms || recorded !== expected.sms) {
        row.problems.push(`${recorded} sent texts record their delivery report, ${callbacks.finalAnswered} 'delivered' reports were answered 2xx, expected ${expected.sms}`);
      }
    }
    result = {
      ...row,
      reportMs,
      cpuSeconds: cpuSecondsUsed,
      sinkCpuSeconds: sinkSeconds('smtp'),
      // The largest process's: the aim is per process.
      peakRssMb: row.workers ? Math.max(rss ?? 0, ...row.workers.map((w) => w.peakRssMb ?? 0)) : rss,
    };
    return result;
  } finally {
    for (const worker of workerChildren) {
      const stopProblem = await stopWorker(worker);
      if (stopProblem) {
        if (result) result.problems.push(stopProblem);
        else console.error(`${label}: ${stopProblem}`);
      }
    }
    await db?.close();
    if (service) {
      const stopProblem = await stopChild(service);
      if (stopProblem) {
        if (result) result.problems.push(stopProblem);
        else console.error(`${label}: ${stopProblem}`);
      }
    }
    await scratch.drop();
  }
}

// ---------------------------------------------------------------------------------------------
// Report

const fmt = (value: number | null | undefined, digits: number) => (value === null || value === undefined || !Number.isFinite(value) ? 'n/a' : value.toFixed(digits));
const perMessageMs = (cpu: number | undefined, row: Row) => (cpu === undefined || row.stats.received === 0 ? undefined : (cpu * 1000) / row.stats.received);

function report(rows: Row[]): void {
  const baseline = rows[0]!.rate;
  printTable(
    ['run', 'messages', 'to last s', 'first s', '10/50/90% s', 'msgs/s', 'CPU ms/msg', 'sink ms/msg', 'peak RSS MB', 'ratio'],
    [26, 8, 9, 7, 17, 7, 10, 11, 11, 5],
    rows.map((r) => [
      r.label,
      String(r.stats.received),
      fmt(r.seconds, 1),
      fmt(r.firstSeconds, 2),
      r.quantiles.map((q) => fmt(q, 1)).join('/'),
      fmt(r.rate, 0),
      fmt(perMessageMs(r.cpuSeconds, r), 3),
      fmt(perMessageMs(r.sinkCpuSeconds, r), 3),
      fmt(r.peakRssMb, 0),
      (r.rate / baseline).toFixed(2),
    ]),
  );
  console.log('');
  for (const r of rows.slice(1)) {
    const ratio = r.rate / baseline;
    const aims = [
      `ratio ${ratio.toFixed(2)} ${r.complete && ratio >= 0.9 ? '>=' : 'NOT >='} 0.9`,
      `peak RSS ${fmt(r.peakRssMb, 0)} MB ${r.peakRssMb !== undefined && r.peakRssMb < 300 ? '<' : 'NOT <'} 300 MB`,
    ];
    console.log(`ratio ${r.label} / baseline = ${ratio.toFixed(2)} (inventory report answered in ${fmt(r.reportMs, 0)} ms); aim: ${aims.join(', ')}`);
    for (const w of r.workers ?? []) {
      console.log(`  ${w.name}: ${w.messages} alerts (${(100 * w.share).toFixed(1)}%), ${fmt(w.messages / r.seconds, 0)} alerts/s, CPU ${fmt(w.cpuMsPerMessage, 3)} ms/alert, peak RSS ${fmt(w.peakRssMb, 0)} MB`);
    }
  }
  printChecks(rows.flatMap((r) => r.checks));
}

/** The e-mail-only run of the same database in the same round: what a mixed run is compared with. */
function emailOnlyOf(rows: Row[], r: Row): Row | undefined {
  return rows.find((o) => o.dialect === r.dialect && o.mixed?.audience === 'email');
}

/** --mixed: per run, the messages of each channel and their rates; the mixed run against the e-mail-only one and the baseline. */
function reportMixed(rows: Row[]): void {
  const baseline = rows[0]!;
  const services = rows.filter((r) => r.mixed);
  printTable(
    ['run', 'e-mail', 'SMS', 'push', 'to last s', 'first s', 'e-mail/s', 'SMS/s', 'push/s', 'all msgs/s', 'CPU ms/msg', 'peak RSS MB', 'to baseline', 'to e-mail only'],
    [30, 6, 5, 5, 9, 7, 8, 6, 6, 10, 10, 11, 11, 14],
    rows.map((r) => {
      const m = r.mixed;
      const emailOnly = m?.audience === 'mixed' ? emailOnlyOf(rows, r) : undefined;
      return [
        r.label,
        String(m?.channels.email.received ?? r.stats.received),
        m ? String(m.channels.sms.received) : '-',
        m ? String(m.channels.push.received) : '-',
        fmt(r.seconds, 1),
        fmt(r.firstSeconds, 2),
        fmt(m?.channels.email.rate ?? r.rate, 0),
        m?.channels.sms.expected ? fmt(m.channels.sms.rate, 0) : '-',
        m?.channels.push.expected ? fmt(m.channels.push.rate, 0) : '-',
        fmt(r.rate, 0),
        fmt(m ? m.cpuMsPerMessage : perMessageMs(r.cpuSeconds, r), 3),
        fmt(r.peakRssMb, 0),
        (r.rate / baseline.rate).toFixed(2),
        emailOnly ? (r.rate / emailOnly.rate).toFixed(2) : m ? '1' : '-',
      ];
    }),
  );
  console.log('');
  console.log('per channel: messages / first s / last s / msgs/s from the report to the channel\'s last message');
  for (const r of services) {
    const m = r.mixed!;
    console.log(`  ${r.label}: ${CHANNELS.filter((c) => m.channels[c].expected > 0).map((c) => `${c} ${m.channels[c].received} / ${fmt(m.channels[c].firstSeconds, 2)} / ${fmt(m.channels[c].lastSeconds, 1)} / ${fmt(m.channels[c].rate, 0)}`).join(', ')}`);
  }
  console.log('');
  for (const r of services.filter((s) => s.mixed!.audience === 'mixed')) {
    const m = r.mixed!;
    const emailOnly = emailOnlyOf(rows, r);
    if (!emailOnly) continue;
    console.log(
      `ratio ${r.label} / e-mail only = ${(r.rate / emailOnly.rate).toFixed(2)} in messages/s (${fmt(r.rate, 0)} vs ${fmt(emailOnly.rate, 0)}), ` +
        `${(emailOnly.seconds / r.seconds).toFixed(2)} in subscribers served per second (${fmt(r.seconds, 1)} vs ${fmt(emailOnly.seconds, 1)} s to the last message), ` +
        `${(m.channels.email.rate / emailOnly.rate).toFixed(2)} in e-mails/s; to baseline: all messages ${(r.rate / baseline.rate).toFixed(2)}, e-mail only ${(emailOnly.rate / baseline.rate).toFixed(2)}; ` +
        `service CPU ${fmt(m.cpuMsPerMessage, 3)} vs ${fmt(emailOnly.mixed!.cpuMsPerMessage, 3)} ms per message, ${fmt(r.cpuSeconds, 1)} vs ${fmt(emailOnly.cpuSeconds, 1)} s in all`,
    );
  }
  printChecks(rows.flatMap((r) => r.checks));
}

// ---------------------------------------------------------------------------------------------

async function main(): Promise<number> {
  printSetting();
  console.log(
    `bench: ${COUNT} subscribers on one variant, SMTP pool of ${POOL_SIZE}, claim size / outstanding sends ${CLAIM_SIZE}, ` +
      `${ROUNDS} round${ROUNDS === 1 ? '' : 's'}, ${DIALECTS.join(' and ')}, 127.0.0.1`,
  );
  if (MIXED) {
    const mix = audienceOf('mixed', '', '');
    phaseCode--;
    const both = mix.sms.filter((n) => (37 * n) % 100 < PUSH_PERCENT).length;
    console.log(
      `bench: --mixed: e-mail only, then (alternating by round) every subscriber by e-mail, ${mix.sms.length} also by SMS (${SMS_PERCENT}%), ` +
        `${mix.push.length} also by web push (${PUSH_PERCENT}%), ${both} on all three: ${COUNT + mix.sms.length + mix.push.length} messages`,
    );
  }
  const sink = await startSink();
  const channelSinks = MIXED ? await startChannelSinks() : undefined;
  const rounds: Row[][] = [];
  try {
    for (let round = 1; round <= ROUNDS; round++) {
      if (ROUNDS > 1) console.log(`\nround ${round} of ${ROUNDS}`);
      const rows: Row[] = [await runBaseline(sink, round)];
      for (const dialect of DIALECTS) {
        if (!channelSinks) {
          rows.push(await runService(sink, dialect, round));
          if (dialect === 'postgres' && WORKER_RUN) rows.push(await runService(sink, dialect, round, undefined, WORKERS));
          continue;
        }
        // Which audience goes first alternates, so neither always meets the warmer machine.
        const kinds: Array<Audience['kind']> = round % 2 === 1 ? ['email', 'mixed'] : ['mixed', 'email'];
        for (const kind of kinds) rows.push(await runService(sink, dialect, round, { kind, sinks: channelSinks }));
      }
      rounds.push(rows);
      if (MIXED) reportMixed(rows);
      else report(rows);
    }
  } finally {
    await stopIpcChild(sink);
    if (channelSinks) await Promise.all([stopIpcChild(channelSinks.twilio), stopIpcChild(channelSinks.push)]);
  }

  if (ROUNDS > 1) {
    console.log('');
    const labels = rounds[0]!.map((r) => r.label);
    for (const label of labels) {
      const of = rounds.map((rows) => ({ row: rows.find((r) => r.label === label)!, base: rows[0]!.rate, rows }));
      const ratios = of.map(({ row, base }) => row.rate / base);
      const toEmail = of.flatMap(({ row, rows }) => (row.mixed?.audience === 'mixed' ? [row.rate / emailOnlyOf(rows, row)!.rate] : []));
      console.log(
        `median ${label}: ${median(of.map(({ row }) => row.rate)).toFixed(0)} msgs/s, ${median(of.map(({ row }) => row.seconds)).toFixed(1)} s to last` +
          (label.startsWith('baseline') ? '' : `, ratio ${median(ratios).toFixed(2)} (${ratios.map((v) => v.toFixed(2)).join(', ')})`) +
          (toEmail.length > 0 ? `, to e-mail only ${median(toEmail).toFixed(2)} (${toEmail.map((v) => v.toFixed(2)).join(', ')})` : ''),
      );
    }
  }

  const problems = rounds.flat().flatMap((r) => r.problems.map((p) => `${r.label}: ${p}`));
  if (process.env.BENCH_JSON === '1') {
    const summary = rounds.map((rows) =>
      rows.map((r) => ({
        label: r.label,
        received: r.stats.received,
        seconds: Number(r.seconds.toFixed(2)),
        firstSeconds: r.firstSeconds === null ? null : Number(r.firstSeconds.toFixed(2)),
        rate: Math.round(r.rate),
        cpuMsPerMessage: perMessageMs(r.cpuSeconds, r) === undefined ? null : Number(perMessageMs(r.cpuSeconds, r)!.toFixed(3)),
        peakRssMb: r.peakRssMb === undefined ? null : Math.round(r.peakRssMb),
        ratio: Number((r.rate / rows[0]!.rate).toFixed(3)),
        ...(r.workers && {
          workers: r.workers.map((w) => ({ name: w.name, messages: w.messages, share: Number(w.share.toFixed(3)), cpuMsPerMessage: w.cpuMsPerMessage === undefined ? null : Number(w.cpuMsPerMessage.toFixed(3)), peakRssMb: w.peakRssMb === undefined ? null : Math.round(w.peakRssMb) })),
        }),
        ...(r.mixed && {
          audience: r.mixed.audience,
          messages: r.mixed.messages,
          channels: Object.fromEntries(CHANNELS.map((c) => [c, { received: r.mixed!.channels[c].received, lastSeconds: r.mixed!.channels[c].lastSeconds, rate: Math.round(r.mixed!.channels[c].rate) }])),
          cpuMsPerMessage: r.mixed.cpuMsPerMessage === undefined ? null : Number(r.mixed.cpuMsPerMessage.toFixed(3)),
          ...(r.mixed.audience === 'mixed' && { ratioToEmailOnly: Number((r.rate / emailOnlyOf(rows, r)!.rate).toFixed(3)) }),
          ...(r.mixed.deliveries && { smsDeliveryStatus: r.mixed.deliveries }),
        }),
      })),
    );
    console.log(`BENCH_JSON ${JSON.stringify({ count: COUNT, poolSize: POOL_SIZE, claimSize: CLAIM_SIZE, ...(MIXED && { smsPercent: SMS_PERCENT, pushPercent: PUSH_PERCENT }), rounds: summary, failed: problems.length > 0 })}`);
  }
  return exitCodeFor(problems);
}

runMain(main);
