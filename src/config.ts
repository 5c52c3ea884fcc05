// Longer than most files on purpose: every setting the service reads is parsed, checked and described
// here, in one place, so `.env.example`, the README's table and start-up errors cannot disagree.
import type { DatabaseConfig } from './core/db/database.ts';
import { DEFAULT_PG_STATEMENT_TIMEOUT_MS } from './core/db/postgres-pool.ts';
import { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import type { PlanSettings } from './billing/plans.ts';
import { parseAllowedHosts, type HostName } from './core/http/host-names.ts';
import { parseOutboundAllowList, type OutboundPolicy } from './core/net/outbound-guard.ts';
import { decodeKey } from './core/sealed-secrets.ts';
import { CHANNEL_SETTINGS, readChannelSettings, type ChannelConfigs } from './channels.ts';
import { PLATFORM_SETTINGS, readPlatformSettings, type PlatformConfigs } from './platforms.ts';
import { webhookConfig, webhookSettings, type WebhookConfig } from './webhooks/settings.ts';
import { parsePostgresUrl, parseRedisUrl, ServiceUrlError } from './core/service-urls.ts';
import { observabilityConfig, observabilitySettings, type ObservabilityConfig } from './observability/settings.ts';

/** The batch policy a store follows until it sets its own (docs/dispatch.md says why). */
export const DEFAULT_BATCH_POLICY: BatchPolicy = { batchMultiplier: 2, batchIntervalSeconds: 600, minStock: 1, frequencyCapMinutes: 60 };

/**
 * Every setting the service reads, with the embedded defaults that let `npm start` run with
 * nothing configured, and what each one does: SETTINGS below is read off this schema, and the
 * README's table is generated from SETTINGS (bin/build-settings-table.ts).
 */
const envSchema = z.object({
  PORT: z.coerce.number().int().min(0).max(65535).default(3000).describe('HTTP port'),
  HOST: z.string().min(1).default('127.0.0.1').describe('Interface to listen on (`0.0.0.0` in a container)'),
  BASE_URL: z.url().optional().describe("Public origin: base of every link and identifier handed out (unset: `http://localhost:$PORT`); a request's `Host` must name its host and port (a loopback one also answers to `localhost`, `127.0.0.1` and `[::1]` on that port), otherwise 421"),
  DATA_DIR: z.string().min(1).default('./data').describe('Directory of the embedded SQLite database (`restock.db`) when `DATABASE_URL` is unset'),
  DATABASE_URL: z.string().optional().describe('`postgres://user:password@host:5432/db` for PostgreSQL (options: `sslmode` = `disable`, `require` or `verify-full`, and `application_name`; any other is refused at start-up), or `sqlite:<path>`; unset: SQLite at `$DATA_DIR/restock.db`'),
  REDIS_URL: z.string().optional().describe('Rate-limit counters shared by several processes (memory when unset): `redis://` or `rediss://` (TLS), user, password, `/db`; no options'),
  SMTP_URL: z.string().optional().describe('SMTP server: `smtp://` or `smtps://`, user, password, and only the options `name` (EHLO), `connectionTimeout`, `greetingTimeout`, `socketTimeout` (ms); unset keeps mail in the local outbox'),
  SMTP_CA_FILE: z.string().optional().describe("PEM file of the certificate authorities `SMTP_URL`'s server must chain to, in place of the system's (a private CA), read at start; set, TLS is required: `smtp://` must upgrade with STARTTLS, so a password never goes in clear text"),
  MAIL_FROM: z.string().default('Restock <alerts@restock.localhost>').describe('Sender of alerts'),
  STRIPE_SECRET_KEY: z.string().optional().describe('Stripe: MPP `stripe` payments and card checkout'),
  STRIPE_WEBHOOK_SECRET: z.string().optional().describe("Verifies Stripe's events at `POST /webhooks/stripe`, through which paid plans become active"),
  STRIPE_API_URL: z.url().default('https://api.stripe.com').describe('Where the Stripe SDK calls; only changed to reach a stand-in in tests'),
  STRIPE_NETWORK_ID: z.string().optional().describe('The Stripe profile (`networkId`) MPP `stripe` offers name, shown on the Shared Payment Token; with `STRIPE_SECRET_KEY`, enables those offers'),
  KLAVIYO_API_URL: z
    .url()
    .refine(isBareOrigin, 'must be an origin (scheme, host and port), without credentials, path, query or fragment')
    .default('https://a.klaviyo.com')
    .describe("Klaviyo's API origin, where stores' events go (docs/klaviyo.md); only changed to reach a stand-in in tests, and reached through the outbound guard like a tenant's host"),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info').describe('`fatal` … `trace`, or `silent`; logs are JSON lines'),
  SERVICE_NAME: z.string().min(1).default('Restock back-in-stock alerts').describe('Name reported by `getHealth`'),
  RESTOCK_SECRET: z.string().min(32).optional().describe('Signs links sent to people, such as unsubscribe links (32+ characters); unset: generated once and kept in the database'),
  BODY_LIMIT_BYTES: z.coerce.number().int().min(1024).default(16 * 1024).describe('Largest request body (413 above)'),
  SHUTDOWN_TIMEOUT_MS: z.coerce.number().int().min(0).default(10_000).describe('On SIGTERM or SIGINT, how long in-flight requests may take before being cut'),
  ALLOWED_HOSTS: z.string().optional().describe('Other names requests may give as `Host`, comma-separated: `host:port` for that port, `host` for any (e.g. the name a proxy in front sends when it does not pass the public one; `X-Forwarded-Host` is not read); malformed entries stop the start'),
  HEADERS_TIMEOUT_MS: z.coerce.number().int().min(100).default(10_000).describe("Longest a request's headers may take to arrive, at most `REQUEST_TIMEOUT_MS`; a client that trickles them gets 408 and the connection is closed"),
  REQUEST_TIMEOUT_MS: z.coerce.number().int().min(100).default(30_000).describe('Longest a whole request, headers and body, may take to arrive; then 408 and the connection is closed'),
  CONNECTION_TIMEOUT_MS: z.coerce.number().int().min(100).default(60_000).describe('A connection on which nothing moves either way for this long is closed, a request in progress included'),
  KEEP_ALIVE_TIMEOUT_MS: z.coerce.number().int().min(100).default(72_000).describe("How long an idle keep-alive connection waits for its next request; above load balancers' usual 60 s idle timeout, so that they close first"),
  SQLITE_SYNCHRONOUS: z.enum(['FULL', 'NORMAL']).default('FULL').describe('`FULL`: every acknowledged write survives power loss (group commit and a log flush off the event loop keep it cheap); `NORMAL`: writes survive a process crash only'),
  SQLITE_BUSY_TIMEOUT_MS: z.coerce.number().int().min(0).default(1000).describe('How long to wait for another process holding the SQLite write lock'),
  PG_POOL_MAX: z.coerce.number().int().min(1).default(10).describe('PostgreSQL connections per process'),
  PG_STATEMENT_TIMEOUT_MS: z.coerce.number().int().min(100).default(DEFAULT_PG_STATEMENT_TIMEOUT_MS).describe('Longest a PostgreSQL statement may run before the server cancels it (503); a connection silent for 1 s more is dropped, so a database lost without a reset answers 503 within that time (docs/operations.md)'),
  IDEMPOTENCY_TTL_HOURS: z.coerce.number().int().min(1).default(24).describe('How long an `Idempotency-Key` remembers its answer'),
  CHECKOUT_SESSION_TTL_MINUTES: z.coerce.number().int().min(1).default(60 * 24).describe('How long a checkout session stays open'),
  ACCESS_TOKEN_TTL_SECONDS: z.coerce.number().int().min(60).default(3600).describe('Lifetime of the access tokens handed to agents (ID-JAG and token endpoint)'),
  AGENT_CREDENTIAL_TTL_SECONDS: z.coerce.number().int().min(60).default(30 * 24 * 3600).describe('Lifetime of the credential an anonymous or e-mail-verified registration receives (30 days)'),
  CLAIM_TOKEN_TTL_HOURS: z.coerce.number().int().min(1).default(7 * 24).describe('How long a registration can be claimed'),
  CLAIM_CODE_TTL_MINUTES: z.coerce.number().int().min(1).default(15).describe('Lifetime of an e-mailed claim code'),
  CLAIM_CODE_MAX_ATTEMPTS: z.coerce.number().int().min(1).default(5).describe('Wrong tries an e-mailed claim code allows'),
  SIGNING_KEY_MAX_AGE_DAYS: z.coerce.number().int().min(0).default(90).describe('The token signing key is rotated at start when older than this (0: only `restock keys rotate` rotates it)'),
  AGENT_TRUSTED_ISSUERS: z.string().default('[]').describe('ID-JAG issuers trusted, JSON: `[{"issuer":"…","jwks_uri":"…"}]` or with inline `"jwks": {"keys": […]}`'),
  RATE_LIMIT_ANONYMOUS_PER_MINUTE: z.coerce.number().int().min(1).default(100).describe('Requests per minute of an unclaimed anonymous agent'),
  RATE_LIMIT_VERIFIED_EMAIL_PER_MINUTE: z.coerce.number().int().min(1).default(600).describe('Requests per minute of a claimed or e-mail-verified agent'),
  RATE_LIMIT_ID_JAG_PER_MINUTE: z.coerce.number().int().min(1).default(600).describe('Requests per minute of an ID-JAG agent'),
  REGISTRATION_LIMIT_PER_HOUR: z.coerce.number().int().min(1).default(20).describe('Registrations and claim steps per client address per hour'),
  STOREFRONT_LIMIT_PER_HOUR: z.coerce.number().int().min(1).default(60).describe('Storefront widget subscriptions per client address per hour'),
  STOREFRONT_READ_LIMIT_PER_MINUTE: z.coerce.number().int().min(1).default(300).describe('Widget availability reads per client address per minute (one per product page view)'),
  SIGN_IN_LIMIT_PER_HOUR: z.coerce.number().int().min(1).default(10).describe('Dashboard sign-in links asked for per client address per hour (each is an e-mail)'),
  SIGN_IN_LINK_TTL_MINUTES: z.coerce.number().int().min(1).default(15).describe('How long a dashboard sign-in link works'),
  DASHBOARD_SESSION_HOURS: z.coerce.number().int().min(1).default(12).describe('How long a dashboard session lasts'),
  TRUST_PROXY: z.string().optional().describe("Proxies whose `X-Forwarded-For` is believed (comma-separated addresses or CIDRs, e.g. the load balancer's), so per-address limits count clients; unset: the header is ignored"),
  RESTOCK_ENCRYPTION_KEY: z.string().optional().describe("32 random bytes, base64 (`openssl rand -base64 32`): seals credentials kept at rest (Shopify Admin API and BigCommerce tokens, WooCommerce keys, stores' SMTP URLs and Twilio accounts, webhook signing secrets, the test-network wallet's key); required by the Shopify and BigCommerce apps"),
  RUN_WORKER: z.enum(['true', 'false']).default('true').describe('`serve` also runs the dispatch worker; `false` when `restock worker` processes send instead'),
  BATCH_MULTIPLIER: z.coerce.number().min(0.1).max(100).default(DEFAULT_BATCH_POLICY.batchMultiplier).describe('Default batch policy (each store may set its own): a batch mails at most stock × this many subscribers'),
  BATCH_INTERVAL_SECONDS: z.coerce.number().int().min(0).default(DEFAULT_BATCH_POLICY.batchIntervalSeconds).describe('Default batch policy: the wait between batches of one restock'),
  MIN_STOCK: z.coerce.number().int().min(1).default(DEFAULT_BATCH_POLICY.minStock).describe('Default batch policy: a variant must have at least this many units for a restock to be announced'),
  FREQUENCY_CAP_MINUTES: z.coerce.number().int().min(0).default(DEFAULT_BATCH_POLICY.frequencyCapMinutes).describe('At most one alert per address per store in this window; later ones wait, they are not dropped (0: no cap)'),
  DISPATCH_CLAIM_SIZE: z.coerce.number().int().min(1).max(5000).default(500).describe('Alerts a worker claims (leases) at a time; also the most a crash can send twice'),
  DISPATCH_LEASE_SECONDS: z.coerce.number().int().min(5).default(120).describe("How long a worker's lease on the alerts it claimed lasts"),
  DISPATCH_MAX_ATTEMPTS: z.coerce.number().int().min(1).default(8).describe('Tries of an alert whose sending fails transiently'),
  DISPATCH_RETRY_BASE_MS: z.coerce.number().int().min(1).default(30_000).describe('First retry delay after a transient failure; doubles each attempt, with jitter'),
  DISPATCH_POLL_MS: z.coerce.number().int().min(10).default(1000).describe('How often an idle worker looks for work (a new restock wakes the workers of every process at once, through the change bus)'),
  TENANT_OUTBOUND_ALLOW: z.string().optional().describe("CIDR blocks (comma separated) a store's own mail server, webhook endpoint, platform API (a WooCommerce site, a Vendure Admin API) or a browser's push service may be in although internal, e.g. `127.0.0.1/32` for a local sink in development; unset: loopback, private, link-local and metadata addresses are refused (docs/security.md)"),
  SMTP_POOL_SIZE: z.coerce.number().int().min(1).max(100).default(5).describe('Pooled SMTP connections per transport'),
  RECONCILE_INTERVAL_MINUTES: z.coerce.number().int().min(0).default(15).describe("How often stores with Admin API credentials are compared with the platform's stock (0: never)"),
  X402_PAY_TO: z.string().regex(/^0x[0-9a-fA-F]{40}$/, 'an EVM address (0x and 40 hex digits)').optional().describe('x402: the address paid (real payments; replaces the test network); without it, no real x402 offer is made, never with a placeholder address'),
  X402_NETWORK: z.string().regex(/^eip155:[0-9]+$/, 'a CAIP-2 EVM network such as eip155:8453').default('eip155:8453').describe('x402: the CAIP-2 network (default Base)'),
  X402_ASSET: z.string().regex(/^0x[0-9a-fA-F]{40}$/, 'a token address').default('0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913').describe("x402: the ERC-20 token (with EIP-3009) prices are paid in (default Base's USDC)"),
  X402_ASSET_NAME: z.string().min(1).default('USD Coin').describe("x402: the token's EIP-712 domain name"),
  X402_ASSET_VERSION: z.string().min(1).default('2').describe("x402: the token's EIP-712 domain version"),
  X402_ASSET_DECIMALS: z.coerce.number().int().min(0).max(36).default(6).describe("x402: the token's decimals"),
  X402_FACILITATOR_URL: z.url().default('https://x402.org/facilitator').describe('x402: the facilitator that verifies and settles payments'),
  X402_MAX_TIMEOUT_SECONDS: z.coerce.number().int().min(10).default(300).describe('x402: how long a payment authorisation may stay open'),
  X402_FACILITATOR_CONCURRENCY: z.coerce.number().int().min(1).max(1000).default(16).describe('x402: calls to the facilitator at once; verifications beyond it are refused with 503 and `Retry-After`, settlements wait'),
  PAYMENT_LIMIT_PER_MINUTE: z.coerce.number().int().min(1).default(120).describe('Paid requests without a token per client address per minute, counted before the payment is looked at'),
  PAYMENTS_TEST_NETWORK: z.enum(['auto', 'on', 'off']).default('auto').describe('Pay per request on public test networks (x402 on Base Sepolia, MPP tempo on Tempo\'s testnet) to a wallet the service makes (`restock wallet show|export|import`): `auto` when neither `X402_PAY_TO` nor `MPP_TEMPO_RECIPIENT` is set and `NODE_ENV` is not `production`, `on`, or `off` (docs/payments.md)'),
  X402_TEST_NETWORK: z.string().regex(/^eip155:[0-9]+$/, 'a CAIP-2 EVM network such as eip155:84532').default('eip155:84532').describe("The test network's x402 offer: its CAIP-2 network (Base Sepolia; the tests point it at a local chain)"),
  X402_TEST_ASSET: z.string().regex(/^0x[0-9a-fA-F]{40}$/, 'a token address').default('0x036CbD53842c5426634e7929541eC2318f3dCF7e').describe("The test network's x402 offer: the token (Base Sepolia's USDC)"),
  X402_TEST_ASSET_NAME: z.string().min(1).default('USDC').describe("The test network's x402 offer: the token's EIP-712 domain name"),
  X402_TEST_ASSET_VERSION: z.string().min(1).default('2').describe("The test network's x402 offer: the token's EIP-712 domain version"),
  X402_TEST_FACILITATOR_URL: z.url().default('https://x402.org/facilitator').describe("The test network's x402 offer: the facilitator"),
  NODE_ENV: z.string().optional().describe('`production` makes `PAYMENTS_TEST_NETWORK=auto` refuse to start until the settings say where payments go'),
  MPP_TEMPO_RECIPIENT: z.string().regex(/^0x[0-9a-fA-F]{40}$/, 'an address (0x and 40 hex digits)').optional().describe('MPP `tempo`: the address paid on Tempo (real payments; replaces the test network); without it, no real tempo offer is made'),
  MPP_TEMPO_RPC_URL: z.url().optional().describe("MPP `tempo`: the Tempo RPC that verifies transfers (unset: the SDK's public endpoint)"),
  MPP_TEMPO_CURRENCY: z.string().regex(/^0x[0-9a-fA-F]{40}$/, 'a token address').optional().describe("MPP `tempo`: the TIP-20 token charged (unset: the SDK's default stablecoin)"),
  CHECKOUT_PROVIDER: z.enum(['local', 'stripe']).default('local').describe('Where checkoutPlan sends merchants: `local`, a test-mode page, or `stripe`, Stripe Checkout (needs `STRIPE_SECRET_KEY` and `STRIPE_WEBHOOK_SECRET`); stores installed as a Shopify app always buy through Shopify Billing (docs/plans.md)'),
  PLAN_STARTER_ALERTS_PER_MONTH: z.coerce.number().int().min(0).default(2_000).describe("Alerts a month of the starter plan (its USD 9.99 price is the seed's)"),
  PLAN_GROWTH_ALERTS_PER_MONTH: z.coerce.number().int().min(0).default(20_000).describe('Alerts a month of the growth plan'),
  PLAN_GROWTH_PRICE_CENTS: z.coerce.number().int().min(50).default(2_999).describe("The growth plan's monthly price in US cents"),
  PLAN_OVERAGE_CENTS_PER_ALERT: z.coerce.number().int().min(1).max(100).default(1).describe("The published price, in US cents, of each alert beyond a paid plan's allowance, billed up to the ceiling the store's owner sets (docs/plans.md)"),
  FREE_ALERTS_PER_MONTH: z.coerce.number().int().min(0).default(100).describe('Alerts a month for a store with no plan in force (none, pending, cancelled)'),
  PAYMENT_SETTLE_TIMEOUT_MS: z.coerce.number().int().min(100).default(15_000).describe('A facilitator or payment processor call slower than this is unreachable (verify) or recorded as pending and reconciled (settle)'),
  DOUBLE_OPT_IN_EXPIRY_HOURS: z.coerce.number().int().min(1).max(30 * 24).default(72).describe("How long a subscription (or phone) waits for its shopper's confirmation (double opt-in) before it expires, never alerted"),
  TLS_PORT: z.coerce.number().int().min(0).max(65535).optional().describe('Port of an optional HTTPS listener that asks for client certificates (mtls credentials, RFC 8705); needs `TLS_CERT_FILE` and `TLS_KEY_FILE`'),
  TLS_CERT_FILE: z.string().optional().describe("The HTTPS listener's certificate (PEM file)"),
  TLS_KEY_FILE: z.string().optional().describe("The HTTPS listener's private key (PEM file)"),
  // The slices the modules own, each in its settings.ts; the channels' and platforms' come from
  // their registries (everySetting, below).
  ...webhookSettings,
  ...observabilitySettings,
});

/**
 * Everything the service reads: the settings above and each channel's and platform's slice, which
 * its registry entry brings (src/channels.ts, src/platforms.ts), so that a new one's settings need
 * no line here.
 */
const everySetting = envSchema.extend({ ...CHANNEL_SETTINGS, ...PLATFORM_SETTINGS });

/** One setting: its variable, the default the parser fills in (`none`: unset stays unset), what it does. */
export interface Setting {
  name: string;
  default: string;
  description: string;
}

/** Read off the schema that parses the settings, so it names exactly the variables the service reads. */
export const SETTINGS: readonly Setting[] = Object.entries(everySetting.shape as Record<string, z.ZodType>).map(([name, schema]) => ({
  name,
  default: defaultText(schema),
  description: schema.description ?? '',
}));

function defaultText(schema: z.ZodType): string {
  const unset = schema.safeParse(undefined);
  return unset.success && unset.data !== undefined ? String(unset.data) : 'none';
}

const trustedIssuerSchema = z.union([
  z.object({ issuer: z.url(), jwks_uri: z.url() }).strict(),
  z.object({ issuer: z.url(), jwks: z.object({ keys: z.array(z.record(z.string(), z.unknown())).min(1) }) }).strict(),
]);
export type TrustedIssuer = z.infer<typeof trustedIssuerSchema>;

export interface Config {
  port: number;
  host: string;
  baseUrl: string;
  dataDir: string;
  database: DatabaseConfig;
  logLevel: z.infer<typeof envSchema>['LOG_LEVEL'];
  serviceName: string;
  secret: string | undefined;
  bodyLimitBytes: number;
  shutdownTimeoutMs: number;
  /** Names besides BASE_URL's host (and its loopback twins) that a request's Host may give. */
  allowedHosts: HostName[];
  http: HttpTimeouts;
  idempotencyTtlHours: number;
  checkoutSessionTtlMinutes: number;
  mailFrom: string;
  redisUrl: string | undefined;
  smtpUrl: string | undefined;
  /** SMTP_CA_FILE's certificates (PEM): the only authorities SMTP_URL's server may chain to, and TLS required. */
  smtpCa: string | undefined;
  /** Where the service may connect on a store's behalf (docs/security.md). */
  tenantOutbound: OutboundPolicy;
  /** Klaviyo's API origin (docs/klaviyo.md). */
  klaviyo: { apiUrl: string };
  agents: AgentConfig;
  dashboard: DashboardConfig;
  tls: { port: number; certFile: string; keyFile: string } | undefined;
  trustProxy: string[] | undefined;
  encryptionKey: string | undefined;
  runWorker: boolean;
  dispatch: DispatchConfig;
  /** What each platform makes of its settings (src/platforms.ts), by platform: its app, when configured. */
  platforms: PlatformConfigs;
  payments: PaymentsConfig;
  billing: BillingConfig;
  /** Outgoing webhooks' delivery (src/webhooks). */
  webhooks: WebhookConfig;
  /** What each channel makes of its settings (src/channels.ts), by channel. */
  channels: ChannelConfigs;
  /** Hours a subscription waits for its double opt-in before it expires. */
  doubleOptInExpiryHours: number;
  /** /metrics and tracing (src/observability). */
  observability: ObservabilityConfig;
}

/** How long the listeners wait on clients (docs/operations.md). */
export interface HttpTimeouts {
  headersTimeoutMs: number;
  requestTimeoutMs: number;
  connectionTimeoutMs: number;
  keepAliveTimeoutMs: number;
}

export interface BillingConfig {
  checkoutProvider: 'local' | 'stripe';
  plans: PlanSettings;
  freeAlertsPerMonth: number;
  stripeWebhookSecret: string | undefined;
}

/** Pay-per-request acceptance (docs/payments.md). An unset `payTo`/key leaves that offer out. */
export interface PaymentsConfig {
  x402: {
    payTo: string | undefined;
    network: string;
    asset: string;
    assetName: string;
    assetVersion: string;
    assetDecimals: number;
    facilitatorUrl: string;
    maxTimeoutSeconds: number;
    facilitatorConcurrency: number;
  };
  stripe: { secretKey: string | undefined; apiUrl: string; networkId: string | undefined };
  tempo: { recipient: string | undefined; rpcUrl: string | undefined; currency: string | undefined; testnet?: boolean };
  /**
   * MPP's card checkout session. With the hosted test checkout (`CHECKOUT_PROVIDER=local`) it is
   * taken in test mode: no card is charged, and what the session buys is completed on that page.
   * Otherwise it is offered as the seed lists it and refused, for want of a card processor.
   */
  card: { testCheckout: boolean };
  /**
   * Set when payments are taken on test networks (PAYMENTS_TEST_NETWORK): the x402 offer's network
   * and asset, and Tempo's testnet; both pay the wallet the service generates, so `x402.payTo` and
   * `tempo.recipient` are unset until the payments feature fills them from it.
   */
  testNetwork: TestNetworkConfig | undefined;
  settleTimeoutMs: number;
  /** Paid requests without a token per client address per minute. */
  limitPerAddressPerMinute: number;
}

export interface TestNetworkConfig {
  x402: Pick<PaymentsConfig['x402'], 'network' | 'asset' | 'assetName' | 'assetVersion' | 'facilitatorUrl'>;
}

export interface BatchPolicy {
  batchMultiplier: number;
  batchIntervalSeconds: number;
  minStock: number;
  frequencyCapMinutes: number;
}

export interface DispatchConfig {
  defaults: BatchPolicy;
  claimSize: number;
  leaseSeconds: number;
  maxAttempts: number;
  retryBaseMs: number;
  pollMs: number;
  smtpPoolSize: number;
  reconcileIntervalMinutes: number;
}

export interface AgentConfig {
  accessTokenTtlSeconds: number;
  credentialTtlSeconds: number;
  claimTokenTtlHours: number;
  claimCodeTtlMinutes: number;
  claimCodeMaxAttempts: number;
  signingKeyMaxAgeDays: number;
  trustedIssuers: TrustedIssuer[];
  rateLimits: { anonymous: number; verifiedEmail: number; idJag: number; registrationsPerHour: number };
}

export interface DashboardConfig {
  signInLinkTtlMinutes: number;
  sessionHours: number;
  rateLimits: { storefrontPerHour: number; storefrontReadsPerMinute: number; signInPerHour: number };
}

export class ConfigError extends Error {
  override name = 'ConfigError';
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const parsed = everySetting.safeParse(stripEmpty(env));
  if (!parsed.success) {
    const lines = parsed.error.issues.map((issue) => `  ${issue.path.join('.')}: ${issue.message}`);
    throw new ConfigError(`Invalid configuration:\n${lines.join('\n')}`);
  }
  // The channels' and platforms' values are theirs to read; the rest is typed by envSchema.
  const e = parsed.data as z.infer<typeof envSchema>;
  const dataDir = path.resolve(e.DATA_DIR);
  const service = { mailFrom: e.MAIL_FROM, encryptionKey: encryptionKey(e.RESTOCK_ENCRYPTION_KEY) };
  return {
    port: e.PORT,
    host: e.HOST,
    baseUrl: (e.BASE_URL ?? `http://localhost:${e.PORT}`).replace(/\/+$/, ''),
    dataDir,
    database: databaseConfig(e, dataDir),
    logLevel: e.LOG_LEVEL,
    serviceName: e.SERVICE_NAME,
    secret: e.RESTOCK_SECRET,
    bodyLimitBytes: e.BODY_LIMIT_BYTES,
    shutdownTimeoutMs: e.SHUTDOWN_TIMEOUT_MS,
    allowedHosts: allowedHosts(e.ALLOWED_HOSTS),
    http: httpTimeouts(e),
    idempotencyTtlHours: e.IDEMPOTENCY_TTL_HOURS,
    checkoutSessionTtlMinutes: e.CHECKOUT_SESSION_TTL_MINUTES,
    mailFrom: e.MAIL_FROM,
    redisUrl: checkedUrl(e.REDIS_URL, parseRedisUrl),
    smtpUrl: e.SMTP_URL,
    smtpCa: smtpCa(e.SMTP_CA_FILE),
    tenantOutbound: tenantOutbound(e.TENANT_OUTBOUND_ALLOW),
    klaviyo: { apiUrl: new URL(e.KLAVIYO_API_URL).origin },
    agents: {
      accessTokenTtlSeconds: e.ACCESS_TOKEN_TTL_SECONDS,
      credentialTtlSeconds: e.AGENT_CREDENTIAL_TTL_SECONDS,
      claimTokenTtlHours: e.CLAIM_TOKEN_TTL_HOURS,
      claimCodeTtlMinutes: e.CLAIM_CODE_TTL_MINUTES,
      claimCodeMaxAttempts: e.CLAIM_CODE_MAX_ATTEMPTS,
      signingKeyMaxAgeDays: e.SIGNING_KEY_MAX_AGE_DAYS,
      trustedIssuers: parseTrustedIssuers(e.AGENT_TRUSTED_ISSUERS),
      rateLimits: {
        anonymous: e.RATE_LIMIT_ANONYMOUS_PER_MINUTE,
        verifiedEmail: e.RATE_LIMIT_VERIFIED_EMAIL_PER_MINUTE,
        idJag: e.RATE_LIMIT_ID_JAG_PER_MINUTE,
        registrationsPerHour: e.REGISTRATION_LIMIT_PER_HOUR,
      },
    },
    dashboard: {
      signInLinkTtlMinutes: e.SIGN_IN_LINK_TTL_MINUTES,
      sessionHours: e.DASHBOARD_SESSION_HOURS,
      rateLimits: { storefrontPerHour: e.STOREFRONT_LIMIT_PER_HOUR, storefrontReadsPerMinute: e.STOREFRONT_READ_LIMIT_PER_MINUTE, signInPerHour: e.SIGN_IN_LIMIT_PER_HOUR },
    },
    tls: tlsConfig(e),
    trustProxy: e.TRUST_PROXY?.split(',').map((entry) => entry.trim()).filter(Boolean),
    encryptionKey: service.encryptionKey,
    runWorker: e.RUN_WORKER === 'true',
    dispatch: {
      defaults: {
        batchMultiplier: e.BATCH_MULTIPLIER,
        batchIntervalSeconds: e.BATCH_INTERVAL_SECONDS,
        minStock: e.MIN_STOCK,
        frequencyCapMinutes: e.FREQUENCY_CAP_MINUTES,
      },
      claimSize: e.DISPATCH_CLAIM_SIZE,
      leaseSeconds: e.DISPATCH_LEASE_SECONDS,
      maxAttempts: e.DISPATCH_MAX_ATTEMPTS,
      retryBaseMs: e.DISPATCH_RETRY_BASE_MS,
      pollMs: e.DISPATCH_POLL_MS,
      smtpPoolSize: e.SMTP_POOL_SIZE,
      reconcileIntervalMinutes: e.RECONCILE_INTERVAL_MINUTES,
    },
    platforms: moduleSettings(() => readPlatformSettings(parsed.data, service)),
    payments: {
      x402: {
        payTo: e.X402_PAY_TO,
        network: e.X402_NETWORK,
        asset: e.X402_ASSET,
        assetName: e.X402_ASSET_NAME,
        assetVersion: e.X402_ASSET_VERSION,
        assetDecimals: e.X402_ASSET_DECIMALS,
        facilitatorUrl: e.X402_FACILITATOR_URL.replace(/\/+$/, ''),
        maxTimeoutSeconds: e.X402_MAX_TIMEOUT_SECONDS,
        facilitatorConcurrency: e.X402_FACILITATOR_CONCURRENCY,
      },
      stripe: { secretKey: e.STRIPE_SECRET_KEY, apiUrl: e.STRIPE_API_URL, networkId: e.STRIPE_NETWORK_ID },
      tempo: { recipient: e.MPP_TEMPO_RECIPIENT, rpcUrl: e.MPP_TEMPO_RPC_URL, currency: e.MPP_TEMPO_CURRENCY },
      card: { testCheckout: e.CHECKOUT_PROVIDER === 'local' },
      testNetwork: testNetworkConfig(e),
      settleTimeoutMs: e.PAYMENT_SETTLE_TIMEOUT_MS,
      limitPerAddressPerMinute: e.PAYMENT_LIMIT_PER_MINUTE,
    },
    billing: billingConfig(e),
    webhooks: webhookConfig(e),
    channels: moduleSettings(() => readChannelSettings(parsed.data, service)),
    doubleOptInExpiryHours: e.DOUBLE_OPT_IN_EXPIRY_HOURS,
    observability: observability(e),
  };
}

function observability(e: z.infer<typeof envSchema>): ObservabilityConfig {
  try {
    return observabilityConfig(e);
  } catch (err) {
    throw new ConfigError(`Invalid configuration:\n  ${(err as Error).message}`);
  }
}

/** An http(s) URL that names an origin and nothing more: a base that paths are appended to. */
function isBareOrigin(text: string): boolean {
  const url = new URL(text);
  return (url.protocol === 'https:' || url.protocol === 'http:') && url.username === '' && url.password === '' && url.pathname === '/' && url.search === '' && url.hash === '';
}

function billingConfig(e: z.infer<typeof envSchema>): BillingConfig {
  if (e.CHECKOUT_PROVIDER === 'stripe' && (!e.STRIPE_SECRET_KEY || !e.STRIPE_WEBHOOK_SECRET)) {
    throw new ConfigError('Invalid configuration:\n  CHECKOUT_PROVIDER: stripe needs STRIPE_SECRET_KEY, and STRIPE_WEBHOOK_SECRET so that paid plans become active');
  }
  return {
    checkoutProvider: e.CHECKOUT_PROVIDER,
    plans: {
      starterAlertsPerMonth: e.PLAN_STARTER_ALERTS_PER_MONTH,
      growthAlertsPerMonth: e.PLAN_GROWTH_ALERTS_PER_MONTH,
      growthPriceCents: e.PLAN_GROWTH_PRICE_CENTS,
      overageCentsPerAlert: e.PLAN_OVERAGE_CENTS_PER_ALERT,
    },
    freeAlertsPerMonth: e.FREE_ALERTS_PER_MONTH,
    stripeWebhookSecret: e.STRIPE_WEBHOOK_SECRET,
  };
}

/** A registry's readings of its modules' slices; what one refuses stops the start like any bad setting. */
function moduleSettings<T>(read: () => T): T {
  try {
    return read();
  } catch (err) {
    throw new ConfigError(`Invalid configuration:\n  ${(err as Error).message}`);
  }
}

function encryptionKey(value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  try {
    decodeKey(value);
  } catch (err) {
    throw new ConfigError(`Invalid configuration:\n  RESTOCK_ENCRYPTION_KEY: ${(err as Error).message}`);
  }
  return value;
}

/**
 * Test-network payments: on by default where nothing says where real payments go, never beside a
 * configured network (a deployment pays one way or the other, never both), and in production only
 * when asked for by name, so a forgotten setting cannot leave a live service taking test money.
 */
function testNetworkConfig(e: z.infer<typeof envSchema>): TestNetworkConfig | undefined {
  const configured = [e.X402_PAY_TO && 'X402_PAY_TO', e.MPP_TEMPO_RECIPIENT && 'MPP_TEMPO_RECIPIENT'].filter((name): name is string => Boolean(name));
  if (e.PAYMENTS_TEST_NETWORK === 'off') return undefined;
  if (e.PAYMENTS_TEST_NETWORK === 'on' && configured.length > 0) {
    throw new ConfigError(`Invalid configuration:\n  PAYMENTS_TEST_NETWORK: on takes payments on test networks only; ${configured.join(' and ')} name a real one. Set one or the other`);
  }
  if (e.PAYMENTS_TEST_NETWORK === 'auto') {
    if (configured.length > 0) return undefined;
    if (e.NODE_ENV === 'production') {
      throw new ConfigError(
        'Invalid configuration:\n  PAYMENTS_TEST_NETWORK: in production (NODE_ENV=production) say where payments go: X402_PAY_TO (and the MPP settings) for real ones, PAYMENTS_TEST_NETWORK=on for test networks, or PAYMENTS_TEST_NETWORK=off for none',
      );
    }
  }
  return {
    x402: {
      network: e.X402_TEST_NETWORK,
      asset: e.X402_TEST_ASSET,
      assetName: e.X402_TEST_ASSET_NAME,
      assetVersion: e.X402_TEST_ASSET_VERSION,
      facilitatorUrl: e.X402_TEST_FACILITATOR_URL.replace(/\/+$/, ''),
    },
  };
}

/** A connection URL the client will be given typed values of (core/service-urls.ts), checked at start-up. */
function checkedUrl(text: string | undefined, parse: (text: string) => unknown): string | undefined {
  if (text === undefined) return undefined;
  try {
    parse(text);
  } catch (err) {
    if (!(err instanceof ServiceUrlError)) throw err;
    throw new ConfigError(`Invalid configuration:\n  ${err.message}`);
  }
  return text;
}

function allowedHosts(text: string | undefined): HostName[] {
  try {
    return parseAllowedHosts(text);
  } catch (err) {
    throw new ConfigError(`Invalid configuration:\n  ALLOWED_HOSTS: ${(err as Error).message}`);
  }
}

function httpTimeouts(e: z.infer<typeof envSchema>): HttpTimeouts {
  // Node refuses a headers timeout longer than the request's: the request's includes its headers.
  if (e.HEADERS_TIMEOUT_MS > e.REQUEST_TIMEOUT_MS) {
    throw new ConfigError('Invalid configuration:\n  HEADERS_TIMEOUT_MS: must not exceed REQUEST_TIMEOUT_MS (the whole request includes its headers)');
  }
  return {
    headersTimeoutMs: e.HEADERS_TIMEOUT_MS,
    requestTimeoutMs: e.REQUEST_TIMEOUT_MS,
    connectionTimeoutMs: e.CONNECTION_TIMEOUT_MS,
    keepAliveTimeoutMs: e.KEEP_ALIVE_TIMEOUT_MS,
  };
}

function tenantOutbound(text: string | undefined): OutboundPolicy {
  try {
    return parseOutboundAllowList(text);
  } catch (err) {
    throw new ConfigError(`Invalid configuration:\n  TENANT_OUTBOUND_ALLOW: ${(err as Error).message}`);
  }
}

function parseTrustedIssuers(text: string): TrustedIssuer[] {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new ConfigError('Invalid configuration:\n  AGENT_TRUSTED_ISSUERS: not valid JSON');
  }
  const parsed = z.array(trustedIssuerSchema).safeParse(value);
  if (!parsed.success) {
    throw new ConfigError(
      `Invalid configuration:\n  AGENT_TRUSTED_ISSUERS: each entry needs "issuer" and either "jwks_uri" or "jwks" (${parsed.error.issues[0]?.message})`,
    );
  }
  return parsed.data;
}

