import type { FastifyBaseLogger } from 'fastify';
import { Webhook } from 'standardwebhooks';
import { isoAfter, nowIso } from '../core/clock.ts';
import { postToTenant, type PostOutcome } from '../core/net/http-post.ts';
import type { OutboundPolicy } from '../core/net/outbound-guard.ts';
import type { SecretBox } from '../core/sealed-secrets.ts';
import type { WorkerJob } from '../core/jobs.ts';
import type { ClaimedDelivery, FailureRun, SettledAttempt, WebhookRepository } from './repository.ts';
import { A2A_TOKEN_HEADER } from './callbacks.ts';
import type { MessageSigner } from './message-signatures.ts';
import type { WebhookConfig } from './settings.ts';

/** Deliveries one run takes; they are sent in parallel, so a run lasts about one timeout at most. */
const CLAIM_SIZE = 20;
/** Past the exchange's own deadline, time to record the outcome before another worker may take over. */
const LEASE_MARGIN_MS = 60_000;
/** Retries are spread by up to this fraction either way, so failures that came together do not retry together. */
const JITTER = 0.1;
/** The delivery log: finished deliveries are kept this long, and at most this many per endpoint. */
const KEEP_MS = 30 * 24 * 3600_000;
const KEEP_PER_ENDPOINT = 1000;
const PRUNE_EVERY_MS = 3600_000;
const PRUNE_LIMIT = 1000;

export interface DelivererDeps {
  repository: WebhookRepository;
  secrets: SecretBox;
  policy: OutboundPolicy;
  /** Signs each request per RFC 9421 with the keys of our directory. */
  signer: MessageSigner;
  config: WebhookConfig;
  log: FastifyBaseLogger;
  /** Tells the store's owner (by e-mail) that an endpoint was disabled. */
  tellOwner(storeDomain: string, subject: string, text: string): Promise<void>;
}

/** The worker job that sends due deliveries, and now and then drops the old log. */
export function webhookDeliveryJob(deps: DelivererDeps): WorkerJob {
  let prunedAt = 0;
  return {
    name: 'outgoing-webhooks',
    async run() {
      let handled = await deliverDue(deps);
      if (Date.now() - prunedAt >= PRUNE_EVERY_MS) {
        const dropped = await deps.repository.prune({ before: new Date(Date.now() - KEEP_MS).toISOString(), keepPerEndpoint: KEEP_PER_ENDPOINT, limit: PRUNE_LIMIT });
        handled += dropped;
        // A backlog larger than one slice is worked off on the next runs, not an hour later.
        if (dropped < PRUNE_LIMIT) prunedAt = Date.now();
      }
      return handled;
    },
  };
}

/** One bounded slice of the queue: claims due deliveries and attempts each once. */
export async function deliverDue(deps: DelivererDeps): Promise<number> {
  const claimed = await deps.repository.claimDue(nowIso(), isoAfter(deps.config.timeoutMs + LEASE_MARGIN_MS), CLAIM_SIZE);
  await Promise.all(claimed.map((claim) => attemptDelivery(deps, claim)));
  return claimed.length;
}

async function attemptDelivery(deps: DelivererDeps, { delivery, endpoint }: ClaimedDelivery): Promise<void> {
  if (!endpoint || endpoint.enabled !== 1) {
    await deps.repository.cancelClaimed(delivery, nowIso());
    return;
  }
  const attemptedAt = new Date();
  const opened = await deps.secrets.open(endpoint.secret_sealed);
  const headers = endpoint.kind === 'a2a-push' ? a2aPushHeaders(opened, delivery.event_id) : signedHeaders(opened, delivery.event_id, attemptedAt, delivery.payload);
  await deps.signer.refresh();
  const outcome = await postToTenant(endpoint.url, delivery.payload, (target) => deps.signer.signRequest('POST', target, headers, delivery.payload, attemptedAt), {
    policy: deps.policy,
    timeoutMs: deps.config.timeoutMs,
  });
  const delivered = outcome.error === null;
  const run = await deps.repository.settle(delivery, {
    delivered,
    attempt: {
      delivery_id: delivery.id,
      attempt: delivery.attempts,
      endpoint_id: endpoint.id,
      attempted_at: attemptedAt.toISOString(),
      status_code: outcome.statusCode,
      error: outcome.error,
      duration_ms: outcome.durationMs,
    },
    next: nextStep(deps.config, delivered, delivery.attempts, attemptedAt),
  });
  if (run === undefined || delivered) return;
  deps.log.info({ shop: delivery.store_domain, endpoint: endpoint.id, delivery: delivery.id, attempt: delivery.attempts, error: outcome.error }, 'webhook delivery attempt failed');
  const reason = disablingReason(deps.config, run, outcome, attemptedAt);
  if (reason === undefined) return;
  // An agent's endpoint has no owner to mail; the agent sees it stopped when it reads its subscription.
  if (endpoint.agent_id !== null) {
    if (await deps.repository.disableEndpoint(endpoint.id, reason, nowIso())) deps.log.warn({ agent: endpoint.agent_id, endpoint: endpoint.id, reason }, 'agent callback disabled');
    return;
  }
  await disable(deps, delivery.store_domain, endpoint, reason);
}

