import fastifyRateLimit, { normalizeIP, type RateLimitPluginOptions } from '@fastify/rate-limit';
import type { FastifyBaseLogger, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { Redis } from 'ioredis';
import { Problem } from '../problems.ts';

/**
 * Rate limits, counted in Redis when a URL is given (shared by every process), in this
 * process's memory otherwise. Install before the routes and after the access-token check.
 *
 * - Per credential: every request with a `request.caller` counts under `agent:<agentId>`, at
 *   most `caller.rateLimitPerMinute` per 60 s. Requests without a caller are not counted here.
 * - Per client address, on routes that ask for it with `config: { rateLimitByAddress: 'registration' }`:
 *   counted by `request.ip` (IPv6 by its /64, which is what one client usually holds) under the
 *   named policy. The key is not the plugin's `rateLimit`: that one is typed and read by the
 *   plugin itself, which throws at start-up on a string value.
 *
 * Counted answers carry `RateLimit-Limit`, `RateLimit-Remaining`, `RateLimit-Reset` (seconds) and
 * `RateLimit-Policy` (draft-ietf-httpapi-ratelimit-headers-07); when two limits apply, the first
 * three describe the one closer to running out. Over a limit: 429 `rate-limited` problem with
 * `Retry-After`, and the request goes no further (its body is not even read).
 *
 * Fails open: when Redis cannot be reached or does not answer within COMMAND_TIMEOUT_MS, the
 * request is served uncounted (without RateLimit headers) and a warning is logged, at most once a
 * minute. A limiter outage must not become an API outage; the access-token check still applies.
 *
 * The counting is `@fastify/rate-limit`'s (its stores and atomic Redis script), through
 * `createRateLimit`; the hook around it is ours, because the plugin's own route hook applies one
 * limit per route (we may need two), answers with its own error body and headers, and on store
 * errors either fails the request or skips silently.
 */

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Also count this route's requests per client address, under the named policy. */
    rateLimitByAddress?: AddressPolicyName;
  }
}

export type AddressPolicyName = 'registration' | 'storefront' | 'sign-in';

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
  /** Dashboard sign-in links asked for, per client address (each sends an e-mail). */
  signInPerAddress?: Policy;
  /** Prefix of every Redis key; tests give each run its own. */
  keyPrefix?: string;
}

export interface RateLimits {
  /** Quits the Redis client. Also done when the app closes; calling it twice is harmless. */
  close(): Promise<void>;
}

const CREDENTIAL_WINDOW_SECONDS = 60;
const DEFAULT_STOREFRONT_PER_ADDRESS: Policy = { max: 60, windowSeconds: 3600 };
const DEFAULT_SIGN_IN_PER_ADDRESS: Policy = { max: 10, windowSeconds: 3600 };
/** A limiter that answers slower than this costs more than it protects. */
const COMMAND_TIMEOUT_MS = 500;
const CONNECT_TIMEOUT_MS = 2000;
/** How long start-up waits for Redis before serving uncounted. */
const STARTUP_WAIT_MS = 2000;
const WARN_EVERY_MS = 60_000;

type Check = ReturnType<FastifyInstance['createRateLimit']>;

interface Limit {
  check: Check;
  windowSeconds: number;
  refusal(request: FastifyRequest, max: number, retryAfterSeconds: number): string;
}

interface Counted {
  max: number;
  windowSeconds: number;
  remaining: number;
  resetSeconds: number;
  exceeded: boolean;
  limit: Limit;
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
  const redis = options.redisUrl ? connect(options.redisUrl, app.log, warning) : undefined;

  const perCredential: Limit = {
    check: await counter(app, {
      redis: redis?.client,
      nameSpace: keyPrefix,
      keyGenerator: (request) => `agent:${request.caller!.agentId}`,
      max: (request) => request.caller!.rateLimitPerMinute,
      timeWindow: CREDENTIAL_WINDOW_SECONDS * 1000,
    }),
    windowSeconds: CREDENTIAL_WINDOW_SECONDS,
    refusal: (request, max, retryAfter) =>
      `This credential (agent ${request.caller!.agentId}) may make ${max} requests per minute; they are used up, retry in ${retryAfter} s.`,
  };

