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

export interface ObservabilitySettings {
  METRICS_TOKEN?: string | undefined;
  METRICS_PORT?: number | undefined;
  OTEL_EXPORTER_OTLP_ENDPOINT?: string | undefined;
  OTEL_SERVICE_NAME?: string | undefined;
  PORT: number;
}

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
