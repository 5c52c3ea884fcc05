import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import type { TracingConfig } from './settings.ts';

export interface Tracing {
  /** Fastify's official instrumentation, to register before any other plugin or route. */
  plugin: FastifyPluginAsync;
  /** Sends the spans still batched, then stops exporting. */
  close(): Promise<void>;
}

/**
 * Starts exporting spans over OTLP/HTTP (JSON). Called only when OTEL_EXPORTER_OTLP_ENDPOINT is
 * set: the OpenTelemetry packages are imported here, on demand, so a service without tracing
 * neither loads them nor runs any of their hooks.
 */
export async function startTracing(config: TracingConfig): Promise<Tracing> {
  const [{ FastifyOtelInstrumentation }, { NodeTracerProvider, BatchSpanProcessor }, { OTLPTraceExporter }, { resourceFromAttributes }] = await Promise.all([
    import('@fastify/otel'),
    import('@opentelemetry/sdk-trace-node'),
    import('@opentelemetry/exporter-trace-otlp-http'),
    import('@opentelemetry/resources'),
  ]);
  const provider = new NodeTracerProvider({
    resource: resourceFromAttributes({ 'service.name': config.serviceName }),
    spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter({ url: config.tracesUrl }))],
  });
  // The context manager (spans of a request's hooks nest under its span) and the W3C propagator
  // (a caller's traceparent is continued) are process-wide; the first provider of the process keeps them.
  provider.register();
  const instrumentation = new FastifyOtelInstrumentation({
    // A span per hook is a span per gate per request, which doubled the subscribe path's cost
    // (docs/metrics.md); the request's span and its handler's say where the time went.
    instrumentHooks: false,
    // Spans named as OpenTelemetry's HTTP conventions name server spans: method and route pattern.
    requestHook: (span, request) => span.updateName(`${request.method} ${(request as FastifyRequest).routeOptions.url ?? 'unmatched'}`),
  });
  instrumentation.setTracerProvider(provider);
  return {
    plugin: instrumentation.plugin() as unknown as FastifyPluginAsync,
    async close() {
      instrumentation.disable();
      await provider.shutdown();
    },
  };
}
