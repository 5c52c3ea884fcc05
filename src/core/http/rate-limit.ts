// Longer than most files on purpose: every limit, its counting in Redis or in memory and the breaker
// that switches between them are one policy, read in one place.
import { normalizeIP } from '@fastify/rate-limit';
import type { FastifyBaseLogger, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import type { Redis } from 'ioredis';
import { noMetrics, type Metrics } from '../metrics.ts';
import { Problem } from '../problems.ts';
import { parseRedisUrl, redisConnectionOptions } from '../service-urls.ts';
import type { Caller } from './caller.ts';
import { lazyPackage } from '../lazy-package.ts';

const redisClient = lazyPackage<typeof import('ioredis')>('ioredis');

/**
 * Rate limits, counted in Redis when a URL is given (shared by every process), in this
 * process's memory otherwise. Install before the routes and after the access-token check.
 *
 * - Per credential: every request with a `request.caller` counts under `agent:<agentId>`, at
 *   most `caller.rateLimitPerMinute` per 60 s. A caller learnt later in the request (a payer,
 *   once its payment is verified) is counted then, through `app.rateLimits.countCaller`.
 * - Per client address, on routes that ask for it with `config: { rateLimitByAddress: 'registration' }`,
 *   or only for requests without a caller with `rateLimitByAddressWithoutCaller` (paid routes):
 *   counted by `request.ip` (IPv6 by its /64, which is what one client usually holds) under the
 *   named policy. The key is not `rateLimit`: `@fastify/rate-limit` reads that one itself.
 * - A request that carries several operations (an MCP batch) counts one per operation:
 *   `app.rateLimits.countMore` adds the rest once the body is read; a batch that does not fit in
 *   what remains is refused whole.
 *
 * Counted answers carry `RateLimit-Limit`, `RateLimit-Remaining`, `RateLimit-Reset` (seconds) and
 * `RateLimit-Policy` (draft-ietf-httpapi-ratelimit-headers-07); when two limits apply, the first
 * three describe the one closer to running out. Over a limit: 429 `rate-limited` problem with
 * `Retry-After`, and the request goes no further (its body is not even read). A refused request
 * still counts, as each request does.
 *
 * When Redis cannot be counted on:
 * - not connected (refused, reconnecting): the command fails at once and the request is served
 *   uncounted, with a warning at most once a minute. A limiter outage must not become an API
 *   outage; the access-token check still applies.
 * - connected but not answering (a network that drops packets): each command would cost its
 *   COMMAND_TIMEOUT_MS. After TRIP_AFTER_FAILURES in a row the breaker opens: Redis is no longer
 *   asked, limits are counted in this process's memory (per process, not shared), and a PING
 *   every PROBE_EVERY_MS looks for Redis; the first answer closes the breaker and counting goes
 *   back to Redis. The opening and the closing are logged once each.
 *
 * Counting is ours rather than `@fastify/rate-limit`'s: its stores increment by one (a batch
 * counts many), need a request to name a key (a payer is counted outside the request's hooks),
 * and cannot be switched from Redis to memory while running. Its IP normalisation is used.
 */

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Also count this route's requests per client address, under the named policy. */
    rateLimitByAddress?: AddressPolicyName;
    /** Count this route's requests that have no caller per client address, under the named policy. */
    rateLimitByAddressWithoutCaller?: AddressPolicyName;
  }
  interface FastifyInstance {
    /** Counting beyond the one request each hook counts (installed by the rate-limit gate). */
    rateLimits: RateLimits;
  }
}

export type AddressPolicyName = 'registration' | 'storefront' | 'storefront-read' | 'sign-in' | 'payment';

export interface Policy {
  max: number;
  windowSeconds: number;
}