/** Read once at start, so a missing or wrong file stops the service instead of failing every send. */
function smtpCa(file: string | undefined): string | undefined {
  if (file === undefined) return undefined;
  let pem: string;
  try {
    pem = readFileSync(file, 'utf8');
  } catch (err) {
    throw new ConfigError(`Invalid configuration:\n  SMTP_CA_FILE: cannot read ${file} (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
  }
  try {
    new X509Certificate(pem);
  } catch {
    throw new ConfigError(`Invalid configuration:\n  SMTP_CA_FILE: ${file} holds no PEM certificate`);
  }
  return pem;
}

function tlsConfig(e: z.infer<typeof envSchema>): Config['tls'] {
  if (e.TLS_PORT === undefined) return undefined;
  if (!e.TLS_CERT_FILE || !e.TLS_KEY_FILE) {
    throw new ConfigError('Invalid configuration:\n  TLS_PORT: needs TLS_CERT_FILE and TLS_KEY_FILE');
  }
  return { port: e.TLS_PORT, certFile: e.TLS_CERT_FILE, keyFile: e.TLS_KEY_FILE };
}

function databaseConfig(e: z.infer<typeof envSchema>, dataDir: string): DatabaseConfig {
  const url = e.DATABASE_URL;
  if (!url) {
    return {
      dialect: 'sqlite',
      file: path.join(dataDir, 'restock.db'),
      synchronous: e.SQLITE_SYNCHRONOUS,
      busyTimeoutMs: e.SQLITE_BUSY_TIMEOUT_MS,
    };
  }
  if (/^postgres(ql)?:\/\//.test(url)) return { dialect: 'postgres', url: checkedUrl(url, parsePostgresUrl)!, poolMax: e.PG_POOL_MAX, statementTimeoutMs: e.PG_STATEMENT_TIMEOUT_MS };
  if (url.startsWith('sqlite:')) {
    return {
      dialect: 'sqlite',
      file: path.resolve(url.slice('sqlite:'.length).replace(/^\/\/(?=\/)/, '')),
      synchronous: e.SQLITE_SYNCHRONOUS,
      busyTimeoutMs: e.SQLITE_BUSY_TIMEOUT_MS,
    };
  }
  throw new ConfigError('Invalid configuration:\n  DATABASE_URL: expected postgres://... or sqlite:<path>');
}

/** An empty variable (`FOO=`) means "use the default", as most tools read it. */
function stripEmpty(env: NodeJS.ProcessEnv): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(env)) if (value !== undefined && value !== '') out[key] = value;
  return out;
}
