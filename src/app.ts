import { randomUUID } from 'node:crypto';
import Fastify, { type FastifyInstance } from 'fastify';
import { serializerCompiler, validatorCompiler } from 'fastify-type-provider-zod';
import { AccessTokens } from './agents/access-tokens.ts';
import { agentDiscoveryRoutes } from './agents/discovery-routes.ts';
import { bearerGate, installAccessControl } from './agents/gate.ts';
import { IdentityAssertions } from './agents/identity-assertions.ts';
import { agentRoutes } from './agents/routes.ts';
import { AgentService } from './agents/service.ts';
import { RETIREMENT_SLACK_MS, SigningKeys } from './agents/signing-keys.ts';
import { AgentStore } from './agents/store.ts';
import { alertRoutes } from './alerts/routes.ts';
import { unsubscribeRoutes } from './alerts/unsubscribe-routes.ts';
import { checkoutPages } from './billing/checkout-page.ts';
import { billingRoutes } from './billing/routes.ts';
import { billingWebhookRoutes } from './billing/webhook-routes.ts';
import type { Config } from './config.ts';
import type { Database } from './core/db/database.ts';
import { clientErrorHandler, frameworkErrors, installErrorHandling } from './core/http/errors.ts';
import { installApiCors } from './core/http/cors.ts';
import { redactUrl } from './core/http/log-redaction.ts';
import { installIdempotency } from './core/http/idempotency.ts';
import { installRateLimits } from './core/http/rate-limit.ts';
import { openMailTransport, type MailTransport } from './core/mail/transport.ts';
import { Problem } from './core/problems.ts';
import { MailOutboxStore } from './core/mail/outbox-store.ts';
import { dashboardRoutes } from './dashboard/routes.ts';
import { DashboardService } from './dashboard/service.ts';
import { DashboardSignIn } from './dashboard/sign-in.ts';
import { DashboardStore } from './dashboard/store.ts';
import { dispatchRoutes } from './dispatch/routes.ts';
import { buildDomain, type Domain } from './domain.ts';
import { inventoryRoutes } from './inventory/routes.ts';
import { mcpRoutes } from './mcp/routes.ts';
import { installPaymentGate } from './payments/gate.ts';
import { paymentRoutes } from './payments/routes.ts';
import { registerOpenApi } from './discovery/openapi.ts';
import { collectOperations, discoveryRoutes } from './discovery/routes.ts';
import { loadSkills } from './discovery/agent-skills.ts';
import { frontDoorRoutes } from './discovery/front-door-routes.ts';
import { healthRoutes } from './health/routes.ts';
import { storefrontRoutes } from './storefront/routes.ts';
import { StorefrontService } from './storefront/service.ts';
import { loadWidgetAsset } from './storefront/widget-asset.ts';
import { storeRoutes } from './stores/routes.ts';
import type { StoreService } from './stores/service.ts';

/** Re-read signing keys (another process may have rotated) and drop expired records this often. */
const MAINTENANCE_EVERY_MS = 60_000;

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
  app.addHook('onRequest', async (request, reply) => {
    reply.header('x-request-id', request.id);
    // Node's own check would answer a bare 400; HTTP/1.1 requires Host (RFC 9112 §3.2).
    if (request.raw.httpVersion === '1.1' && !request.headers.host) {
      throw new Problem('malformed-request', 'HTTP/1.1 requests must carry a Host header.');
    }
  });

  await registerOpenApi(app, config.baseUrl);

  installErrorHandling(app, config.baseUrl, config.bodyLimitBytes);
  const mail = options.mail ?? openMailTransport({ smtpUrl: config.smtpUrl, from: config.mailFrom, database, poolSize: config.dispatch.smtpPoolSize });
  const domain = await buildDomain(config, database, mail, app.log);
  app.decorate('restock', domain);
  app.addHook('onClose', async () => {
    await domain.close();
    if (!options.mail) await mail.close();
  });
  const agents = await buildAgents(app, config, database, mail, domain.stores, options.mtlsBaseUrl);
  await installRateLimits(app, {
    redisUrl: config.redisUrl,
    registrationPerAddress: { max: config.agents.rateLimits.registrationsPerHour, windowSeconds: 3600 },
    storefrontPerAddress: { max: config.dashboard.rateLimits.storefrontPerHour, windowSeconds: 3600 },
    signInPerAddress: { max: config.dashboard.rateLimits.signInPerHour, windowSeconds: 3600 },
  });
  // Idempotency keys are private to each agent.
  installIdempotency(app, {
    database,
    ttlHours: config.idempotencyTtlHours,
    // Paying callers are known only after their proof is verified, which must come after the
    // key is checked (a replay is not charged twice): their keys share one namespace.
    callerOf: (request) => request.caller?.agentId ?? 'payer',
  });
  installPaymentGate(app, domain.payments, { baseUrl: config.baseUrl, rateLimitPerMinute: config.agents.rateLimits.anonymous });
  installApiCors(app);
  const operations = collectOperations(app);

  const { alerts } = domain;
  const { billing } = domain;

  await app.register(healthRoutes(database, config.serviceName));
  await app.register(agents.routes);
  await app.register(agents.discovery);
  await app.register(storeRoutes(domain.stores, (shop) => domain.billing.planUsage(shop)));
  await app.register(inventoryRoutes(domain.inventory));
  const outbox = new MailOutboxStore(database);
  await app.register(dispatchRoutes(domain.dispatch, alerts, outbox));
  await app.register(domain.shopify.routes);
  await app.register(alertRoutes(alerts));
  await app.register(unsubscribeRoutes(alerts));
  await app.register(storefrontRoutes(new StorefrontService(domain.stores, domain.inventory, alerts), await loadWidgetAsset()));
  await app.register(paymentRoutes(domain.payments));
  await app.register(billingRoutes(billing));
  await app.register(checkoutPages(billing));
  await app.register(buildDashboard(app, config, database, mail, domain, outbox));
  await app.register(billingWebhookRoutes(billing, config.baseUrl));
  await app.register(
    mcpRoutes({
      gate: agents.gate,
      domain,
      serviceName: config.serviceName,
      baseUrl: config.baseUrl,
      resourceMetadataUrl: `${config.baseUrl}/.well-known/oauth-protected-resource`,
      payments: { service: domain.payments, rateLimitPerMinute: config.agents.rateLimits.anonymous },
    }),
  );
  await app.register(discoveryRoutes({ serviceName: config.serviceName, baseUrl: config.baseUrl, operations }));
  await app.register(frontDoorRoutes({ serviceName: config.serviceName, baseUrl: config.baseUrl, operations, skills: loadSkills(config.baseUrl) }));
  return app;
}

