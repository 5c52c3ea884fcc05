import type { BearerGate } from '../agents/service.ts';
import type { Config } from '../config.ts';
import type { Feature } from '../core/feature.ts';
import type { Metrics } from '../core/metrics.ts';
import type { Operation } from '../core/operations.ts';
import type { PaymentService } from '../payments/service.ts';
import { mcpRoutes } from './routes.ts';

/** The MCP endpoint: the services' operations as tools, behind the same access check and payments. */
export interface McpDeps {
  config: Config;
  operations: Operation[];
  payments: PaymentService;
  gate: BearerGate;
  metrics?: Metrics;
}

export function buildMcp({ config, operations, payments, gate, metrics }: McpDeps): Feature<undefined> {
  const routes = mcpRoutes({
    gate,
    operations,
    serviceName: config.serviceName,
    baseUrl: config.baseUrl,
    resourceMetadataUrl: `${config.baseUrl}/.well-known/oauth-protected-resource`,
    payments: { service: payments, rateLimitPerMinute: config.agents.rateLimits.anonymous, ...(metrics ? { metrics } : {}) },
  });
  return { service: undefined, routes: [routes] };
}