/** The Standard Webhooks headers, signed by the library over `{id}.{timestamp}.{body}`. */
function signedHeaders(secret: string, eventId: string, at: Date, payload: string): Record<string, string> {
  return {
    'content-type': 'application/json',
    'user-agent': 'Restock-Webhooks/1.0',
    'webhook-id': eventId,
    'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
    'webhook-signature': new Webhook(secret).sign(eventId, at, payload),
  };
}

/**
 * An A2A push: the task as JSON, with the client's own token or credentials as its push
 * configuration gave them (kept sealed); `webhook-id` lets the RFC 9421 signature name the event.
 */
function a2aPushHeaders(sealedHeaders: string, eventId: string): Record<string, string> {
  const { headers } = JSON.parse(sealedHeaders) as { headers: Record<string, string> };
  const allowed = Object.fromEntries(Object.entries(headers).filter(([name]) => name === 'authorization' || name === A2A_TOKEN_HEADER.toLowerCase()));
  return { ...allowed, 'content-type': headers['content-type'] ?? 'application/json', 'user-agent': 'Restock-Webhooks/1.0', 'webhook-id': eventId };
}

/** Delivered, given up after the last attempt, or due again after the schedule's delay for this attempt. */
export function nextStep(config: WebhookConfig, delivered: boolean, attempt: number, at: Date): SettledAttempt['next'] {
  if (delivered) return { status: 'delivered' };
  if (attempt >= config.maxAttempts) return { status: 'failed' };
  return { status: 'pending', nextAttemptAt: isoAfter(retryDelayMs(config.retryScheduleMs, attempt), at) };
}

/** The delay after failed attempt `attempt` (1-based), jittered by ±JITTER. */
export function retryDelayMs(schedule: number[], attempt: number): number {
  const base = schedule[Math.min(attempt, schedule.length) - 1]!;
  return Math.round(base * (1 - JITTER + Math.random() * 2 * JITTER));
}

/**
 * Why the endpoint stops now, if it does: it answered 410 Gone (Standard Webhooks: the receiver
 * wants no more), or it has failed `disableAfterFailures` attempts in a row over at least
 * `disableAfterMs` (a burst of failures within minutes is an outage, not an abandoned endpoint).
 */
export function disablingReason(config: WebhookConfig, run: FailureRun, outcome: PostOutcome, at: Date): string | undefined {
  if (!run.enabled) return undefined;
  if (outcome.statusCode === 410) return 'the endpoint answered 410 Gone';
  if (run.consecutiveFailures < config.disableAfterFailures || run.failingSince === null) return undefined;
  const failingFor = at.getTime() - Date.parse(run.failingSince);
  if (failingFor < config.disableAfterMs) return undefined;
  return `${run.consecutiveFailures} consecutive failed attempts since ${run.failingSince}`;
}

async function disable(deps: DelivererDeps, storeDomain: string, endpoint: NonNullable<ClaimedDelivery['endpoint']>, reason: string): Promise<void> {
  if (!(await deps.repository.disableEndpoint(endpoint.id, reason, nowIso()))) return;
  deps.log.warn({ shop: storeDomain, endpoint: endpoint.id, reason }, 'webhook endpoint disabled');
  const text =
    `Restock stopped sending events to your webhook endpoint ${endpoint.url} (${endpoint.id}) for ${storeDomain}: ${reason}.\n\n` +
    `Deliveries that were still waiting are cancelled; new events are not queued for it.\n` +
    `Once the endpoint works again, turn it back on in the dashboard or with PATCH /api/v1/stores/${storeDomain}/webhooks/${endpoint.id} {"enabled": true}.\n`;
  try {
    await deps.tellOwner(storeDomain, 'Restock: a webhook endpoint was disabled', text);
  } catch (err) {
    // The endpoint stays disabled, as its record says; the mail is not worth a retry loop.
    deps.log.error({ err, shop: storeDomain, endpoint: endpoint.id }, 'could not tell the owner that a webhook endpoint was disabled');
  }
}
