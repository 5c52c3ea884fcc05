// Longer than most files on purpose: every page of the dashboard and the one gate in front of them
// (owner session or Shopify session token, CSRF) in one place.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { keepCapabilityPagesPrivate } from '../core/http/capability-pages.ts';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { planIds } from '../billing/service.ts';
import { exportKinds } from '../conversions/schemas.ts';
import { framedByShopifyAdmin, page, type SafeHtml } from '../core/html.ts';
import { parseUrlEncodedForms, postedFromAnotherSite } from '../core/http/form-posts.ts';
import { NotFound, Problem, ValidationFailed } from '../core/problems.ts';
import { embedSnippet } from '../storefront/service.ts';
import { shopSchema } from '../stores/schemas.ts';
import { ownerCaller, type DashboardService } from './service.ts';
import { AdminFrames } from './embedded.ts';
import { csrfTokenMatches, type DashboardSignIn, type OpenedSession } from './sign-in.ts';
import { performanceBody } from './performance-views.ts';
import type { SignedInOwner } from './owner.ts';
import { deliveriesBody, webhooksBody } from './webhook-views.ts';
import * as views from './views.ts';
import type { DashboardPanel, PanelAnswer } from '../core/dashboard-panel.ts';

const COOKIE = 'restock_dashboard';
const DEVICE_COOKIE = 'restock_device';
const DEVICE_COOKIE_SECONDS = 365 * 24 * 3600;
const tokenParams = z.object({ token: z.string().regex(/^[A-Za-z0-9_-]{20,100}$/, 'must be a sign-in link') });
/** The ceiling as the plan page's form sends it: USD with at most two decimals, in cents. */
const overageCeilingField = z
  .string()
  .trim()
  .regex(/^\d{1,5}(\.\d{1,2})?$/)
  .transform((usd) => Math.round(Number(usd) * 100))
  .pipe(z.number().int().max(1_000_000));
const idParams = z.object({ id: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'must be an id') });
const form = z
  .record(z.string(), z.string().max(4096))
  .nullish()
  .transform((fields) => fields ?? {});

export interface DashboardRouteOptions {
  baseUrl: string;
  /** The store's platform, and whether it is installed as the Shopify app (whose admin may frame the dashboard). */
  storeOf(shop: string): Promise<{ platform: string; shopifyApp: boolean } | undefined>;
  /** Each platform's own page (a WooCommerce store's connection), by platform: shown to its stores only. */
  panels: Readonly<Record<string, DashboardPanel>>;
  /** The pages of the integrations every store has (its Klaviyo connection). */
  integrations: readonly DashboardPanel[];
  /** The Shopify app's client id, which App Bridge reads from the pages (absent without the app). */
  shopifyApiKey: string | undefined;
}

/**
 * The merchant dashboard: server-rendered pages for a store's owner, signed in by a one-time
 * link (a cookie session, whose forms carry its CSRF token), or shown inside the Shopify admin,
 * where every request carries a fresh App Bridge session token instead (links, forms and fetches
 * alike) and no cookie is used.
 */
