import { z } from 'zod';
/**
 * How outgoing webhooks are delivered, from the WEBHOOK_* settings (src/config.ts reads them).
 * The defaults follow the Standard Webhooks retry schedule: immediately, then 5 s, 5 min, 30 min,
 * 2 h, 5 h, 10 h, 14 h, 20 h and 24 h, about three days in all.
 */
export interface WebhookConfig {
  /** The longest one HTTP exchange (each redirect included) may take. */
  timeoutMs: number;
  /** Attempts of one delivery before it is given up. */
  maxAttempts: number;
  /** Delay before each retry; the last one repeats if attempts outnumber them. */
  retryScheduleMs: number[];
  /** Consecutive failed attempts after which an endpoint is disabled… */
  disableAfterFailures: number;
  /** …once they have also gone on at least this long. */
  disableAfterMs: number;
}

export const DEFAULT_RETRY_SCHEDULE = '5s,5m,30m,2h,5h,10h,14h,20h,24h';

const UNIT_MS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 } as const;

/** A comma-separated list of durations such as `5s,5m,2h` (units ms, s, m, h). */
export const retrySchedulePattern = /^\s*\d{1,9}(ms|s|m|h)\s*(,\s*\d{1,9}(ms|s|m|h)\s*)*$/;

export function parseRetrySchedule(text: string): number[] {
  return text.split(',').map((part) => {
    const [, amount, unit] = /^\s*(\d+)(ms|s|m|h)\s*$/.exec(part)!;
    return Number(amount) * UNIT_MS[unit as keyof typeof UNIT_MS];
  });
}

export type WebhookSettings = z.infer<z.ZodObject<typeof webhookSettings>>;

export function webhookConfig(settings: WebhookSettings): WebhookConfig {
  return {
    timeoutMs: settings.WEBHOOK_TIMEOUT_MS,
    maxAttempts: settings.WEBHOOK_MAX_ATTEMPTS,
    retryScheduleMs: parseRetrySchedule(settings.WEBHOOK_RETRY_SCHEDULE),
    disableAfterFailures: settings.WEBHOOK_DISABLE_AFTER_FAILURES,
    disableAfterMs: settings.WEBHOOK_DISABLE_AFTER_HOURS * 3_600_000,
  };
}

/** The outgoing webhooks settings: this module's slice of the environment, which src/config.ts reads with the rest. */
export const webhookSettings = {
  WEBHOOK_TIMEOUT_MS: z.coerce.number().int().min(100).max(120_000).default(10_000).describe("Outgoing webhooks: the longest one HTTP exchange with a store's endpoint may take, redirects included (docs/webhooks.md)"),
  WEBHOOK_MAX_ATTEMPTS: z.coerce.number().int().min(1).max(50).default(10).describe('Outgoing webhooks: attempts of one delivery before it is given up'),
  WEBHOOK_RETRY_SCHEDULE: z.string().regex(retrySchedulePattern, 'durations such as 5s,5m,2h, comma separated').default(DEFAULT_RETRY_SCHEDULE).describe('Outgoing webhooks: delays before each retry, comma-separated (units ms, s, m, h), jittered by ±10%; the last repeats'),
  WEBHOOK_DISABLE_AFTER_FAILURES: z.coerce.number().int().min(1).default(20).describe('Outgoing webhooks: an endpoint is disabled after this many consecutive failed attempts that have gone on for `WEBHOOK_DISABLE_AFTER_HOURS`'),
  WEBHOOK_DISABLE_AFTER_HOURS: z.coerce.number().int().min(0).default(24).describe("Outgoing webhooks: how long an endpoint's failures must have gone on before it is disabled"),
};
