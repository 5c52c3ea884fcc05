// Longer than most files on purpose: every setting the service reads is parsed and checked here,
// in one place, so `.env.example`, the README's table and start-up errors cannot disagree.
import path from 'node:path';
import { z } from 'zod';
import type { PlanSettings } from './billing/plans.ts';
import { parseAllowedHosts, type HostName } from './core/http/host-names.ts';
import { parseOutboundAllowList, type OutboundPolicy } from './core/net/outbound-guard.ts';
import { decodeKey } from './core/sealed-secrets.ts';
import { pushConfig, type PushConfig } from './push/settings.ts';
import { isApiOrigin, smsConfig, type SmsConfig } from './sms/settings.ts';
import { DEFAULT_RETRY_SCHEDULE, retrySchedulePattern, webhookConfig, type WebhookConfig } from './webhooks/settings.ts';
import { parsePostgresUrl, parseRedisUrl, ServiceUrlError } from './core/service-urls.ts';
import { isOtlpEndpoint, observabilityConfig, type ObservabilityConfig } from './observability/settings.ts';

/** The batch policy a store follows until it sets its own (docs/dispatch.md says why). */
export const DEFAULT_BATCH_POLICY: BatchPolicy = { batchMultiplier: 2, batchIntervalSeconds: 600, minStock: 1, frequencyCapMinutes: 60 };

/** Also the bound of a database opened without the settings (the test command's template, say). */
export const DEFAULT_PG_STATEMENT_TIMEOUT_MS = 5000;

/**
 * Every setting the service reads, with the embedded defaults that let `npm start` run with
 * nothing configured. `.env.example` and the README's table list the same names.
 */
