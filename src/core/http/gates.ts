import type { FastifyPluginAsync } from 'fastify';
import type { Config } from '../../config.ts';
import type { Database } from '../db/database.ts';
import type { Metrics } from '../metrics.ts';
import { apiCors } from './cors.ts';
import { idempotencyGate } from './idempotency.ts';
import { rateLimitGate } from './rate-limit.ts';

/**
 * The app-wide gates that belong to no feature. The identity gate comes from the agents feature
 * and the payment gate from payments; each names the gates it must follow.
 */
export function sharedGates(config: Config, database: Database, metrics?: Metrics): FastifyPluginAsync[] {
  const perHour = (max: number) => ({ max, windowSeconds: 3600 });
  return [
    rateLimitGate({
      redisUrl: config.redisUrl,
      registrationPerAddress: perHour(config.agents.rateLimits.registrationsPerHour),
      storefrontPerAddress: perHour(config.dashboard.rateLimits.storefrontPerHour),
      storefrontReadPerAddress: { max: config.dashboard.rateLimits.storefrontReadsPerMinute, windowSeconds: 60 },
      signInPerAddress: perHour(config.dashboard.rateLimits.signInPerHour),
      paymentPerAddress: { max: config.payments.limitPerAddressPerMinute, windowSeconds: 60 },
      ...(metrics ? { metrics } : {}),
    }),
    idempotencyGate({
      database,
      ttlHours: config.idempotencyTtlHours,
      // Paying callers are known only after their proof is verified, which must come after the
      // key is checked (a replay is not charged twice): their keys share one namespace.
      callerOf: (request) => request.caller?.agentId ?? 'payer',
    }),
    apiCors,
  ];
}