export interface RateLimitOptions {
  /** Counters shared by every process; unset keeps them in this process. */
  redisUrl?: string;
  registrationPerAddress: Policy;
  /** Shoppers' subscriptions from the storefront widget, per client address. */
  storefrontPerAddress?: Policy;
  /** The widget's availability reads, per client address: one per product page view. */
  storefrontReadPerAddress?: Policy;
  /** Dashboard sign-in links asked for, per client address (each sends an e-mail). */
  signInPerAddress?: Policy;
  /** Paid requests without a caller, per client address, counted before their payment is looked at. */
  paymentPerAddress?: Policy;
  /** Prefix of every Redis key; tests give each run its own. */
  keyPrefix?: string;
  /** Where refusals are counted, by limit. */
  metrics?: Metrics;
}

export interface RateLimits {
  /** Quits the Redis client. Also done when the app closes; calling it twice is harmless. */
  close(): Promise<void>;
  /**
   * Counts `count` more requests against the limits this request was counted under (its caller,
   * its address policy), and updates its RateLimit headers. Throws the 429 when over.
   */
  countMore(request: FastifyRequest, reply: FastifyReply, count: number): Promise<void>;
  /**
   * One request of a caller known only after the request's own count (a payer). `take` counts it
   * and throws the 429 when over; `check` throws the 429 when none is left, counting nothing;
   * `record` counts one that may not be refused any more (already paid for).
   */
  countCaller(caller: Pick<Caller, 'agentId' | 'rateLimitPerMinute'>, log: FastifyBaseLogger, how?: 'take' | 'check' | 'record'): Promise<void>;
}

const CREDENTIAL_WINDOW_SECONDS = 60;
const DEFAULT_STOREFRONT_PER_ADDRESS: Policy = { max: 60, windowSeconds: 3600 };
const DEFAULT_STOREFRONT_READ_PER_ADDRESS: Policy = { max: 300, windowSeconds: 60 };
const DEFAULT_SIGN_IN_PER_ADDRESS: Policy = { max: 10, windowSeconds: 3600 };
const DEFAULT_PAYMENT_PER_ADDRESS: Policy = { max: 120, windowSeconds: 60 };
/** A limiter that answers slower than this costs more than it protects. */
const COMMAND_TIMEOUT_MS = 500;
const CONNECT_TIMEOUT_MS = 2000;
/** How long start-up waits for Redis before serving uncounted. */
const STARTUP_WAIT_MS = 2000;
const WARN_EVERY_MS = 60_000;
/** Commands failed in a row on a connected Redis before it is no longer asked. */
export const TRIP_AFTER_FAILURES = 3;
/** How often an open breaker asks Redis whether it answers again. */
const PROBE_EVERY_MS = 1000;
/** Counters kept in memory at most; the oldest go first (their holders start a fresh window). */
const MAX_LOCAL_COUNTERS = 10_000;

/**
 * INCRBY and the window's expiry in one step, so that concurrent processes agree. A key without
 * an expiry (none yet) starts its window here.
 */
const COUNT_SCRIPT = `
local current = redis.call('INCRBY', KEYS[1], ARGV[1])
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  ttl = tonumber(ARGV[2])
end
return {current, ttl}`;

/** One limit applied to one key. */
interface Rule {
  /** How metrics name the limit: `credential`, or the address policy. */
  limit: string;
  key: string;
  max: number;
  windowSeconds: number;
  refusal(max: number, retryAfterSeconds: number): string;
}

interface Tally {
  current: number;
  ttlMs: number;
}

interface Counted {
  max: number;
  windowSeconds: number;
  remaining: number;
  resetSeconds: number;
  exceeded: boolean;
  rule: Rule;
}

/** Counts requests per credential (after the access-token check names it) and per address. */
export function rateLimitGate(options: RateLimitOptions) {
  return fp(
    async (app) => {
      await installRateLimits(app, options);
    },
    { name: 'rate-limit-gate', dependencies: ['identity-gate'], fastify: '5.x' },
  );
}