const envSchema = z.object({
  PORT: z.coerce.number().int().min(0).max(65535).default(3000),
  HOST: z.string().min(1).default('127.0.0.1'),
  BASE_URL: z.url().optional(),
  DATA_DIR: z.string().min(1).default('./data'),
  DATABASE_URL: z.string().optional(),
  REDIS_URL: z.string().optional(),
  SMTP_URL: z.string().optional(),
  MAIL_FROM: z.string().default('Restock <alerts@restock.localhost>'),
  SHOPIFY_API_KEY: z.string().optional(),
  SHOPIFY_API_SECRET: z.string().optional(),
  BIGCOMMERCE_CLIENT_ID: z.string().optional(),
  BIGCOMMERCE_CLIENT_SECRET: z.string().optional(),
  STRIPE_SECRET_KEY: z.string().optional(),
  STRIPE_WEBHOOK_SECRET: z.string().optional(),
  /** Where the Stripe SDK sends its calls; only changed to reach a stand-in in tests. */
  STRIPE_API_URL: z.url().default('https://api.stripe.com'),
  /** The merchant's Stripe profile (`networkId`) that MPP `stripe` offers name; Stripe shows it on the Shared Payment Token. */
  STRIPE_NETWORK_ID: z.string().optional(),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  SERVICE_NAME: z.string().min(1).default('Restock back-in-stock alerts'),
  /** Signs unsubscribe links; generated once and kept in the database when unset. */
  RESTOCK_SECRET: z.string().min(32).optional(),
  BODY_LIMIT_BYTES: z.coerce.number().int().min(1024).default(16 * 1024),
  /** How long a graceful shutdown waits for in-flight requests before closing them. */
  SHUTDOWN_TIMEOUT_MS: z.coerce.number().int().min(0).default(10_000),
  /** Names besides BASE_URL's host that requests may address (comma-separated host or host:port); see core/http/host-check.ts. */
  ALLOWED_HOSTS: z.string().optional(),
  /** Longest a request's headers may take to arrive; a client that trickles them is cut with 408. */
  HEADERS_TIMEOUT_MS: z.coerce.number().int().min(100).default(10_000),
  /** Longest a whole request, headers and body, may take to arrive (408 after). */
  REQUEST_TIMEOUT_MS: z.coerce.number().int().min(100).default(30_000),
  /** A connection on which nothing moves either way for this long is closed, a request in progress included. */
  CONNECTION_TIMEOUT_MS: z.coerce.number().int().min(100).default(60_000),
  /** How long a keep-alive connection may wait for its next request; above load balancers' usual 60 s, so they close first. */
  KEEP_ALIVE_TIMEOUT_MS: z.coerce.number().int().min(100).default(72_000),
  /** FULL makes every acknowledged write survive power loss; group commit keeps it cheap. */
  SQLITE_SYNCHRONOUS: z.enum(['FULL', 'NORMAL']).default('FULL'),
  SQLITE_BUSY_TIMEOUT_MS: z.coerce.number().int().min(0).default(1000),
  PG_POOL_MAX: z.coerce.number().int().min(1).default(10),
  /**
   * Longest a PostgreSQL statement may run before the server cancels it; a connection that stays
   * silent a second longer is dropped, so a database lost without a reset answers 503, not never.
   */
  PG_STATEMENT_TIMEOUT_MS: z.coerce.number().int().min(100).default(DEFAULT_PG_STATEMENT_TIMEOUT_MS),
  /** How long an Idempotency-Key remembers its answer. */
  IDEMPOTENCY_TTL_HOURS: z.coerce.number().int().min(1).default(24),
  CHECKOUT_SESSION_TTL_MINUTES: z.coerce.number().int().min(1).default(60 * 24),
  /** Lifetime of the access tokens (credentials) handed to agents. */
  ACCESS_TOKEN_TTL_SECONDS: z.coerce.number().int().min(60).default(3600),
  /** Lifetime of the credential an anonymous or e-mail-verified registration receives. */
  AGENT_CREDENTIAL_TTL_SECONDS: z.coerce.number().int().min(60).default(30 * 24 * 3600),
  CLAIM_TOKEN_TTL_HOURS: z.coerce.number().int().min(1).default(7 * 24),
  CLAIM_CODE_TTL_MINUTES: z.coerce.number().int().min(1).default(15),
  CLAIM_CODE_MAX_ATTEMPTS: z.coerce.number().int().min(1).default(5),
  /** Signing keys older than this are rotated at start; 0 keeps a key until `restock keys rotate`. */
  SIGNING_KEY_MAX_AGE_DAYS: z.coerce.number().int().min(0).default(90),
  /** JSON list of trusted ID-JAG issuers: [{"issuer": "...", "jwks_uri": "..."} or {"issuer": "...", "jwks": {"keys": [...]}}]. */
  AGENT_TRUSTED_ISSUERS: z.string().default('[]'),
  RATE_LIMIT_ANONYMOUS_PER_MINUTE: z.coerce.number().int().min(1).default(100),
  RATE_LIMIT_VERIFIED_EMAIL_PER_MINUTE: z.coerce.number().int().min(1).default(600),
  RATE_LIMIT_ID_JAG_PER_MINUTE: z.coerce.number().int().min(1).default(600),
  /** Registrations one client address may make per hour. */
  REGISTRATION_LIMIT_PER_HOUR: z.coerce.number().int().min(1).default(20),
  /** Subscriptions one client address may make through the storefront widget per hour. */
  STOREFRONT_LIMIT_PER_HOUR: z.coerce.number().int().min(1).default(60),
  /** Availability reads of the widget per client address per minute (one per product page view). */
  STOREFRONT_READ_LIMIT_PER_MINUTE: z.coerce.number().int().min(1).default(300),
  /** Dashboard sign-in links one client address may ask for per hour (each is an e-mail). */
  SIGN_IN_LIMIT_PER_HOUR: z.coerce.number().int().min(1).default(10),
  /** How long a dashboard sign-in link works, and how long a signed-in session lasts. */
  SIGN_IN_LINK_TTL_MINUTES: z.coerce.number().int().min(1).default(15),
  DASHBOARD_SESSION_HOURS: z.coerce.number().int().min(1).default(12),
  /**
   * Proxies whose X-Forwarded-For is believed (comma-separated addresses or CIDRs, e.g. the load
   * balancer's), so per-address limits count clients, not the proxy. Unset: the header is ignored.
   */
  TRUST_PROXY: z.string().optional(),
  /** 32 random bytes (base64) sealing credentials kept at rest: Shopify Admin tokens, stores' SMTP passwords. */
  RESTOCK_ENCRYPTION_KEY: z.string().optional(),
  /** `serve` runs the dispatch worker in the same process unless this is false (then run `restock worker`). */
  RUN_WORKER: z.enum(['true', 'false']).default('true'),
  /** Default batch policy; each store may set its own. A batch mails at most stock × multiplier subscribers. */
  BATCH_MULTIPLIER: z.coerce.number().min(0.1).max(100).default(DEFAULT_BATCH_POLICY.batchMultiplier),
  BATCH_INTERVAL_SECONDS: z.coerce.number().int().min(0).default(DEFAULT_BATCH_POLICY.batchIntervalSeconds),
  /** A variant must have at least this many units for a restock to be announced. */
  MIN_STOCK: z.coerce.number().int().min(1).default(DEFAULT_BATCH_POLICY.minStock),
  /** At most one alert per address per store in this window; later ones wait, they are not dropped. 0 = no cap. */
  FREQUENCY_CAP_MINUTES: z.coerce.number().int().min(0).default(DEFAULT_BATCH_POLICY.frequencyCapMinutes),
  /** Alerts one worker claims (leases) at a time; also the most a crash can send twice. */
  DISPATCH_CLAIM_SIZE: z.coerce.number().int().min(1).max(5000).default(500),
  DISPATCH_LEASE_SECONDS: z.coerce.number().int().min(5).default(120),
  DISPATCH_MAX_ATTEMPTS: z.coerce.number().int().min(1).default(8),
  /** First retry delay after a transient failure; doubles each attempt, with jitter. */
  DISPATCH_RETRY_BASE_MS: z.coerce.number().int().min(1).default(30_000),
  DISPATCH_POLL_MS: z.coerce.number().int().min(10).default(1000),
  /**
   * Internal addresses a store's own mail server may nevertheless have (CIDR blocks, comma
   * separated), e.g. a local mail sink in development. Unset: none, as in production.
   */
  TENANT_OUTBOUND_ALLOW: z.string().optional(),
  /** Pooled SMTP connections per transport. */
  SMTP_POOL_SIZE: z.coerce.number().int().min(1).max(100).default(5),
  /** How often stores with Admin API credentials are compared with the platform's stock. 0 = never. */
  RECONCILE_INTERVAL_MINUTES: z.coerce.number().int().min(0).default(15),
  SHOPIFY_API_VERSION: z.string().default('2026-07'),
  SHOPIFY_SCOPES: z.string().default('read_products,read_inventory,read_publications,write_app_proxy,read_orders'),
  /**
   * `true` makes every Shopify Billing charge a test charge (no money moves), e.g. for a staging
   * app. Unset, only a development store's charges are test charges, as Shopify reports the store.
   */
  SHOPIFY_BILLING_TEST: z.enum(['true', 'false']).default('false'),
  /** x402: the address paid. Without it, no x402 offer is made (never a placeholder address). */
  X402_PAY_TO: z.string().regex(/^0x[0-9a-fA-F]{40}$/, 'an EVM address (0x and 40 hex digits)').optional(),
  /** x402: CAIP-2 network, asset (ERC-20 with EIP-3009) and its EIP-712 domain. Defaults: USDC on Base. */
  X402_NETWORK: z.string().regex(/^eip155:[0-9]+$/, 'a CAIP-2 EVM network such as eip155:8453').default('eip155:8453'),
  X402_ASSET: z.string().regex(/^0x[0-9a-fA-F]{40}$/, 'a token address').default('0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913'),
  X402_ASSET_NAME: z.string().min(1).default('USD Coin'),
  X402_ASSET_VERSION: z.string().min(1).default('2'),
  X402_ASSET_DECIMALS: z.coerce.number().int().min(0).max(36).default(6),
  X402_FACILITATOR_URL: z.url().default('https://x402.org/facilitator'),
  /** x402: how long a payment authorisation may stay open. */
  X402_MAX_TIMEOUT_SECONDS: z.coerce.number().int().min(10).default(300),
  /** x402: calls to the facilitator at once; verifications beyond it are refused with 503, settlements wait. */
  X402_FACILITATOR_CONCURRENCY: z.coerce.number().int().min(1).max(1000).default(16),
  /** Paid requests without a token one client address may make per minute, counted before the payment is looked at. */
  PAYMENT_LIMIT_PER_MINUTE: z.coerce.number().int().min(1).default(120),
  /**
   * Pay per request on public test networks (x402 on Base Sepolia, MPP tempo on Tempo's testnet),
   * paid to a wallet the service generates: `auto` (the default) when neither X402_PAY_TO nor
   * MPP_TEMPO_RECIPIENT is set and NODE_ENV is not production, `on`, or `off`.
   */
  PAYMENTS_TEST_NETWORK: z.enum(['auto', 'on', 'off']).default('auto'),
  /** The test network's x402 offer: Base Sepolia's USDC and the public facilitator, unless a local chain stands in. */
  X402_TEST_NETWORK: z.string().regex(/^eip155:[0-9]+$/, 'a CAIP-2 EVM network such as eip155:84532').default('eip155:84532'),
  X402_TEST_ASSET: z.string().regex(/^0x[0-9a-fA-F]{40}$/, 'a token address').default('0x036CbD53842c5426634e7929541eC2318f3dCF7e'),
  X402_TEST_ASSET_NAME: z.string().min(1).default('USDC'),
  X402_TEST_ASSET_VERSION: z.string().min(1).default('2'),
  X402_TEST_FACILITATOR_URL: z.url().default('https://x402.org/facilitator'),
  NODE_ENV: z.string().optional(),
  /** MPP `tempo`: the address paid on Tempo; without it, no tempo offer is made. */
  MPP_TEMPO_RECIPIENT: z.string().regex(/^0x[0-9a-fA-F]{40}$/, 'an address (0x and 40 hex digits)').optional(),
  /** MPP `tempo`: the Tempo RPC that verifies transfers (the SDK's public endpoint when unset). */
  MPP_TEMPO_RPC_URL: z.url().optional(),
  /** MPP `tempo`: the TIP-20 token charged (the SDK's default stablecoin when unset). */
  MPP_TEMPO_CURRENCY: z.string().regex(/^0x[0-9a-fA-F]{40}$/, 'a token address').optional(),
  /** Where checkoutPlan sends merchants (stores installed as a Shopify app always use Shopify Billing). */
  CHECKOUT_PROVIDER: z.enum(['local', 'stripe']).default('local'),
  PLAN_STARTER_ALERTS_PER_MONTH: z.coerce.number().int().min(0).default(2_000),
  PLAN_GROWTH_ALERTS_PER_MONTH: z.coerce.number().int().min(0).default(20_000),
  PLAN_GROWTH_PRICE_CENTS: z.coerce.number().int().min(50).default(2_999),
  /** Alerts a month for a store with no plan in force (none, pending, cancelled). */
  FREE_ALERTS_PER_MONTH: z.coerce.number().int().min(0).default(100),
  /** How long a settlement (x402 facilitator, Stripe) may take before it is recorded as pending and reconciled. */
  PAYMENT_SETTLE_TIMEOUT_MS: z.coerce.number().int().min(100).default(15_000),
  /** Outgoing webhooks: the longest one HTTP exchange with a store's endpoint may take. */
  WEBHOOK_TIMEOUT_MS: z.coerce.number().int().min(100).max(120_000).default(10_000),
  /** Attempts of one webhook delivery before it is given up. */
  WEBHOOK_MAX_ATTEMPTS: z.coerce.number().int().min(1).max(50).default(10),
  /** Delays before each retry (units ms, s, m, h), jittered by ±10%; the last repeats. */
  WEBHOOK_RETRY_SCHEDULE: z.string().regex(retrySchedulePattern, 'durations such as 5s,5m,2h, comma separated').default(DEFAULT_RETRY_SCHEDULE),
  /** An endpoint is disabled after this many consecutive failed attempts that have gone on for WEBHOOK_DISABLE_AFTER_HOURS. */
  WEBHOOK_DISABLE_AFTER_FAILURES: z.coerce.number().int().min(1).default(20),
  WEBHOOK_DISABLE_AFTER_HOURS: z.coerce.number().int().min(0).default(24),
  /** SMS: the service's own Twilio account and sender (all three, or none: then only stores with their own account text). */
  TWILIO_ACCOUNT_SID: z.string().regex(/^AC[0-9a-f]{32}$/, 'a Twilio Account SID (AC and 32 hex digits)').optional(),
  TWILIO_AUTH_TOKEN: z.string().regex(/^[0-9a-f]{32}$/, 'a Twilio auth token (32 hex digits)').optional(),
  TWILIO_FROM: z.string().regex(/^(\+[1-9][0-9]{6,14}|MG[0-9a-f]{32})$/, 'an E.164 number or a Messaging Service SID').optional(),
  /** Twilio's REST API; only a test stand-in changes it. */
  TWILIO_API_URL: z.url().refine(isApiOrigin, 'an http(s) origin, without credentials, path or query').default('https://api.twilio.com'),
  /** Web push: the VAPID subject (mailto: or https:); default mailto: the MAIL_FROM address. */
  PUSH_SUBJECT: z.string().regex(/^(mailto:[^\s]+|https:\/\/[^\s]+)$/, 'a mailto: or https: URL').optional(),
  PUSH_TTL_SECONDS: z.coerce.number().int().min(0).max(28 * 24 * 3600).default(2 * 24 * 3600),
  PUSH_TIMEOUT_MS: z.coerce.number().int().min(100).max(120_000).default(10_000),
  /** How long a subscription waiting for the shopper's confirmation (double opt-in) lasts before it expires. */
  DOUBLE_OPT_IN_EXPIRY_HOURS: z.coerce.number().int().min(1).max(30 * 24).default(72),
  /** Optional HTTPS listener that asks for client certificates (mtls credentials). */
  TLS_PORT: z.coerce.number().int().min(0).max(65535).optional(),
  TLS_CERT_FILE: z.string().optional(),
  TLS_KEY_FILE: z.string().optional(),
  /** The bearer secret GET /metrics asks for on PORT; with neither this nor METRICS_PORT, /metrics is not served. */
  METRICS_TOKEN: z.string().min(16, 'at least 16 characters (a random secret)').optional(),
  /** Serves /metrics on a listener of its own, bound to 127.0.0.1, without a token. */
  METRICS_PORT: z.coerce.number().int().min(1).max(65535).optional(),
  /** OTLP/HTTP collector: traces are exported there when set; nothing is loaded otherwise. */
  OTEL_EXPORTER_OTLP_ENDPOINT: z.string().refine(isOtlpEndpoint, 'an http(s) URL without credentials, query or fragment').optional(),
  OTEL_SERVICE_NAME: z.string().min(1).optional(),
});

