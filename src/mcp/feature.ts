import type { BearerGate } from '../agents/gate.ts';
import type { Config } from '../config.ts';
import type { Feature } from '../core/feature.ts';
import type { Metrics } from '../core/metrics.ts';
import type { Domain } from '../domain.ts';
import { mcpRoutes } from './routes.ts';

/** The MCP endpoint: the services' operations as tools, behind the same access check and payments. */
export function buildMcp({ config, domain, gate, metrics }: { config: Config; domain: Domain; gate: BearerGate; metrics?: Metrics }): Feature<undefined> {
  const routes = mcpRoutes({
    gate,
    domain,
    serviceName: config.serviceName,
    baseUrl: config.baseUrl,
    resourceMetadataUrl: `${config.baseUrl}/.well-known/oauth-protected-resource`,
    payments: { service: domain.payments, rateLimitPerMinute: config.agents.rateLimits.anonymous, ...(metrics ? { metrics } : {}) },
  });
  return { service: undefined, routes: [routes] };
}
