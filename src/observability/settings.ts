import { z } from 'zod';
/** Metrics and tracing from the METRICS_* and OTEL_* settings (src/config.ts reads them). */
export interface ObservabilityConfig {
  /** The bearer secret /metrics asks for on the service's own port; unset: not served there. */
  metricsToken: string | undefined;
  /** A listener of its own, on 127.0.0.1 only, serving /metrics without a token. */
  metricsPort: number | undefined;
  /** Set when OTEL_EXPORTER_OTLP_ENDPOINT is: spans go there over OTLP/HTTP. */
  tracing: TracingConfig | undefined;
}

export interface TracingConfig {
  /** Where spans are posted: the endpoint's origin and path, then `/v1/traces`, as OTLP/HTTP defines it. */
  tracesUrl: string;
  serviceName: string;
}

/** This module's slice of the environment, which src/config.ts reads with the rest (and PORT, which the metrics listener must not take). */
export type ObservabilitySettings = z.infer<z.ZodObject<typeof observabilitySettings>> & { PORT: number };

export function observabilityConfig(e: ObservabilitySettings): ObservabilityConfig {
  if (e.METRICS_PORT !== undefined && e.METRICS_PORT === e.PORT) throw new Error('METRICS_PORT: must differ from PORT (the metrics listener is a server of its own)');
  const endpoint = e.OTEL_EXPORTER_OTLP_ENDPOINT;
  return {
    metricsToken: e.METRICS_TOKEN,
    metricsPort: e.METRICS_PORT,
    tracing: endpoint === undefined ? undefined : { tracesUrl: tracesUrlOf(endpoint), serviceName: e.OTEL_SERVICE_NAME ?? 'restock' },
  };
}

/**
 * The OTLP/HTTP traces address of a base endpoint (the specification appends `v1/traces` to
 * OTEL_EXPORTER_OTLP_ENDPOINT). Only scheme, host, port and path are kept: credentials, a query
 * or a fragment are refused rather than handed to the exporter.
 */
export function tracesUrlOf(endpoint: string): string {
  let url: URL;
  try {
    url = new URL(endpoint);
  } catch {
    throw new Error('OTEL_EXPORTER_OTLP_ENDPOINT: not a URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Error('OTEL_EXPORTER_OTLP_ENDPOINT: must be an http:// or https:// URL');
  if (url.username || url.password) throw new Error('OTEL_EXPORTER_OTLP_ENDPOINT: must not carry credentials');
  if (url.search || url.hash) throw new Error('OTEL_EXPORTER_OTLP_ENDPOINT: must not carry a query or fragment');
  return `${url.origin}${url.pathname.replace(/\/+$/, '')}/v1/traces`;
}

/** For the settings schema: an endpoint tracesUrlOf takes. */
export function isOtlpEndpoint(text: string): boolean {
  try {
    tracesUrlOf(text);
    return true;
  } catch {
    return false;
  }
}

/** The metrics and tracing settings: this module's slice of the environment, which src/config.ts reads with the rest. */
export const observabilitySettings = {
  METRICS_TOKEN: z.string().min(16, 'at least 16 characters (a random secret)').optional().describe('Serves Prometheus metrics at `GET /metrics` on `PORT` to whoever presents it as a bearer token (16 characters or more); with neither it nor `METRICS_PORT`, `/metrics` answers 404 (docs/metrics.md)'),
  METRICS_PORT: z.coerce.number().int().min(1).max(65535).optional().describe('Serves `GET /metrics` on a listener of its own, bound to 127.0.0.1, without a token'),
  OTEL_EXPORTER_OTLP_ENDPOINT: z.string().refine(isOtlpEndpoint, 'an http(s) URL without credentials, query or fragment').optional().describe('OpenTelemetry traces over OTLP/HTTP (JSON) to this http(s) base URL (`/v1/traces` is added); unset, tracing is not even loaded'),
  OTEL_SERVICE_NAME: z.string().min(1).optional().describe('The service name on exported traces (unset: `restock`)'),
};
