import type { FastifyBaseLogger } from 'fastify';
import { buildA2a } from './a2a/feature.ts';
import { buildAgents } from './agents/feature.ts';
import type { Config } from './config.ts';
import type { Database } from './core/db/database.ts';
import type { MailTransport } from './core/mail/transport.ts';
import { buildDashboard } from './dashboard/feature.ts';
import { buildDiscovery } from './discovery/feature.ts';
import { queueReadings } from './dispatch/feature.ts';
import { buildHealth } from './health/feature.ts';
import { buildMcp } from './mcp/feature.ts';
import { buildObservability, openMetrics } from './observability/feature.ts';
import { buildShoppers } from './shoppers/feature.ts';
import { buildStorefront } from './storefront/feature.ts';
import { checkServed, declaredPrices } from './operations.ts';
import { buildDomainFeatures } from './domain.ts';
import { PLATFORMS } from './platforms.ts';

export interface WebOptions {
  /** Origin of the mTLS listener, when the server runs one (advertised in the metadata). */
  mtlsBaseUrl?: string;
}

/** Every feature the HTTP app serves: the domain's, then those only the web has. */
export async function buildWebFeatures(config: Config, database: Database, mail: MailTransport, log: FastifyBaseLogger, options: WebOptions = {}) {
  const metrics = openMetrics(config);
  const { domain, built, channels, signer, changes } = await buildDomainFeatures(config, database, mail, log, metrics);
  // First, so that its instrumentation wraps every other plugin and route.
  const observability = await buildObservability({ config, database, log, metrics, queue: queueReadings(database) });
  const agents = await buildAgents({ config, database, mail, stores: domain.stores, changes, cacheLookup: (hit) => metrics.tokenCacheLookup(hit), ...(options.mtlsBaseUrl ? { mtlsBaseUrl: options.mtlsBaseUrl } : {}) });
  const storefront = await buildStorefront({
    service: domain.storefront,
    policy: config.tenantOutbound,
    platformForms: PLATFORMS.flatMap((platform) => platform.widgetForm ?? []),
  });
  const dashboard = buildDashboard({
    config,
    database,
    mail,
    stores: domain.stores,
    alerts: domain.alerts,
    inventory: domain.inventory,
    dispatch: domain.dispatch,
    billing: domain.billing,
    conversions: domain.conversions,
    webhooks: domain.events,
    klaviyo: domain.klaviyo,
    signer,
    // What platforms give it: their own pages, their admin's sign-in.
    panels: Object.fromEntries(Object.entries(domain.platforms).flatMap(([name, platform]) => (platform.dashboardPanel ? [[name, platform.dashboardPanel]] : []))),
    ...Object.assign({}, ...Object.values(domain.platforms).map((platform) => platform.dashboard)),
  });
  const health = buildHealth({ config, database });
  const discovery = buildDiscovery({ config, payments: domain.payments, prices: declaredPrices() });
  const served = [health, discovery, agents, ...Object.values(built), ...Object.values(domain.platforms)].flatMap((feature) => feature.operations ?? []);
  checkServed(served);
  return {
    domain,
    changes,
    /** What the app-wide gates report to (the rate limits). */
    metrics,
    // The order their routes register in: the web's own among the domain's.
    features: [
      observability,
      health,
      agents,
      built.stores,
      built.webhooks,
      built.klaviyo,
      built.inventory,
      built.dispatch,
      built.conversions,
      built.purchasing,
      ...Object.values(domain.platforms),
      built.alerts,
      ...channels,
      storefront,
      built.payments,
      built.billing,
      dashboard,
      buildShoppers({ alerts: domain.alerts, dispatch: domain.dispatch, conversions: domain.conversions, inventory: domain.inventory, stores: domain.stores }),
      buildMcp({
        config,
        operations: served,
        payments: domain.payments,
        gate: agents.gate,
        metrics,
        changes,
        log,
        subscriptions: domain.alerts,
        news: domain.conversions,
        alertsSent: domain.dispatch,
        durable: () => database.durable(),
      }),
      buildA2a({ config, operations: served, payments: domain.payments, gate: agents.gate, metrics, callbacks: domain.events.callbacks }),
      discovery,
      built.worker,
    ],
  };
}
