import { createHmac } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import type Stripe from 'stripe';
import type { Config } from '../config.ts';
import type { Database } from '../core/db/database.ts';
import type { Feature } from '../core/feature.ts';
import { noMetrics, type Metrics } from '../core/metrics.ts';
import type { WorkerJob } from '../dispatch/jobs.ts';
import { paymentGate } from './gate.ts';
import { offerAvailability } from './offers.ts';
import { paymentRoutes } from './routes.ts';
import { PaymentService, type PaymentEngines } from './service.ts';
import { PaymentRepository } from './repository.ts';

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
  let engines: Promise<PaymentEngines> | undefined;
  // The protocols' SDKs (and viem under both) load on first use; the payment gate asks for them
  // as the app starts, so a serving process has them before its first 402.
  const loadEngines = () =>
    (engines ??= Promise.all([import('./x402.ts'), import('./mpp.ts')]).then(([{ X402Acceptance }, { MppAcceptance }]) => ({
      x402: new X402Acceptance(config.payments.x402, config.payments.settleTimeoutMs),
      mpp: new MppAcceptance(config.payments, mppSecret, realm, stripe),
    })));
  const gaps = offerAvailability(config.payments, stripe !== undefined).unavailable;
  const service = new PaymentService(new PaymentRepository(database), loadEngines, gaps, mppSecret);
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