export async function installRateLimits(app: FastifyInstance, options: RateLimitOptions): Promise<RateLimits> {
  const keyPrefix = options.keyPrefix ?? 'restock:rate-limit:';
  const warning = throttledWarning();
  const shared = options.redisUrl ? new SharedCounters(options.redisUrl, keyPrefix, app.log, warning) : undefined;
  const counters: Counters = shared ?? new LocalCounters();
  const metrics = options.metrics ?? noMetrics;

  const perCredential = (caller: Pick<Caller, 'agentId' | 'rateLimitPerMinute'>): Rule => ({
    limit: 'credential',
    key: `agent:${caller.agentId}`,
    max: caller.rateLimitPerMinute,
    windowSeconds: CREDENTIAL_WINDOW_SECONDS,
    refusal: (max, retryAfter) =>
      `This credential (agent ${caller.agentId}) may make ${max} requests per minute; they are used up, retry in ${retryAfter} s.`,
  });

  const policies: Record<AddressPolicyName, Policy> = {
    registration: options.registrationPerAddress,
    storefront: options.storefrontPerAddress ?? DEFAULT_STOREFRONT_PER_ADDRESS,
    'storefront-read': options.storefrontReadPerAddress ?? DEFAULT_STOREFRONT_READ_PER_ADDRESS,
    'sign-in': options.signInPerAddress ?? DEFAULT_SIGN_IN_PER_ADDRESS,
    payment: options.paymentPerAddress ?? DEFAULT_PAYMENT_PER_ADDRESS,
  };
  const perAddress = (name: AddressPolicyName, request: FastifyRequest): Rule => {
    const policy = policies[name];
    return {
      limit: name,
      key: `address:${name}:${clientAddress(request)}`,
      max: policy.max,
      windowSeconds: policy.windowSeconds,
      refusal: (max, retryAfter) =>
        `This address may make ${max} ${name} requests per ${describeWindow(policy.windowSeconds)}; they are used up, retry in ${retryAfter} s.`,
    };
  };

  const addressPolicyOf = (request: FastifyRequest): AddressPolicyName | undefined => {
    const config = request.routeOptions.config;
    return config?.rateLimitByAddress ?? (request.caller ? undefined : config?.rateLimitByAddressWithoutCaller);
  };
  const rulesOf = (request: FastifyRequest): Rule[] => {
    const rules: Rule[] = [];
    if (request.caller) rules.push(perCredential(request.caller));
    const policy = addressPolicyOf(request);
    if (policy) rules.push(perAddress(policy, request));
    return rules;
  };

  // A misspelt policy would otherwise leave a route unlimited without a word.
  app.addHook('onRoute', (route) => {
    for (const name of [route.config?.rateLimitByAddress, route.config?.rateLimitByAddressWithoutCaller]) {
      if (name !== undefined && !Object.hasOwn(policies, name)) {
        throw new Error(`Unknown rateLimitByAddress policy '${name}' on ${route.method} ${route.url}.`);
      }
    }
  });

  // preParsing: the earliest hook after the access-token check (onRequest), so a refused
  // request's body is never read. A callback hook, so requests that count nothing pay no promise.
  app.addHook('preParsing', (request, reply, _payload, done) => {
    if (!request.caller && !addressPolicyOf(request)) return done();
    enforce(counters, rulesOf(request), 1, request.log, metrics).then((counted) => {
      if (counted.length > 0) reply.headers(rateLimitHeaders(counted));
      done();
    }, done);
  });

  let closed = false;
  const limits: RateLimits = {
    async close() {
      if (closed) return;
      closed = true;
      await shared?.close();
    },
    async countMore(request, reply, count) {
      const counted = await enforce(counters, rulesOf(request), count, request.log, metrics);
      if (counted.length > 0) reply.headers(rateLimitHeaders(counted));
    },
    async countCaller(caller, log, how = 'take') {
      await enforce(counters, [perCredential(caller)], how === 'check' ? 0 : 1, log, metrics, how !== 'record');
    },
  };
  app.decorate('rateLimits', limits);
  await shared?.settled;
  app.addHook('onClose', limits.close);
  return limits;
}

/**
 * Counts `by` against each rule in turn; the first one over its limit refuses the request (unless
 * `refuse` is false). `by` 0 only looks: over when not one more request fits.
 */
