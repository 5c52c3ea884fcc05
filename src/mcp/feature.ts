import type { FastifyBaseLogger } from 'fastify';
import { protectedResourceMetadataUrl } from '../agents/feature.ts';
import type { BearerGate } from '../agents/service.ts';
import type { Config } from '../config.ts';
import type { ChangeBus } from '../core/changes/bus.ts';
import type { Feature } from '../core/feature.ts';
import type { Durable } from '../core/http/durable-answers.ts';
import type { Metrics } from '../core/metrics.ts';
import type { Operation } from '../core/operations.ts';
import type { DispatchService } from '../dispatch/service.ts';
import type { PaymentService } from '../payments/service.ts';
import { tellFollowers } from './news.ts';
import type { SubscriptionReads } from './resources.ts';
import { MCP_PATH, mcpRoutes } from './routes.ts';
import { McpSessions } from './sessions.ts';

/**
 * The MCP endpoint: the services' operations as tools, alert subscriptions as resources whose
 * updates a session is told of, behind the same access check and payments.
 */
export interface McpDeps extends SubscriptionReads {
  config: Config;
  operations: Operation[];
  payments: PaymentService;
  gate: BearerGate;
  metrics?: Metrics;
  /** Where a subscription's news reaches this process, whichever process heard it first. */
  changes: ChangeBus;
  /** The alert a click or an order names, to find the subscription it was sent for. */
  alertsSent: Pick<DispatchService, 'sentNotification'>;
  /** What an answer the transport writes itself waits for (core/http/durable-answers.ts). */
  durable: Durable;
  log: FastifyBaseLogger;
}

export function buildMcp({ config, operations, payments, gate, metrics, changes, alertsSent, durable, log, subscriptions, news }: McpDeps): Feature<undefined> {
  // The endpoint's own document (resource {BASE_URL}/mcp): an MCP client follows the 401's link and
  // refuses a document naming another resource than the URL it called.
  const resourceMetadataUrl = protectedResourceMetadataUrl(config.baseUrl, MCP_PATH);
  const sessions = new McpSessions();
  tellFollowers(changes, sessions, alertsSent, log);
  const routes = mcpRoutes({
    gate: gate.withResourceMetadata(resourceMetadataUrl),
    operations,
    serviceName: config.serviceName,
    baseUrl: config.baseUrl,
    resourceMetadataUrl,
    payments: { service: payments, rateLimitPerMinute: config.agents.rateLimits.anonymous, ...(metrics ? { metrics } : {}) },
    reads: { subscriptions, news },
    sessions,
    durable,
  });
  return { service: undefined, routes: [routes], close: async () => sessions.close() };
}
