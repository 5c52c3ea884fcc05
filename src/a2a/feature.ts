import type { BearerGate } from '../agents/service.ts';
import type { Config } from '../config.ts';
import type { SubscriptionCallbacks } from '../core/events.ts';
import type { Feature } from '../core/feature.ts';
import type { Metrics } from '../core/metrics.ts';
import type { Operation } from '../core/operations.ts';
import type { PaymentService } from '../payments/service.ts';
import { a2aRoutes } from './routes.ts';
import { restockSkills } from './skills.ts';

/** The A2A endpoint and its agent card: the services' operations as skills, behind the same access check and payments as HTTP and MCP. */
export interface A2aDeps {
  config: Config;
  operations: Operation[];
  payments: PaymentService;
  gate: BearerGate;
  metrics?: Metrics;
  /** Agents' callbacks (the outgoing-webhooks feature), which carry subscribeAlert's push notifications. */
  callbacks?: SubscriptionCallbacks;
}

export function buildA2a({ config, operations, payments, gate, metrics, callbacks }: A2aDeps): Feature<undefined> {
  const routes = a2aRoutes({
    gate,
    skills: restockSkills(operations),
    serviceName: config.serviceName,
    baseUrl: config.baseUrl,
    payments: { service: payments, rateLimitPerMinute: config.agents.rateLimits.anonymous, ...(metrics ? { metrics } : {}) },
    ...(callbacks ? { callbacks } : {}),
  });
  return { service: undefined, routes: [routes] };
}
