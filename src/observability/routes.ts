import { createHash, timingSafeEqual } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { FastifyInstance, FastifyPluginAsync } from 'fastify';
import fp from 'fastify-plugin';
import { Problem, problemTypes, problemTypeUri, type ProblemSlug } from '../core/problems.ts';
import type { MetricsRegistry } from './registry.ts';

export const METRICS_PATH = '/metrics';

/**
 * Times every request by its route pattern (a 404 has none: `unmatched`), never by its path, so
 * the label values stay as few as the routes. A callback hook, so no promise per request; the
 * duration is Fastify's own, taken when the request arrived.
 */
export function requestMetrics(metrics: MetricsRegistry): FastifyPluginAsync {
  return fp(
    async (app) => {
      app.addHook('onResponse', function timeRequest(request, reply, done) {
        metrics.observeRequest(request.method, request.routeOptions.url ?? 'unmatched', reply.statusCode, reply.elapsedTime / 1000);
        done();
      });
    },
    { name: 'request-metrics', fastify: '5.x' },
  );
}

/** GET /metrics on the service's own port, for whoever presents METRICS_TOKEN as a bearer token. */
export function metricsRoutes(metrics: MetricsRegistry, token: string): FastifyPluginAsync {
  const expected = digest(token);
  return async (app: FastifyInstance) => {
    app.get(METRICS_PATH, {
      schema: { hide: true },
      handler: async (request, reply) => {
        const given = /^Bearer +(\S+)\s*$/i.exec(request.headers.authorization ?? '')?.[1];
        // Digests of equal length, compared in constant time: neither the token nor its length leaks.
        if (given === undefined || !timingSafeEqual(digest(given), expected)) {
          throw new Problem('metrics-unauthorized', given === undefined ? 'GET /metrics needs the metrics token as a bearer token.' : 'The metrics token is not the one configured.', {
            headers: { 'www-authenticate': 'Bearer realm="metrics"' },
          });
        }
        const { body, contentType } = await metrics.exposition();
        return reply.header('content-type', contentType).header('cache-control', 'no-store').send(body);
      },
    });
  };
}

function digest(text: string): Buffer {
  return createHash('sha256').update(text).digest();
}

export interface MetricsListener {
  url: string;
  close(): Promise<void>;
}

/**
 * /metrics on a port of its own, bound to 127.0.0.1: reachable by a scraper on the same host (or
 * through what the operator forwards), never from the network the API answers, so no token.
 */
export async function openMetricsListener(metrics: MetricsRegistry, port: number, baseUrl: string, log: { warn(details: object, message: string): void }): Promise<MetricsListener> {
  const server = http.createServer((req, res) => {
    const path = (req.url ?? '').split('?')[0];
    if (path !== METRICS_PATH || (req.method !== 'GET' && req.method !== 'HEAD')) {
      const slug = path === METRICS_PATH ? 'method-not-allowed' : 'not-found';
      answerProblem(res, baseUrl, slug, `This listener serves GET ${METRICS_PATH} only.`, slug === 'method-not-allowed' ? { allow: 'GET, HEAD' } : {});
      return;
    }
    metrics.exposition().then(
      ({ body, contentType }) => {
        res.writeHead(200, { 'content-type': contentType, 'cache-control': 'no-store' });
        res.end(req.method === 'HEAD' ? undefined : body);
      },
      (err: unknown) => {
        log.warn({ err }, 'metrics: the exposition failed');
        answerProblem(res, baseUrl, 'service-unavailable', 'The metrics could not be read; try again.', { 'retry-after': '5' });
      },
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port: bound } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${bound}${METRICS_PATH}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/** The listener is no Fastify app: its few answers are written as the error handler would. */
function answerProblem(res: http.ServerResponse, baseUrl: string, slug: ProblemSlug, detail: string, headers: Record<string, string>): void {
  const { status, title } = problemTypes[slug];
  res.writeHead(status, { 'content-type': 'application/problem+json', ...headers });
  res.end(JSON.stringify({ type: problemTypeUri(baseUrl, slug), title, status, detail }));
}
