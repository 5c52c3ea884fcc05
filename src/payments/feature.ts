import { createHmac } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import type Stripe from 'stripe';
import type { Config } from '../config.ts';
import type { Database } from '../core/db/database.ts';
import type { Feature } from '../core/feature.ts';
import { noMetrics, type Metrics } from '../core/metrics.ts';
import type { WorkerJob } from '../dispatch/jobs.ts';
import { paymentGate } from './gate.ts';
import { MppAcceptance } from './mpp.ts';
import { paymentRoutes } from './routes.ts';
import { PaymentService } from './service.ts';
import { PaymentRepository } from './repository.ts';
import { X402Acceptance } from './x402.ts';

export interface PaymentsFeature extends Feature<PaymentService> {
  /** Finishes settlements whose outcome was unknown (run by the worker). */
  jobs: WorkerJob[];
}

const RECONCILE_EVERY_MS = 60_000;

/**
 * Pay per request: the `payment-gate` plugin, the ledger's routes, and reconciliation. The MPP challenge key is derived from the service secret, so every process
 * sharing the database issues and accepts the same challenges. Offers that lack a setting are
 * named in the log at start-up (and in every 402), never filled with a placeholder.
 */
export function buildPayments(config: Config, database: Database, serviceSecret: Buffer, log: FastifyBaseLogger, stripe?: Stripe, metrics: Metrics = noMetrics): PaymentsFeature {
  const mppSecret = createHmac('sha256', serviceSecret).update('mpp-challenge-binding').digest('hex');
  const realm = new URL(config.baseUrl).host;
  const x402 = new X402Acceptance(config.payments.x402, config.payments.settleTimeoutMs);
  const mpp = new MppAcceptance(config.payments, mppSecret, realm, stripe);
  const service = new PaymentService(new PaymentRepository(database), x402, mpp, mppSecret);
  const gaps = service.unavailable();
  if (gaps.length > 0) {
    log.warn({ unavailable: gaps }, `pay-per-request: some offers cannot be taken: ${gaps.map((g) => g.reason).join(' ')}`);
  }
  return {
    service,
    plugins: [paymentGate({ payments: service, baseUrl: config.baseUrl, rateLimitPerMinute: config.agents.rateLimits.anonymous, metrics })],
    routes: [paymentRoutes(service)],
    jobs: [{ name: 'payment-reconcile', everyMs: RECONCILE_EVERY_MS, run: () => service.reconcile() }],
  };
}
