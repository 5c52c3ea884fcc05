import type { FastifyBaseLogger } from 'fastify';
import { isoAfter, nowIso } from '../core/clock.ts';
import type { WorkerJob } from '../core/jobs.ts';
import type { SecretBox } from '../core/sealed-secrets.ts';
import { errorCodes, type KlaviyoApi } from './api.ts';
import type { KlaviyoEventRow, KlaviyoRepository } from './repository.ts';

/** Events one run takes, sent in parallel. */
const CLAIM_SIZE = 20;
/** Past a call's own deadline (10 s), time to record the outcome before another worker may take it over. */
const LEASE_MS = 70_000;
/**
 * The wait after each failed attempt that may succeed later (a 429, a 5xx, no answer): Klaviyo's
 * rate limits are per second and per minute (https://developers.klaviyo.com/en/docs/rate_limits_and_error_handling),
 * so the first retries are soon; after the last, the event is given up.
 */
export const KLAVIYO_RETRY_SCHEDULE_MS = [10_000, 60_000, 5 * 60_000, 30 * 60_000, 2 * 3600_000, 6 * 3600_000, 12 * 3600_000, 24 * 3600_000];
const JITTER = 0.1;

export interface KlaviyoDeliveryDeps {
  repository: KlaviyoRepository;
  secrets: SecretBox;
  api: KlaviyoApi;
  log: FastifyBaseLogger;
}

/** The worker job that sends the queued events to Klaviyo. */
export function klaviyoDeliveryJob(deps: KlaviyoDeliveryDeps): WorkerJob {
  return {
    name: 'klaviyo-events',
    async run() {
      const claimed = await deps.repository.claimDue(nowIso(), isoAfter(LEASE_MS), CLAIM_SIZE);
      await Promise.all(claimed.map((row) => attempt(deps, row)));
      return claimed.length;
    },
  };
}

async function attempt(deps: KlaviyoDeliveryDeps, row: KlaviyoEventRow): Promise<void> {
  const sealed = await deps.repository.sealedKey(row.store_domain);
  if (sealed === undefined) {
    await deps.repository.settle(row, { status: 'cancelled', next_attempt_at: null, last_status_code: null, last_error: 'the store is no longer connected to Klaviyo', finished_at: nowIso() });
    return;
  }
  const answer = await deps.api.createEvent(await deps.secrets.open(sealed), row.body);
  const now = new Date();
  if (answer.status === 202 || (answer.status !== null && answer.status >= 200 && answer.status < 300)) {
    await deps.repository.settle(row, { status: 'delivered', next_attempt_at: null, last_status_code: answer.status, last_error: null, finished_at: now.toISOString() });
    return;
  }
  const codes = errorCodes(answer.body);
  const error = answer.failure ?? `Klaviyo answered ${answer.status}${codes.length ? ` (${codes.join(', ')})` : ''}`;
  // 429, 5xx and no answer may pass later; any other refusal (a body Klaviyo will not take, a key
  // revoked or without events:write) would be refused again, so it is given up at once.
  const retryable = answer.status === null || answer.status === 429 || answer.status === 408 || answer.status >= 500;
  const last = row.attempts > KLAVIYO_RETRY_SCHEDULE_MS.length;
  if (!retryable || last) {
    deps.log.warn({ shop: row.store_domain, event: row.event_id, status: answer.status, error }, 'a Klaviyo event was given up');
    await deps.repository.settle(row, { status: 'failed', next_attempt_at: null, last_status_code: answer.status, last_error: error, finished_at: now.toISOString() });
    return;
  }
  const base = KLAVIYO_RETRY_SCHEDULE_MS[row.attempts - 1]!;
  const delay = Math.round(base * (1 - JITTER + Math.random() * 2 * JITTER));
  await deps.repository.settle(row, { status: 'pending', next_attempt_at: isoAfter(delay, now), last_status_code: answer.status, last_error: error, finished_at: null });
}
