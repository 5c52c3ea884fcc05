import { protectedResourceMetadataUrl } from '../agents/feature.ts';
import type { BearerGate } from '../agents/service.ts';
import type { Config } from '../config.ts';
import type { Feature } from '../core/feature.ts';
import type { Metrics } from '../core/metrics.ts';
import type { Operation } from '../core/operations.ts';
import type { PaymentService } from '../payments/service.ts';
import { MCP_PATH, mcpRoutes } from './routes.ts';

/** The MCP endpoint: the services' operations as tools, behind the same access check and payments. */
export interface McpDeps {
  config: Config;
  operations: Operation[];
  payments: PaymentService;
  gate: BearerGate;
  metrics?: Metrics;
}

export function buildMcp({ config, operations, payments, gate, metrics }: McpDeps): Feature<undefined> {
  // The endpoint's own document (resource {BASE_URL}/mcp): an MCP client follows the 401's link and
  // refuses a document naming another resource than the URL it called.
  const resourceMetadataUrl = protectedResourceMetadataUrl(config.baseUrl, MCP_PATH);
  const routes = mcpRoutes({
    gate: gate.withResourceMetadata(resourceMetadataUrl),
    operations,
    serviceName: config.serviceName,
    baseUrl: config.baseUrl,
    resourceMetadataUrl,
    payments: { service: payments, rateLimitPerMinute: config.agents.rateLimits.anonymous, ...(metrics ? { metrics } : {}) },
  });
  return { service: undefined, routes: [routes] };
}