  const policies: Record<AddressPolicyName, Policy> = {
    registration: options.registrationPerAddress,
    storefront: options.storefrontPerAddress ?? DEFAULT_STOREFRONT_PER_ADDRESS,
    'sign-in': options.signInPerAddress ?? DEFAULT_SIGN_IN_PER_ADDRESS,
  };
  const perAddress = {} as Record<AddressPolicyName, Limit>;
  for (const [name, policy] of Object.entries(policies) as [AddressPolicyName, Policy][]) {
    perAddress[name] = {
      check: await counter(app, {
        redis: redis?.client,
        nameSpace: keyPrefix,
        // A request whose socket has already gone has no address; it is counted with the others like it.
        keyGenerator: (request) => `address:${name}:${normalizeIP(request.ip ?? 'unknown')}`,
        max: policy.max,
        timeWindow: policy.windowSeconds * 1000,
      }),
      windowSeconds: policy.windowSeconds,
      refusal: (_request, max, retryAfter) =>
        `This address may make ${max} ${name} requests per ${describeWindow(policy.windowSeconds)}; they are used up, retry in ${retryAfter} s.`,
    };
  }

  // A misspelt policy would otherwise leave a route unlimited without a word.
  app.addHook('onRoute', (route) => {
    const name = route.config?.rateLimitByAddress;
    if (name !== undefined && !Object.hasOwn(perAddress, name)) {
      throw new Error(`Unknown rateLimitByAddress policy '${name}' on ${route.method} ${route.url}.`);
    }
  });

  // preParsing: the earliest hook after the access-token check (onRequest), so a refused
  // request's body is never read. A callback hook, so requests that count nothing pay no promise.
  app.addHook('preParsing', (request, reply, _payload, done) => {
    const addressPolicy = request.routeOptions.config?.rateLimitByAddress;
    if (!request.caller && !addressPolicy) return done();
    const limits: Limit[] = [];
    if (request.caller) limits.push(perCredential);
    if (addressPolicy) limits.push(perAddress[addressPolicy]);
    enforce(limits, request, reply, warning).then(() => done(), done);
  });

  await redis?.settled;
  let closed = false;
  const close = async () => {
    if (closed) return;
    closed = true;
    await redis?.quit();
  };
  app.addHook('onClose', close);
  return { close };
}

/**
 * One limiter per key space, each from the plugin registered in a scope of its own: its
 * `createRateLimit(options)` would put a per-route prefix into the keys (`undefinedundefined-`
 * for a limiter that belongs to no route), and its route hook stays off our routes.
 */
async function counter(app: FastifyInstance, settings: RateLimitPluginOptions): Promise<Check> {
  let check: Check | undefined;
  await app.register(async (scope) => {
    await scope.register(fastifyRateLimit, { ...settings, global: false, skipOnError: false });
    check = scope.createRateLimit();
  });
  return check!;
}

async function enforce(limits: Limit[], request: FastifyRequest, reply: FastifyReply, warning: Warning) {
  const counted: Counted[] = [];
  for (const limit of limits) {
    const c = await count(limit, request, warning);
    if (!c) continue;
    if (c.exceeded) {
      const retryAfter = Math.max(1, c.resetSeconds);
      throw new Problem('rate-limited', limit.refusal(request, c.max, retryAfter), {
        headers: { ...rateLimitHeaders([c]), 'retry-after': String(retryAfter) },
      });
    }
    counted.push(c);
  }
  if (counted.length > 0) reply.headers(rateLimitHeaders(counted));
}

async function count(limit: Limit, request: FastifyRequest, warning: Warning): Promise<Counted | undefined> {
  try {
    const result = await limit.check(request);
    if (result.isAllowed) return undefined;
    return {
      max: result.max,
      windowSeconds: limit.windowSeconds,
      remaining: result.remaining,
      resetSeconds: Math.max(0, result.ttlInSeconds),
      exceeded: result.isExceeded,
      limit,
    };
  } catch (err) {
    warning.warn(request.log, err);
    return undefined;
  }
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
  const client = new Redis(url, {
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
  return {
    client,
    settled,
    async quit() {
      if (client.status === 'ready') await client.quit().catch(() => {});
      client.disconnect();
    },
  };
}

function describeWindow(seconds: number): string {
  if (seconds % 3600 === 0) return seconds === 3600 ? 'hour' : `${seconds / 3600} hours`;
  if (seconds % 60 === 0) return seconds === 60 ? 'minute' : `${seconds / 60} minutes`;
  return seconds === 1 ? 'second' : `${seconds} seconds`;
}