async function enforce(counters: Counters, rules: Rule[], by: number, log: FastifyBaseLogger, metrics: Metrics, refuse = true): Promise<Counted[]> {
  const counted: Counted[] = [];
  for (const rule of rules) {
    const tally = await counters.add(rule.key, by, rule.windowSeconds * 1000, log);
    if (!tally) continue;
    const c: Counted = {
      max: rule.max,
      windowSeconds: rule.windowSeconds,
      remaining: Math.max(0, rule.max - tally.current),
      resetSeconds: Math.max(0, Math.ceil(tally.ttlMs / 1000)),
      exceeded: by === 0 ? tally.current >= rule.max : tally.current > rule.max,
      rule,
    };
    if (c.exceeded && refuse) {
      metrics.rateLimitRefused(rule.limit);
      const retryAfter = Math.max(1, c.resetSeconds);
      throw new Problem('rate-limited', rule.refusal(c.max, retryAfter), {
        headers: { ...rateLimitHeaders([c]), 'retry-after': String(retryAfter) },
      });
    }
    counted.push(c);
  }
  return counted;
}

function rateLimitHeaders(counted: Counted[]): Record<string, string> {
  const closest = counted.reduce((a, b) => (b.remaining < a.remaining ? b : a));
  return {
    'ratelimit-limit': String(closest.max),
    'ratelimit-remaining': String(closest.remaining),
    'ratelimit-reset': String(closest.resetSeconds),
    'ratelimit-policy': counted.map((c) => `${c.max};w=${c.windowSeconds}`).join(', '),
  };
}

/** Adds to a key's count in its window; nothing when it could not be counted (served uncounted). */
interface Counters {
  add(key: string, by: number, windowMs: number, log: FastifyBaseLogger): Promise<Tally | undefined>;
}

/** Fixed windows in this process's memory, as many as MAX_LOCAL_COUNTERS. */
class LocalCounters implements Counters {
  private readonly windows = new Map<string, { count: number; endsAt: number }>();

  async add(key: string, by: number, windowMs: number): Promise<Tally> {
    return this.addNow(key, by, windowMs);
  }

  addNow(key: string, by: number, windowMs: number): Tally {
    const now = Date.now();
    let window = this.windows.get(key);
    if (!window || window.endsAt <= now) {
      if (window) this.windows.delete(key);
      else if (this.windows.size >= MAX_LOCAL_COUNTERS) this.makeRoom(now);
      window = { count: 0, endsAt: now + windowMs };
      this.windows.set(key, window);
    }
    window.count += by;
    return { current: window.count, ttlMs: window.endsAt - now };
  }

  /** Ended windows go; if that is not enough, the oldest tenth (a Map keeps insertion order). */
  private makeRoom(now: number): void {
    for (const [key, window] of this.windows) if (window.endsAt <= now) this.windows.delete(key);
    let excess = this.windows.size - Math.floor(MAX_LOCAL_COUNTERS * 0.9);
    for (const key of this.windows.keys()) {
      if (excess-- <= 0) break;
      this.windows.delete(key);
    }
  }
}

interface CountingClient extends Redis {
  restockCount(key: string, by: number, windowMs: number): Promise<[number, number]>;
}

/**
 * Counters in Redis, behind a breaker. A connected Redis that stops answering costs every
 * request the command timeout; after TRIP_AFTER_FAILURES failures in a row it is no longer
 * asked and this process counts in memory until a probe is answered.
 */
class SharedCounters implements Counters {
  readonly settled: Promise<void>;
  private readonly client: CountingClient;
  private readonly local = new LocalCounters();
  private failures = 0;
  private probe: NodeJS.Timeout | undefined;
  private probing = false;

  constructor(
    url: string,
    private readonly keyPrefix: string,
    private readonly log: FastifyBaseLogger,
    private readonly warning: Warning,
  ) {
    const { client, settled } = connect(url, log, warning);
    client.defineCommand('restockCount', { numberOfKeys: 1, lua: COUNT_SCRIPT });
    this.client = client as CountingClient;
    this.settled = settled;
  }

  get open(): boolean {
    return this.probe !== undefined;
  }