const trustedIssuerSchema = z.union([
  z.object({ issuer: z.url(), jwks_uri: z.url() }).strict(),
  z.object({ issuer: z.url(), jwks: z.object({ keys: z.array(z.record(z.string(), z.unknown())).min(1) }) }).strict(),
]);
export type TrustedIssuer = z.infer<typeof trustedIssuerSchema>;

export type DatabaseConfig =
  | { dialect: 'sqlite'; file: string; synchronous: 'FULL' | 'NORMAL'; busyTimeoutMs: number }
  | { dialect: 'postgres'; url: string; poolMax: number; statementTimeoutMs?: number };

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
  /** Where the service may connect on a store's behalf (docs/security.md). */
  tenantOutbound: OutboundPolicy;
  agents: AgentConfig;
  dashboard: DashboardConfig;
  tls: { port: number; certFile: string; keyFile: string } | undefined;
  trustProxy: string[] | undefined;
  encryptionKey: string | undefined;
  runWorker: boolean;
  dispatch: DispatchConfig;
  /** Set when SHOPIFY_API_KEY and SHOPIFY_API_SECRET are: the Shopify app (install, webhooks, reconciliation). */
  shopify: ShopifyConfig | undefined;
  /** Set when BIGCOMMERCE_CLIENT_ID and BIGCOMMERCE_CLIENT_SECRET are: the BigCommerce app (install, webhooks, reconciliation). */
  bigcommerce: BigCommerceConfig | undefined;
  payments: PaymentsConfig;
  billing: BillingConfig;
  /** Outgoing webhooks' delivery (src/webhooks). */
  webhooks: WebhookConfig;
  sms: SmsConfig;
  push: PushConfig;
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

