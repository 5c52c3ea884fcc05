import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { decodeJwt } from 'jose';
import { z } from 'zod';
import { browserScript } from '../core/browser-scripts.ts';
import { framedByShopifyAdmin, html, page, type AppBridgePage, type SafeHtml } from '../core/html.ts';
import { NotConfigured, Problem, ValidationFailed } from '../core/problems.ts';
import { shopifyShopSchema } from '../stores/schemas.ts';
import type { SignedInOwner } from './owner.ts';
import { ownerCaller } from './service.ts';
import type { DashboardSignIn } from './sign-in.ts';
import * as views from './views.ts';

/** The pages' own script inside the Shopify admin (admin-frame.ts, its types stripped), after App Bridge. */
const ADMIN_FRAME_SCRIPT_PATH = '/dashboard/admin-frame.js';
const ADMIN_FRAME_SOURCE = new URL('./admin-frame.ts', import.meta.url);
let adminFrame: Promise<string> | undefined;
const adminFrameScript = () => (adminFrame ??= browserScript(ADMIN_FRAME_SOURCE, 'readable'));

/**
 * Shopify's "bounce page": a page that only loads App Bridge, which, seeing `shopify-reload` in
 * its address, fetches a fresh session token and goes back to that URL with it as `id_token`.
 */
const BOUNCE_PATH = '/dashboard/session-token';

/**
 * The dashboard inside the Shopify admin, where it is a third-party frame and keeps no cookie:
 * each request is authenticated by the App Bridge session token it carries, its pages load App
 * Bridge, and a page load without a valid token goes by the bounce page for a fresh one.
 */
export class AdminFrames {
  private readonly ownOrigin: string;

  constructor(
    private readonly signIn: Pick<DashboardSignIn, 'shopOfSessionToken'>,
    private readonly options: { baseUrl: string; apiKey: string | undefined },
  ) {
    this.ownOrigin = new URL(options.baseUrl).origin;
  }

  /** The bounce page and the pages' script, registered among the dashboard's routes. */
  routes(app: FastifyInstance): void {
    const pages = app.withTypeProvider<ZodTypeProvider>();
    pages.get(BOUNCE_PATH, {
      config: { page: true },
      schema: { hide: true, querystring: bounceQuery(this.ownOrigin) },
      handler: async (request, reply) =>
        reply
          .header('content-security-policy', framedByShopifyAdmin(request.query.shop))
          .type('text/html; charset=utf-8')
          .send(page('Opening Restock', views.openingBody(), { appBridge: this.appBridgeOnly() })),
    });
    pages.get(ADMIN_FRAME_SCRIPT_PATH, {
      schema: { hide: true },
      handler: async (_request, reply) => reply.type('text/javascript; charset=utf-8').send(await adminFrameScript()),
    });
  }

  /**
   * The owner of a request from inside the admin (`owner`, with `request.owner` set), or the
   * bounce page for a page load that needs a fresh token (`bounced`); `undefined` for a request
   * from elsewhere. The session token names the store, so no cookie is needed, and a form posted
   * with one needs no CSRF token either: no other site can get a token signed for this app and
   * store.
   */
  async ownerOf(request: FastifyRequest, reply: FastifyReply): Promise<'owner' | 'bounced' | undefined> {
    const admin = adminRequestOf(request);
    if (admin.sessionToken === undefined) {
      if (!admin.frame) return undefined;
      // Opened inside the admin without a token (after a redirect of ours): App Bridge gets one.
      if (request.method !== 'GET') throw new Problem('invalid-token', 'Send the App Bridge session token with the form (`id_token`), or as `Authorization: Bearer`.');
      return this.bounce(request, reply);
    }
    // A refusal shows inside the admin's frame too, instead of a frame the browser blanks.
    if (admin.shop) reply.header('content-security-policy', framedByShopifyAdmin(admin.shop));
    let shop: string | undefined;
    try {
      shop = await this.signIn.shopOfSessionToken(admin.sessionToken, admin.shop);
    } catch (err) {
      const reloadable = admin.frame && request.method === 'GET' && !admin.byFetch && hasExpired(admin.sessionToken);
      if (err instanceof Problem && err.slug === 'invalid-token' && reloadable) return this.bounce(request, reply);
      throw err;
    }
    if (!shop) throw new Problem('not-found', 'This store has not installed Restock. Install the app from the Shopify admin first.');
    request.owner = { shop, caller: ownerCaller(shop), frame: admin.frame ?? { shop, host: undefined } };
    reply.header('content-security-policy', framedByShopifyAdmin(shop));
    return 'owner';
  }

  /** Pages inside the admin load App Bridge and the script that gives our links and forms their tokens. */
  appBridgeFor(owner: SignedInOwner): AppBridgePage | undefined {
    return owner.frame ? { ...this.appBridgeOnly(), script: ADMIN_FRAME_SCRIPT_PATH } : undefined;
  }

  /** After a form: the page to show next, inside the admin when the form was posted there. */
  nextPage(owner: SignedInOwner, path: string): string {
    return owner.frame ? inAdminFrame(path, owner.frame) : path;
  }