/** The merchant dashboard: its sign-in (links by e-mail, Shopify session tokens) and its pages. */
function buildDashboard(app: FastifyInstance, config: Config, database: Database, mail: MailTransport, domain: Domain, outbox: MailOutboxStore) {
  const signIn = new DashboardSignIn({
    store: new DashboardStore(database),
    stores: domain.stores,
    mail,
    baseUrl: config.baseUrl,
    linkTtlMinutes: config.dashboard.signInLinkTtlMinutes,
    sessionHours: config.dashboard.sessionHours,
    shopOfSessionToken: domain.shopify.shopOfSessionToken,
  });
  const sweep = setInterval(() => {
    signIn.sweep().catch((err) => app.log.warn({ err }, 'dashboard sign-in sweep failed; will retry'));
  }, MAINTENANCE_EVERY_MS);
  sweep.unref();
  app.addHook('onClose', async () => clearInterval(sweep));
  const service = new DashboardService({ ...domain, outbox, embeddedMail: !config.smtpUrl });
  return dashboardRoutes(service, signIn, {
    baseUrl: config.baseUrl,
    isShopifyApp: async (shop) => (await domain.stores.findStore(shop))?.platform === 'shopify',
  });
}

/** Agent identity: keys, token service, the access check in front of scoped routes, and its routes. */
async function buildAgents(app: FastifyInstance, config: Config, database: Database, mail: MailTransport, stores: StoreService, mtlsBaseUrl: string | undefined) {
  const agentStore = new AgentStore(database);
  const longestToken = Math.max(config.agents.accessTokenTtlSeconds, config.agents.credentialTtlSeconds) * 1000;
  const keys = new SigningKeys(agentStore, longestToken);
  await keys.load(config.agents.signingKeyMaxAgeDays);

  const service = new AgentService({
    store: agentStore,
    stores,
    tokens: new AccessTokens(keys, config.baseUrl, config.baseUrl),
    assertions: new IdentityAssertions(config.agents.trustedIssuers, config.baseUrl),
    mail,
    config: config.agents,
    baseUrl: config.baseUrl,
  });
  const gate = bearerGate(service, `${config.baseUrl}/.well-known/oauth-protected-resource`);
  installAccessControl(app, gate);

  const maintenance = setInterval(() => {
    const now = Date.now();
    Promise.all([
      keys.refresh(),
      agentStore.sweep(new Date(now).toISOString(), new Date(now - longestToken - RETIREMENT_SLACK_MS).toISOString()),
    ]).catch((err) => app.log.warn({ err }, 'agent maintenance failed; will retry'));
  }, MAINTENANCE_EVERY_MS);
  maintenance.unref();
  app.addHook('onClose', async () => clearInterval(maintenance));

  const metadata = {
    baseUrl: config.baseUrl,
    serviceName: config.serviceName,
    anonymousRateLimit: config.agents.rateLimits.anonymous,
    mtlsBaseUrl,
    trustedIssuers: config.agents.trustedIssuers.map((trusted) => trusted.issuer),
  };
  return {
    service,
    gate,
    routes: agentRoutes(service, config.baseUrl, config.bodyLimitBytes),
    discovery: agentDiscoveryRoutes(metadata, keys),
  };
}
