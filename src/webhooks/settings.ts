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

export interface WebhookSettings {
  WEBHOOK_TIMEOUT_MS: number;
  WEBHOOK_MAX_ATTEMPTS: number;
  WEBHOOK_RETRY_SCHEDULE: string;
  WEBHOOK_DISABLE_AFTER_FAILURES: number;
  WEBHOOK_DISABLE_AFTER_HOURS: number;
}

export function webhookConfig(settings: WebhookSettings): WebhookConfig {
  return {
    timeoutMs: settings.WEBHOOK_TIMEOUT_MS,
    maxAttempts: settings.WEBHOOK_MAX_ATTEMPTS,
    retryScheduleMs: parseRetrySchedule(settings.WEBHOOK_RETRY_SCHEDULE),
    disableAfterFailures: settings.WEBHOOK_DISABLE_AFTER_FAILURES,
    disableAfterMs: settings.WEBHOOK_DISABLE_AFTER_HOURS * 3_600_000,
  };
}
