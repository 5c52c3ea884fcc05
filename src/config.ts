import path from 'node:path';
import { z } from 'zod';

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
  STRIPE_SECRET_KEY: z.string().optional(),
  STRIPE_WEBHOOK_SECRET: z.string().optional(),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  SERVICE_NAME: z.string().min(1).default('Restock back-in-stock alerts'),
  /** Signs unsubscribe links; generated once and kept in the database when unset. */
  RESTOCK_SECRET: z.string().min(32).optional(),
  BODY_LIMIT_BYTES: z.coerce.number().int().min(1024).default(16 * 1024),
  /** How long a graceful shutdown waits for in-flight requests before closing them. */
  SHUTDOWN_TIMEOUT_MS: z.coerce.number().int().min(0).default(10_000),
  /** FULL makes every acknowledged write survive power loss; group commit keeps it cheap. */
  SQLITE_SYNCHRONOUS: z.enum(['FULL', 'NORMAL']).default('FULL'),
  SQLITE_BUSY_TIMEOUT_MS: z.coerce.number().int().min(0).default(1000),
  PG_POOL_MAX: z.coerce.number().int().min(1).default(10),
  /** How long an Idempotency-Key remembers its answer. */
  IDEMPOTENCY_TTL_HOURS: z.coerce.number().int().min(1).default(24),
  CHECKOUT_SESSION_TTL_MINUTES: z.coerce.number().int().min(1).default(60 * 24),
});

export type DatabaseConfig =
  | { dialect: 'sqlite'; file: string; synchronous: 'FULL' | 'NORMAL'; busyTimeoutMs: number }
  | { dialect: 'postgres'; url: string; poolMax: number };

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
  idempotencyTtlHours: number;
  checkoutSessionTtlMinutes: number;
  mailFrom: string;
  redisUrl: string | undefined;
  smtpUrl: string | undefined;
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
    idempotencyTtlHours: e.IDEMPOTENCY_TTL_HOURS,
    checkoutSessionTtlMinutes: e.CHECKOUT_SESSION_TTL_MINUTES,
    mailFrom: e.MAIL_FROM,
    redisUrl: e.REDIS_URL,
    smtpUrl: e.SMTP_URL,
  };
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
  if (/^postgres(ql)?:\/\//.test(url)) return { dialect: 'postgres', url, poolMax: e.PG_POOL_MAX };
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