  async add(key: string, by: number, windowMs: number, log: FastifyBaseLogger): Promise<Tally | undefined> {
    if (this.open) return this.local.addNow(key, by, windowMs);
    // Not connected: the command would be refused at once, costing nothing; served uncounted.
    const connected = this.client.status === 'ready';
    try {
      const [current, ttlMs] = await this.client.restockCount(`${this.keyPrefix}${key}`, by, windowMs);
      this.failures = 0;
      return { current, ttlMs };
    } catch (err) {
      this.warning.warn(log, err);
      if (connected) this.failed();
      return undefined;
    }
  }

  async close(): Promise<void> {
    this.closeBreaker(false);
    if (this.client.status === 'ready') await this.client.quit().catch(() => {});
    this.client.disconnect();
  }

  private failed(): void {
    if (this.open || ++this.failures < TRIP_AFTER_FAILURES) return;
    this.log.warn(
      { failures: this.failures, commandTimeoutMs: COMMAND_TIMEOUT_MS },
      `rate limits: Redis failed ${this.failures} commands in a row; counting in this process's memory (not shared) until it answers again`,
    );
    this.probe = setInterval(() => this.sendProbe(), PROBE_EVERY_MS);
    this.probe.unref();
  }

  private sendProbe(): void {
    if (this.probing) return;
    this.probing = true;
    this.client.ping().then(
      () => this.closeBreaker(true),
      () => {},
    ).finally(() => {
      this.probing = false;
    });
  }

  private closeBreaker(answered: boolean): void {
    if (!this.probe) return;
    clearInterval(this.probe);
    this.probe = undefined;
    this.failures = 0;
    if (answered) {
      this.warning.reset();
      this.log.info('rate limits: Redis answers again; counting in Redis again');
    }
  }
}

type Warning = ReturnType<typeof throttledWarning>;

/** An outage fails every request and every reconnection attempt; one line a minute says it. */
function throttledWarning() {
  let last = 0;
  return {
    warn(log: FastifyBaseLogger, err: unknown) {
      const now = Date.now();
      if (now - last < WARN_EVERY_MS) return;
      last = now;
      log.warn({ err }, 'rate limits cannot be counted: serving requests without them until Redis answers again');
    },
    reset() {
      last = 0;
    },
  };
}

/**
 * A client that fails fast while Redis is away: no offline queue (a command is refused at
 * once), no retry of a command that may have counted already, a bound on every command.
 * It keeps reconnecting in the background.
 */
function connect(url: string, log: FastifyBaseLogger, warning: Warning) {
  const { Redis } = redisClient();
  const client = new Redis({
    ...redisConnectionOptions(parseRedisUrl(url)),
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    commandTimeout: COMMAND_TIMEOUT_MS,
    connectTimeout: CONNECT_TIMEOUT_MS,
  });
  let down = false;
  // Without a listener the client prints every reconnection failure to the console.
  client.on('error', (err) => {
    down = true;
    warning.warn(log, err);
  });
  client.on('ready', () => {
    if (!down) return;
    down = false;
    warning.reset();
    log.info('rate limits are counted again: Redis answers');
  });
  const settled = new Promise<void>((resolve) => {
    const finish = () => {
      clearTimeout(timer);
      client.off('ready', finish);
      client.off('error', finish);
      resolve();
    };
    const timer = setTimeout(finish, STARTUP_WAIT_MS);
    client.once('ready', finish);
    client.once('error', finish);
  });
  return { client, settled };
}

function describeWindow(seconds: number): string {
  if (seconds % 3600 === 0) return seconds === 3600 ? 'hour' : `${seconds / 3600} hours`;
  if (seconds % 60 === 0) return seconds === 60 ? 'minute' : `${seconds / 60} minutes`;
  return seconds === 1 ? 'second' : `${seconds} seconds`;
}

/**
 * The client's address as the per-address limits count it: an IPv6 client by its /64. A request
 * whose socket has already gone has no address; it is counted with the others like it.
 */
export function clientAddress(request: FastifyRequest): string {
  return normalizeIP(request.ip ?? 'unknown');
}