export interface ShopifyConfig {
  apiKey: string;
  apiSecret: string;
  apiVersion: string;
  scopes: string[];
  /** Every Shopify Billing charge is a test charge, whatever the store (SHOPIFY_BILLING_TEST=true). */
  alwaysTestCharges: boolean;
}

export interface BigCommerceConfig {
  clientId: string;
  clientSecret: string;
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
  const parsed = envSchema.safeParse(stripEmpty(env));
  if (!parsed.success) {
    const lines = parsed.error.issues.map((issue) => `  ${issue.path.join('.')}: ${issue.message}`);
    throw new ConfigError(`Invalid configuration:\n${lines.join('\n')}`);
  }
  const e = parsed.data;
  const dataDir = path.resolve(e.DATA_DIR);
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
    tenantOutbound: tenantOutbound(e.TENANT_OUTBOUND_ALLOW),
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
    encryptionKey: encryptionKey(e.RESTOCK_ENCRYPTION_KEY),
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
    shopify: shopifyConfig(e),
    bigcommerce: bigCommerceConfig(e),
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
      testNetwork: testNetworkConfig(e),
      settleTimeoutMs: e.PAYMENT_SETTLE_TIMEOUT_MS,
      limitPerAddressPerMinute: e.PAYMENT_LIMIT_PER_MINUTE,
    },
    billing: billingConfig(e),
    webhooks: webhookConfig(e),
    sms: smsConfig(e),
    push: pushConfig(e, e.MAIL_FROM),
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
    },
    freeAlertsPerMonth: e.FREE_ALERTS_PER_MONTH,
    stripeWebhookSecret: e.STRIPE_WEBHOOK_SECRET,
  };
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