  /** A page leading out of the admin's frame to one of Shopify's, which cannot be framed. */
  leavePage(owner: SignedInOwner, destination: string, what: string): string {
    return page(what, leaveAdminFrameBody(destination, what), { appBridge: this.appBridgeFor(owner) });
  }

  private bounce(request: FastifyRequest, reply: FastifyReply): 'bounced' {
    reply.redirect(bounceUrl(request, this.options.baseUrl), 303);
    return 'bounced';
  }

  /** App Bridge alone, for pages that only hand over to it. */
  private appBridgeOnly(): AppBridgePage {
    if (!this.options.apiKey) throw new NotConfigured('The Shopify app is not configured on this service.');
    return { apiKey: this.options.apiKey };
  }
}

/** What the Shopify admin puts on the app's URL (`embedded=1`, `shop`, `host`), carried from page to page. */
export interface AdminFrame {
  shop: string;
  host: string | undefined;
}

/** Shopify's `host`: the admin's address, base64-encoded. */
const hostSchema = z.string().regex(/^[A-Za-z0-9+/=_-]{1,512}$/, 'must be the host Shopify sent');
const sessionTokenSchema = z.string().regex(/^[A-Za-z0-9._-]{1,8192}$/, 'must be a session token');

const adminQuery = z.object({
  embedded: z.literal('1').optional(),
  shop: shopifyShopSchema.optional(),
  host: hostSchema.optional(),
  id_token: sessionTokenSchema.optional(),
});

/** A dashboard request as the Shopify admin may send it: where from, and the session token it carries. */
interface AdminRequest {
  /** Present when the admin opened the page (`embedded=1`). */
  frame: AdminFrame | undefined;
  /** The store the admin says the page is for. */
  shop: string | undefined;
  sessionToken: string | undefined;
  /** By `fetch`, which App Bridge gives the token as `Authorization: Bearer`; else a page load or a form post. */
  byFetch: boolean;
}

/**
 * Reads the admin's parameters from the query (route schemas keep only their own fields) and the
 * session token from `Authorization: Bearer`, a form's `id_token` field, or the query.
 */
function adminRequestOf(request: FastifyRequest): AdminRequest {
  const query = adminQuery.safeParse(Object.fromEntries(new URL(request.url, 'http://query.invalid').searchParams));
  if (!query.success) {
    throw new ValidationFailed(query.error.issues.map((issue) => ({ pointer: `/query/${issue.path.join('/')}`, message: issue.message })));
  }
  const { embedded, shop, host, id_token: fromQuery } = query.data;
  const bearer = /^Bearer (.+)$/i.exec(request.headers.authorization ?? '')?.[1];
  const posted = (request.body as Record<string, string> | undefined)?.id_token;
  const sessionToken = bearer ?? (request.method === 'POST' ? posted : fromQuery);
  if (sessionToken !== undefined && !sessionTokenSchema.safeParse(sessionToken).success) {
    throw new ValidationFailed([{ pointer: bearer ? '/headers/authorization' : '/id_token', message: 'must be a session token' }]);
  }
  return {
    frame: embedded && shop ? { shop, host } : undefined,
    shop,
    sessionToken,
    byFetch: bearer !== undefined,
  };
}

/**
 * Whether a refused token had merely expired, which a fresh one from App Bridge mends (an address
 * opened again from the history still holds its old `id_token`). Read without checking the
 * signature: it only picks between the bounce page and a refusal, neither of which shows anything.
 */
function hasExpired(sessionToken: string): boolean {
  try {
    const { exp } = decodeJwt(sessionToken);
    return exp !== undefined && exp * 1000 <= Date.now();
  } catch {
    return false;
  }
}

/** The bounce page's address for a page load that needs a fresh token: the same page again, without its old one. */
function bounceUrl(request: FastifyRequest, baseUrl: string): string {
  const url = new URL(request.url, baseUrl);
  url.searchParams.delete('id_token');
  const bounce = new URLSearchParams(url.searchParams);
  bounce.set('shopify-reload', `${baseUrl}${url.pathname}${url.search}`);
  return `${BOUNCE_PATH}?${bounce}`;
}

/** The bounce page's query; `shopify-reload` may only lead back to our own pages. */
function bounceQuery(ownOrigin: string) {
  return z
    .object({
      shop: shopifyShopSchema,
      'shopify-reload': z
        .string()
        .max(4096)
        .refine((address) => URL.canParse(address) && new URL(address).origin === ownOrigin, 'must be a page of this service'),
    })
    .catchall(z.string().max(2048));
}

/** One of our pages again, inside the admin: the admin's parameters carried over. */
function inAdminFrame(path: string, frame: AdminFrame): string {
  const url = new URL(path, 'http://path.invalid');
  url.searchParams.set('embedded', '1');
  url.searchParams.set('shop', frame.shop);
  if (frame.host) url.searchParams.set('host', frame.host);
  return `${url.pathname}${url.search}`;
}

/** Leaves the admin's frame for a page of Shopify's (admin-frame.ts opens the link in the admin's window). */
function leaveAdminFrameBody(destination: string, what: string): SafeHtml {
  return html`<h1>${what}</h1>
<p><a class="button" href="${destination}" target="_top" data-leave-admin-frame>Continue in Shopify</a></p>`;
}
