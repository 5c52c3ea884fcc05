import { randomUUID } from 'node:crypto';
import Fastify, { type FastifyInstance, type FastifyPluginAsync } from 'fastify';
import { serializerCompiler, validatorCompiler } from 'fastify-type-provider-zod';
import type { Config } from './config.ts';
import type { Database } from './core/db/database.ts';
import { inDependencyOrder, type Feature } from './core/feature.ts';
import { clientErrorHandler, frameworkErrors, installErrorHandling } from './core/http/errors.ts';
import { apiCors } from './core/http/cors.ts';
import { answersAfterDurable } from './core/http/durable-answers.ts';
import { idempotencyGate } from './core/http/idempotency.ts';
import { rateLimitGate } from './core/http/rate-limit.ts';
import type { Metrics } from './core/metrics.ts';
import { hostAndOriginCheck } from './core/http/host-check.ts';
import { operationRoutes } from './core/http/operation-routes.ts';
import { hostPolicy } from './core/http/host-names.ts';
import { redactUrl } from './core/http/log-redaction.ts';
import { openMailTransport, type MailTransport } from './core/mail/transport.ts';
import { Problem } from './core/problems.ts';
import type { Domain } from './domain.ts';
import { buildWebFeatures } from './features.ts';
import type { ChangeBus } from './core/changes/bus.ts';

export interface AppOptions {
  /** Origin of the mTLS listener, when the server runs one (advertised in the metadata). */
  mtlsBaseUrl?: string;
  /** A mail transport to use instead of the configured one (the caller closes it). */
  mail?: MailTransport;
}

declare module 'fastify' {
  interface FastifyInstance {
    /** The product's features; tests and the server reach the dispatch worker through it. */
    restock: Domain;
    /** Where this process hears other processes' changes (tests wait for it to be live). */
    restockChanges: ChangeBus;
  }
}

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** Builds the HTTP app from the features over an open, migrated database. */
export async function buildApp(config: Config, database: Database, options: AppOptions = {}): Promise<FastifyInstance> {
  const app = Fastify({
    logger: {
      level: config.logLevel,
      serializers: {
        req: (request: { method: string; url: string; hostname?: string; ip?: string }) => ({
          method: request.method,
          url: redactUrl(request.url),
          host: request.hostname,
          remoteAddress: request.ip,
        }),
      },
    },
    bodyLimit: config.bodyLimitBytes,
    // Keep a caller's request id when it is sane, so logs line up across services.
    genReqId: (req) => {
      const given = req.headers['x-request-id'];
      return typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
    },
    requestIdHeader: false,
    forceCloseConnections: 'idle',
    // Requests that arrive while closing get our problem+json 503 (installErrorHandling).
    return503OnClosing: false,
    ...(config.trustProxy ? { trustProxy: config.trustProxy } : {}),
    http: { requireHostHeader: false },
    routerOptions: { maxParamLength: 300 },
    frameworkErrors: frameworkErrors(config.baseUrl),
    clientErrorHandler: clientErrorHandler(config.baseUrl),
  });
  // The API speaks JSON only; pages that take forms add their own parsers.
  app.removeContentTypeParser('text/plain');
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  // Callback hooks on every request: no promise each (the storefront and 402 paths are counted in µs).
  app.addHook('onRequest', (request, reply, done) => {
    reply.header('x-request-id', request.id);
    // Node's own check would answer a bare 400; HTTP/1.1 requires Host (RFC 9112 §3.2).
    if (request.raw.httpVersion === '1.1' && !request.headers.host) {
      return done(new Problem('malformed-request', 'HTTP/1.1 requests must carry a Host header.'));
    }
    done();
  });
  app.addHook('onRequest', hostAndOriginCheck(hostPolicy(config.baseUrl, config.allowedHosts, options.mtlsBaseUrl ? [options.mtlsBaseUrl] : [])));

  installErrorHandling(app, config.baseUrl, config.bodyLimitBytes);
  answersAfterDurable(app, () => database.durable());

  const mail = options.mail ?? openMailTransport({ smtpUrl: config.smtpUrl, from: config.mailFrom, database, poolSize: config.dispatch.smtpPoolSize, ca: config.smtpCa });
  const { domain, features, changes, metrics } = await buildWebFeatures(config, database, mail, app.log, options);
  app.decorate('restock', domain);
  app.decorate('restockChanges', changes);
  app.addHook('onClose', async () => {
    for (const feature of [...features].reverse()) await feature.close?.();
    await changes.close();
    if (!options.mail) await mail.close();
  });
  startMaintenance(app, features);

  const gates = sharedGates(config, database, metrics);
  for (const plugin of inDependencyOrder([...features.flatMap((feature) => feature.plugins ?? []), ...gates])) await app.register(plugin);
  for (const feature of features) {
    if (feature.operations) await app.register(operationRoutes(feature.operations));
    for (const routes of feature.routes ?? []) await app.register(routes);
  }
  return app;
}

/** Runs every feature's maintenance on its timer while the app is open; a failed run is retried next time. */
function startMaintenance(app: FastifyInstance, features: Feature<unknown>[]): void {
  const timers = features.flatMap((feature) =>
    (feature.maintenance ?? []).map((task) => {
      const timer = setInterval(() => {
        task.run().catch((err) => app.log.warn({ err, task: task.name }, 'maintenance failed; will retry'));
      }, task.everyMs);
      timer.unref();
      return timer;
    }),
  );
  app.addHook('onClose', async () => {
    for (const timer of timers) clearInterval(timer);
  });
}

/**
 * The app-wide gates that belong to no feature. The identity gate comes from the agents feature
 * and the payment gate from payments; each names the gates it must follow.
 */
function sharedGates(config: Config, database: Database, metrics?: Metrics): FastifyPluginAsync[] {
  const perHour = (max: number) => ({ max, windowSeconds: 3600 });
  return [
    rateLimitGate({
      redisUrl: config.redisUrl,
      registrationPerAddress: perHour(config.agents.rateLimits.registrationsPerHour),
      storefrontPerAddress: perHour(config.dashboard.rateLimits.storefrontPerHour),
      storefrontReadPerAddress: { max: config.dashboard.rateLimits.storefrontReadsPerMinute, windowSeconds: 60 },
      signInPerAddress: perHour(config.dashboard.rateLimits.signInPerHour),
      paymentPerAddress: { max: config.payments.limitPerAddressPerMinute, windowSeconds: 60 },
      ...(metrics ? { metrics } : {}),
    }),
    idempotencyGate({
      database,
      ttlHours: config.idempotencyTtlHours,
      // Paying callers are known only after their proof is verified, which must come after the
      // key is checked (a replay is not charged twice): their keys share one namespace.
      callerOf: (request) => request.caller?.agentId ?? 'payer',
    }),
    apiCors,
  ];
}
