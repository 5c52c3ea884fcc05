import type { FastifyBaseLogger, FastifyPluginAsync } from 'fastify';
import type { Config } from '../config.ts';
import type { Database } from '../core/db/database.ts';
import type { Feature } from '../core/feature.ts';
import { noMetrics, type Metrics } from '../core/metrics.ts';
import type { QueueReadings } from '../dispatch/feature.ts';
import { MetricsRegistry } from './registry.ts';
import { metricsRoutes, openMetricsListener, requestMetrics, type MetricsListener } from './routes.ts';
import { startTracing, type Tracing } from './tracing.ts';

/**
 * What features report to: a registry when /metrics is served somewhere (METRICS_TOKEN or
 * METRICS_PORT), `noMetrics` otherwise, so a service without metrics counts nothing at all.
 */
export function openMetrics(config: Config): Metrics {
  const { metricsToken, metricsPort } = config.observability;
  return metricsToken !== undefined || metricsPort !== undefined ? new MetricsRegistry() : noMetrics;
}

export interface ObservabilityDeps {
  config: Config;
  database: Database;
  log: FastifyBaseLogger;
  /** What openMetrics returned, which the other features report to. */
  metrics: Metrics;
  /** The send queue, read at each scrape (the dispatch feature). */
  queue: QueueReadings;
}

export interface ObservabilityFeature extends Feature<undefined> {
  /** The metrics listener's address, when METRICS_PORT is set. */
  metricsUrl?: string;
}

/**
 * Metrics and tracing: the request timer and /metrics (with METRICS_TOKEN on the service's port,
 * or alone on METRICS_PORT), and Fastify's OpenTelemetry instrumentation when
 * OTEL_EXPORTER_OTLP_ENDPOINT is set. List it first: its plugins must wrap every route.
 */
export async function buildObservability({ config, database, log, metrics, queue }: ObservabilityDeps): Promise<ObservabilityFeature> {
  const { metricsToken, metricsPort, tracing: tracingConfig } = config.observability;
  const plugins: FastifyPluginAsync[] = [];
  const routes: FastifyPluginAsync[] = [];
  let tracing: Tracing | undefined;
  let listener: MetricsListener | undefined;
  if (tracingConfig) {
    tracing = await startTracing(tracingConfig);
    plugins.push(tracing.plugin);
  }
  if (metrics instanceof MetricsRegistry) {
    metrics.readAtScrape(
      { queue: (now) => queue.read(now), pool: () => database.poolUse() },
      log,
    );
    plugins.push(requestMetrics(metrics));
    if (metricsToken !== undefined) routes.push(metricsRoutes(metrics, metricsToken));
    if (metricsPort !== undefined) {
      try {
        listener = await openMetricsListener(metrics, metricsPort, config.baseUrl, log);
      } catch (err) {
        await tracing?.close();
        throw err;
      }
    }
  }
  return {
    service: undefined,
    plugins,
    routes,
    ...(listener ? { metricsUrl: listener.url } : {}),
    async close() {
      await listener?.close();
      await tracing?.close();
    },
  };
}