export function dashboardRoutes(service: DashboardService, signIn: DashboardSignIn, options: DashboardRouteOptions) {
  const secure = options.baseUrl.startsWith('https://');
  const ownOrigin = new URL(options.baseUrl).origin;
  const adminFrames = new AdminFrames(signIn, { baseUrl: options.baseUrl, apiKey: options.shopifyApiKey });
  /** The store's platform's page, if it has one. */
  const panelOf = (owner: SignedInOwner) => (owner.platform !== undefined && Object.hasOwn(options.panels, owner.platform) ? options.panels[owner.platform] : undefined);

  return async function (app: FastifyInstance) {
    parseUrlEncodedForms(app);
    const pages = app.withTypeProvider<ZodTypeProvider>();

    // Sign-in links carry their secret in the path; no page may hand it on.
    keepCapabilityPagesPrivate(app, { unframed: true });

    // ---- signing in -------------------------------------------------------------------------

    pages.get('/dashboard/sign-in', {
      config: { page: true },
      schema: { hide: true },
      handler: async (_request, reply) => sendPage(reply, 200, page('Sign in', views.signInBody({ shopify: signIn.shopifyAvailable }))),
    });

    pages.post('/dashboard/sign-in', {
      config: { page: true, rateLimitByAddress: 'sign-in' },
      schema: { hide: true, body: form },
      handler: async (request, reply) => {
        const typed = (request.body.shop ?? '').trim();
        const shop = shopSchema.safeParse(typed);
        if (!shop.success) {
          const error = typed ? shop.error.issues[0]!.message.replace(/^must/, 'The store domain must') : 'Enter your store’s domain.';
          return sendPage(reply, 400, page('Sign in', views.signInBody({ error, typed, shopify: signIn.shopifyAvailable })));
        }
        await signIn.requestLink(shop.data, cookieValue(request, DEVICE_COOKIE));
        return sendPage(reply, 200, page('Check your e-mail', views.linkSentBody(shop.data.toLowerCase())));
      },
    });

    pages.get('/dashboard/sign-in/:token', {
      config: { page: true },
      schema: { hide: true, params: tokenParams },
      handler: async (request, reply) => {
        const shop = await signIn.linkTarget(request.params.token);
        if (!shop) return sendPage(reply, 410, page('Link expired', views.expiredLinkBody()));
        return sendPage(reply, 200, page('Sign in', views.confirmLinkBody(shop, request.params.token)));
      },
    });

    pages.post('/dashboard/sign-in/:token', {
      config: { page: true },
      schema: { hide: true, params: tokenParams, body: form },
      handler: async (request, reply) => {
        // Another site posting a link of its own would sign this browser in to the attacker's
        // store (login CSRF): only our own confirmation page may use a link, and it stays unused.
        if (postedFromAnotherSite(request.headers, ownOrigin)) {
          return sendPage(reply, 403, page('Sign in', views.crossSiteSignInBody()));
        }
        const opened = await signIn.useLink(request.params.token);
        if (!opened) return sendPage(reply, 410, page('Link expired', views.expiredLinkBody()));
        return startSession(reply, opened, secure);
      },
    });

    adminFrames.routes(app);

    pages.post('/dashboard/sign-out', {
      config: { page: true },
      schema: { hide: true, body: form },
      handler: async (request, reply) => {
        const secret = cookieValue(request);
        const session = await signIn.sessionFor(secret);
        if (session && secret && csrfTokenMatches(session, request.body.csrf)) await signIn.signOut(secret);
        reply.header('set-cookie', `${COOKIE}=; Path=/dashboard; Max-Age=0; HttpOnly; SameSite=Lax${secure ? '; Secure' : ''}`);
        return reply.redirect('/dashboard/sign-in', 303);
      },
    });

    // ---- the signed-in pages ------------------------------------------------------------------

    const owned = { config: { page: true }, preHandler: requireOwner } as const;

    async function requireOwner(request: FastifyRequest, reply: FastifyReply) {
      const fromAdmin = await adminFrames.ownerOf(request, reply);
      if (fromAdmin === 'bounced') return reply;
      if (fromAdmin === 'owner') return;
      const session = await signIn.sessionFor(cookieValue(request));
      if (!session) return reply.redirect('/dashboard/sign-in', 303);
      if (request.method === 'POST' && !csrfTokenMatches(session, (request.body as Record<string, string> | undefined)?.csrf)) {
        throw new Problem('forbidden', 'This form is out of date or came from another site. Reload the page and try again.');
      }
      const store = await options.storeOf(session.shop);
      request.owner = { shop: session.shop, caller: ownerCaller(session.shop), csrfToken: session.csrfToken, ...(store ? { platform: store.platform } : {}) };
      if (session.via === 'shopify' || store?.shopifyApp) reply.header('content-security-policy', framedByShopifyAdmin(session.shop));
    }

    const show = (reply: FastifyReply, request: FastifyRequest, title: string, current: string, body: SafeHtml, status = 200) =>
      sendPage(reply, status, views.dashboardPage(title, request.owner!, current, body, { embeddedMail: service.embeddedMail, panel: panelOf(request.owner!), integrations: options.integrations }, adminFrames.appBridgeFor(request.owner!)));

    /**
     * Sends the owner to a page of another site (303); inside the Shopify admin's frame, which such a
     * page cannot replace, by a page that leads out of it.
     */
    const leaveFor = (reply: FastifyReply, owner: SignedInOwner, destination: string, what: string) =>
      owner.frame ? sendPage(reply, 200, adminFrames.leavePage(owner, destination, what)) : reply.redirect(destination, 303);

    pages.get('/dashboard', {
      ...owned,
      schema: { hide: true },
      handler: async (request, reply) => {
        const { caller, shop } = request.owner!;
        return show(reply, request, 'Overview', '/dashboard', views.overviewBody(await service.overview(caller, shop), embedSnippet(options.baseUrl, shop)));
      },
    });

    pages.get('/dashboard/performance', {
      ...owned,
      schema: { hide: true },
      handler: async (request, reply) => {
        const { caller, shop } = request.owner!;
        return show(reply, request, 'Performance', '/dashboard/performance', performanceBody(await service.performance(caller, shop)));
      },
    });

    pages.get('/dashboard/exports/:kind', {
      ...owned,
      schema: { hide: true, params: z.object({ kind: z.enum(exportKinds) }) },
      handler: async (request, reply) => {
        const { caller, shop } = request.owner!;
        const { kind } = request.params;
        return reply
          .type('text/csv; charset=utf-8')
          .header('content-disposition', `attachment; filename="${shop}-${kind}.csv"`)
          .header('cache-control', 'no-store')
          .send(service.exportCsv(caller, shop, kind));
      },
    });

    pages.get('/dashboard/webhooks', {
      ...owned,
      schema: { hide: true },
      handler: async (request, reply) => {
        const owner = request.owner!;
        return show(reply, request, 'Webhooks', '/dashboard/webhooks', webhooksBody(await service.webhookEndpoints(owner.caller, owner.shop), owner.csrfToken));
      },
    });

    pages.post('/dashboard/webhooks', {
      ...owned,
      schema: { hide: true, body: form },
      handler: async (request, reply) => {
        const owner = request.owner!;
        try {
          const created = await service.addWebhookEndpoint(owner.caller, owner.shop, request.body);
          // The secret is shown on this answer only, never on a page that can be reloaded.
          const body = webhooksBody(await service.webhookEndpoints(owner.caller, owner.shop), owner.csrfToken, { created });
          return show(reply, request, 'Webhooks', '/dashboard/webhooks', body, 201);
        } catch (err) {
          if (!(err instanceof ValidationFailed)) throw err;
          const body = webhooksBody(await service.webhookEndpoints(owner.caller, owner.shop), owner.csrfToken, { errors: err.errors, typed: request.body.url ?? '' });
          return show(reply, request, 'Webhooks', '/dashboard/webhooks', body, 400);
        }
      },
    });

    pages.post('/dashboard/webhooks/:id/delete', {
      ...owned,
      schema: { hide: true, params: idParams, body: form },
      handler: async (request, reply) => {
        const owner = request.owner!;
        await service.deleteWebhookEndpoint(owner.caller, owner.shop, request.params.id);
        return reply.redirect(adminFrames.nextPage(owner, '/dashboard/webhooks'), 303);
      },
    });

    pages.post('/dashboard/webhooks/:id/enable', {
      ...owned,
      schema: { hide: true, params: idParams, body: form },
      handler: async (request, reply) => {
        const owner = request.owner!;
        await service.enableWebhookEndpoint(owner.caller, owner.shop, request.params.id);
        return reply.redirect(adminFrames.nextPage(owner, '/dashboard/webhooks'), 303);
      },
    });

    pages.get('/dashboard/webhooks/:id', {
      ...owned,
      schema: { hide: true, params: idParams },
      handler: async (request, reply) => {
        const owner = request.owner!;
        const { endpoint, deliveries } = await service.webhookDeliveries(owner.caller, owner.shop, request.params.id);
        return show(reply, request, 'Webhook deliveries', '/dashboard/webhooks', deliveriesBody(endpoint, deliveries));
      },
    });

    pages.get('/dashboard/demand', {
      ...owned,
      schema: { hide: true },
      handler: async (request, reply) => {
        const { caller, shop } = request.owner!;
        return show(reply, request, 'Demand', '/dashboard/demand', views.demandBody(await service.demand(caller, shop)));
      },
    });

    pages.get('/dashboard/alerts', {
      ...owned,
      schema: { hide: true, querystring: z.object({ status: z.enum(['queued', 'sending', 'sent', 'skipped', 'failed']).optional() }) },
      handler: async (request, reply) => {
        const { caller, shop } = request.owner!;
        const { status } = request.query;
        return show(reply, request, 'Alerts', '/dashboard/alerts', views.alertsBody(await service.alerts(caller, shop, status), status));
      },
    });

    pages.get('/dashboard/alerts/:id', {
      ...owned,
      schema: { hide: true, params: idParams },
      handler: async (request, reply) => {
        const { caller, shop } = request.owner!;
        return show(reply, request, 'Why this alert', '/dashboard/alerts', views.auditBody(await service.auditNotification(caller, shop, request.params.id)));
      },
    });

    pages.get('/dashboard/audience', {
      ...owned,
      schema: { hide: true },
      handler: async (request, reply) => {
        const owner = request.owner!;
        return show(reply, request, 'Unsubscribes', '/dashboard/audience', views.audienceBody(await service.audience(owner.caller, owner.shop), owner.csrfToken));
      },
    });

    pages.post('/dashboard/suppressions', {
      ...owned,
      schema: { hide: true, body: form },
      handler: async (request, reply) => {
        const owner = request.owner!;
        try {
          await service.suppress(owner.caller, owner.shop, request.body.email ?? '');
        } catch (err) {
          if (!(err instanceof ValidationFailed)) throw err;
          const body = views.audienceBody(await service.audience(owner.caller, owner.shop), owner.csrfToken, err.errors, request.body.email ?? '');
          return show(reply, request, 'Unsubscribes', '/dashboard/audience', body, 400);
        }
        return reply.redirect(adminFrames.nextPage(owner, '/dashboard/audience'), 303);
      },
    });

    pages.post('/dashboard/suppressions/remove', {
      ...owned,
      schema: { hide: true, body: form },
      handler: async (request, reply) => {
        const owner = request.owner!;
        if (request.body.email) await service.unsuppress(owner.caller, owner.shop, request.body.email);
        return reply.redirect(adminFrames.nextPage(owner, '/dashboard/audience'), 303);
      },
    });

    pages.get('/dashboard/plan', {
      ...owned,
      schema: { hide: true },
      handler: async (request, reply) => {
        const owner = request.owner!;
        return show(reply, request, 'Plan', '/dashboard/plan', views.planBody(await service.planUsage(owner.caller, owner.shop), service.plans(), owner.csrfToken));
      },
    });

    pages.post('/dashboard/plan/overage-ceiling', {
      ...owned,
      schema: { hide: true, body: form },
      handler: async (request, reply) => {
        const owner = request.owner!;
        const ceiling = overageCeilingField.safeParse(request.body.overageCeiling);
        if (!ceiling.success) {
          const errors = [{ pointer: '/overageCeiling', message: 'must be an amount in USD from 0 to 10000, with at most two decimals' }];
          return show(reply, request, 'Plan', '/dashboard/plan', views.planBody(await service.planUsage(owner.caller, owner.shop), service.plans(), owner.csrfToken, errors), 400);
        }
        await service.setOverageCeiling(owner.caller, owner.shop, ceiling.data);
        return reply.redirect(adminFrames.nextPage(owner, '/dashboard/plan'), 303);
      },
    });

    pages.post('/dashboard/plan/checkout', {
      ...owned,
      schema: { hide: true, body: form },
      handler: async (request, reply) => {
        const plan = z.enum(planIds).safeParse(request.body.plan);
        if (!plan.success) throw new ValidationFailed([{ pointer: '/plan', message: `must be one of ${planIds.join(', ')}` }]);
        const owner = request.owner!;
        const session = await service.checkout(owner.caller, owner.shop, plan.data);
        // Shopify's page approving the charge cannot be framed: it opens in the admin's window.
        return leaveFor(reply, owner, session.checkoutUrl, 'Approve the charge in Shopify');
      },
    });

    pages.get('/dashboard/settings', {
      ...owned,
      schema: { hide: true, querystring: z.object({ saved: z.literal('1').optional() }) },
      handler: async (request, reply) => {
        const owner = request.owner!;
        const body = views.settingsBody(await service.store(owner.caller, owner.shop), owner.csrfToken, [], request.query.saved === '1', embedSnippet(options.baseUrl, owner.shop));
        return show(reply, request, 'Settings', '/dashboard/settings', body);
      },
    });

    pages.post('/dashboard/settings', {
      ...owned,
      schema: { hide: true, body: form },
      handler: async (request, reply) => {
        const owner = request.owner!;
        try {
          await service.saveSettings(owner.caller, owner.shop, request.body);
        } catch (err) {
          if (!(err instanceof Problem) || err.status >= 500) throw err;
          const errors = err instanceof ValidationFailed ? err.errors : [{ pointer: '/', message: err.detail }];
          return show(reply, request, 'Settings', '/dashboard/settings', views.settingsBody(await service.store(owner.caller, owner.shop), owner.csrfToken, errors), 400);
        }
        return reply.redirect(adminFrames.nextPage(owner, '/dashboard/settings?saved=1'), 303);
      },
    });

    // ---- each platform's own page, for its stores; the integrations' pages, for every store ---

    for (const panel of [...Object.values(options.panels), ...options.integrations]) {
      const at = `/dashboard/${panel.path}`;
      const everyStore = options.integrations.includes(panel);
      const panelFor = (owner: SignedInOwner): DashboardPanel => {
        if (!everyStore && panelOf(owner) !== panel) throw new NotFound(`${owner.shop} is not a ${panel.label} store; it has no ${panel.label} page.`);
        return panel;
      };
      const answer = (reply: FastifyReply, request: FastifyRequest, answered: PanelAnswer) => {
        const owner = request.owner!;
        if ('page' in answered) return show(reply, request, panel.label, at, answered.page, answered.status);
        if ('next' in answered) return reply.redirect(adminFrames.nextPage(owner, answered.next), 303);
        return leaveFor(reply, owner, answered.leave, answered.what);
      };

      pages.get(at, {
        ...owned,
        schema: { hide: true, querystring: z.record(z.string(), z.string().max(4096)) },
        handler: async (request, reply) => answer(reply, request, await panelFor(request.owner!).show(request.owner!, request.query)),
      });
      for (const action of ['', ...panel.actions]) {
        pages.post(action ? `${at}/${action}` : at, {
          ...owned,
          schema: { hide: true, body: form },
          handler: async (request, reply) => answer(reply, request, await panelFor(request.owner!).post(request.owner!, action, request.body)),
        });
      }
    }

    pages.get('/dashboard/outbox', {
      ...owned,
      schema: { hide: true },
      handler: async (request, reply) => {
        const { caller, shop } = request.owner!;
        return show(reply, request, 'Outbox', '/dashboard/outbox', views.outboxBody(await service.outbox(caller, shop)));
      },
    });

    pages.get('/dashboard/outbox/:id', {
      ...owned,
      schema: { hide: true, params: idParams },
      handler: async (request, reply) => {
        const { caller, shop } = request.owner!;
        return show(reply, request, 'Outbox', '/dashboard/outbox', views.outboxMessageBody(await service.outboxMessage(caller, shop, request.params.id)));
      },
    });
  };
}