function shopifyConfig(e: z.infer<typeof envSchema>): ShopifyConfig | undefined {
  if (!e.SHOPIFY_API_KEY && !e.SHOPIFY_API_SECRET) return undefined;
  if (!e.SHOPIFY_API_KEY || !e.SHOPIFY_API_SECRET) {
    throw new ConfigError('Invalid configuration:\n  SHOPIFY_API_KEY and SHOPIFY_API_SECRET: set both (the Shopify app needs its key and secret) or neither');
  }
  if (!e.RESTOCK_ENCRYPTION_KEY) {
    throw new ConfigError('Invalid configuration:\n  RESTOCK_ENCRYPTION_KEY: the Shopify app keeps stores\' Admin API tokens, which are only stored sealed; set 32 random bytes in base64');
  }
  return {
    apiKey: e.SHOPIFY_API_KEY,
    apiSecret: e.SHOPIFY_API_SECRET,
    apiVersion: e.SHOPIFY_API_VERSION,
    scopes: e.SHOPIFY_SCOPES.split(',').map((scope) => scope.trim()).filter(Boolean),
    alwaysTestCharges: e.SHOPIFY_BILLING_TEST === 'true',
  };
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

function bigCommerceConfig(e: z.infer<typeof envSchema>): BigCommerceConfig | undefined {
  if (!e.BIGCOMMERCE_CLIENT_ID && !e.BIGCOMMERCE_CLIENT_SECRET) return undefined;
  if (!e.BIGCOMMERCE_CLIENT_ID || !e.BIGCOMMERCE_CLIENT_SECRET) {
    throw new ConfigError('Invalid configuration:\n  BIGCOMMERCE_CLIENT_ID and BIGCOMMERCE_CLIENT_SECRET: set both (the BigCommerce app needs its client id and secret) or neither');
  }
  if (!e.RESTOCK_ENCRYPTION_KEY) {
    throw new ConfigError("Invalid configuration:\n  RESTOCK_ENCRYPTION_KEY: the BigCommerce app keeps stores' access tokens, which are only stored sealed; set 32 random bytes in base64");
  }
  return { clientId: e.BIGCOMMERCE_CLIENT_ID, clientSecret: e.BIGCOMMERCE_CLIENT_SECRET };
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
