import { randomUUID } from 'node:crypto';
import Fastify, { type FastifyInstance } from 'fastify';
import { serializerCompiler, validatorCompiler } from 'fastify-type-provider-zod';
import { AlertService } from './alerts/service.ts';
import { AlertStore } from './alerts/store.ts';
import { alertRoutes } from './alerts/routes.ts';
import { unsubscribeRoutes } from './alerts/unsubscribe-routes.ts';
import { checkoutPages } from './billing/checkout-page.ts';
import { billingRoutes } from './billing/routes.ts';
import { BillingService } from './billing/service.ts';
import { BillingStore } from './billing/store.ts';
import type { Config } from './config.ts';
import type { Database } from './core/db/database.ts';
import { clientErrorHandler, frameworkErrors, installErrorHandling } from './core/http/errors.ts';
import { installIdempotency } from './core/http/idempotency.ts';
import { Problem } from './core/problems.ts';
import { loadServiceSecret } from './core/secrets.ts';
import { TokenSigner } from './core/signed-token.ts';
import { registerOpenApi } from './discovery/openapi.ts';
import { collectOperations, discoveryRoutes } from './discovery/routes.ts';
import { healthRoutes } from './health/routes.ts';

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** Builds the HTTP app from the features over an open, migrated database. */
export async function buildApp(config: Config, database: Database): Promise<FastifyInstance> {
  const app = Fastify({
    logger: { level: config.logLevel },
    bodyLimit: config.bodyLimitBytes,
    // Keep a caller's request id when it is sane, so logs line up across services.
    genReqId: (req) => {
      const given = req.headers['x-request-id'];
      return typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
    },
    requestIdHeader: false,
    forceCloseConnections: 'idle',
    http: { requireHostHeader: false },
    routerOptions: { maxParamLength: 300 },
    frameworkErrors: frameworkErrors(config.baseUrl),
    clientErrorHandler: clientErrorHandler(config.baseUrl),
  });
  // The API speaks JSON only; pages that take forms add their own parsers.
  app.removeContentTypeParser('text/plain');
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  app.addHook('onRequest', async (request, reply) => {
    reply.header('x-request-id', request.id);
    // Node's own check would answer a bare 400; HTTP/1.1 requires Host (RFC 9112 §3.2).
    if (request.raw.httpVersion === '1.1' && !request.headers.host) {
      throw new Problem('malformed-request', 'HTTP/1.1 requests must carry a Host header.');
    }
  });

  await registerOpenApi(app, config.baseUrl);

  installErrorHandling(app, config.baseUrl, config.bodyLimitBytes);
  installIdempotency(app, { database, ttlHours: config.idempotencyTtlHours });
  const operations = collectOperations(app);

  const signer = new TokenSigner(await loadServiceSecret(database, config.secret));
  const alerts = new AlertService(new AlertStore(database), signer, config.baseUrl);
  const billing = new BillingService(new BillingStore(database), config.baseUrl, config.checkoutSessionTtlMinutes);

  await app.register(healthRoutes(database, config.serviceName));
  await app.register(alertRoutes(alerts));
  await app.register(unsubscribeRoutes(alerts));
  await app.register(billingRoutes(billing));
  await app.register(checkoutPages(billing));
  await app.register(discoveryRoutes({ serviceName: config.serviceName, baseUrl: config.baseUrl, operations }));
  return app;
}
