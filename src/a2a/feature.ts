import type { BearerGate } from '../agents/gate.ts';
import type { Config } from '../config.ts';
import type { Feature } from '../core/feature.ts';
import type { Metrics } from '../core/metrics.ts';
import type { Domain } from '../domain.ts';
import { a2aRoutes } from './routes.ts';
import { restockSkills } from './skills.ts';

/** The A2A endpoint and its agent card: the services' operations as skills, behind the same access check and payments as HTTP and MCP. */
export function buildA2a({ config, domain, gate, metrics }: { config: Config; domain: Domain; gate: BearerGate; metrics?: Metrics }): Feature<undefined> {
  const routes = a2aRoutes({
    gate,
    skills: restockSkills(domain, config.serviceName),
    serviceName: config.serviceName,
    baseUrl: config.baseUrl,
    payments: { service: domain.payments, rateLimitPerMinute: config.agents.rateLimits.anonymous, ...(metrics ? { metrics } : {}) },
  });
  return { service: undefined, routes: [routes] };
}