function sendPage(reply: FastifyReply, status: number, body: string) {
  return reply.code(status).type('text/html; charset=utf-8').send(body);
}

/** Sets the session cookie and goes to the dashboard. */
function startSession(reply: FastifyReply, opened: OpenedSession, secure: boolean) {
  const maxAge = Math.max(0, Math.floor((Date.parse(opened.session.expiresAt) - Date.now()) / 1000));
  const cookies = [`${COOKIE}=${opened.secret}; Path=/dashboard; Max-Age=${maxAge}; HttpOnly; SameSite=Lax${secure ? '; Secure' : ''}`];
  if (opened.deviceToken) cookies.push(`${DEVICE_COOKIE}=${opened.deviceToken}; Path=/dashboard; Max-Age=${DEVICE_COOKIE_SECONDS}; HttpOnly; SameSite=Lax${secure ? '; Secure' : ''}`);
  reply.header('set-cookie', cookies);
  return reply.redirect('/dashboard', 303);
}

function cookieValue(request: FastifyRequest, cookie = COOKIE): string | undefined {
  const header = request.headers.cookie;
  if (!header) return undefined;
  for (const part of header.split(';')) {
    const [name, ...rest] = part.trim().split('=');
    if (name === cookie) return rest.join('=') || undefined;
  }
  return undefined;
}

