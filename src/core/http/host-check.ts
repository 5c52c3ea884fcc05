import type { FastifyRequest, onRequestHookHandler } from 'fastify';
import { Problem } from '../problems.ts';
import { isCrossOriginApi } from './cors.ts';
import type { HostPolicy } from './host-names.ts';

declare module 'fastify' {
  interface FastifyContextConfig {
    /**
     * Refuse what a browser sends from another site's page whatever the method: the MCP
     * endpoint, whose specification asks it to check `Origin` (Streamable HTTP, "Security Warning").
     */
    ownOriginOnly?: boolean;
  }
}

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * Where a browser page on another site may send a request that changes something: the API and the
 * storefront widget's calls (no cookies; their credentials are explicit), and Shopify's app proxy,
 * which relays the widget's posts from the shop's own domain.
 */
function takesOtherSitesPages(path: string): boolean {
  return isCrossOriginApi(path) || path.startsWith('/shopify/proxy/');
}

/**
 * DNS rebinding and cross-site requests, on every route. A Host that names another server is
 * refused with 421: a page whose name was pointed at this service (or at a proxy in front of it)
 * sends its own name. A request a browser sends from another site's page is refused with 403 where
 * it would act for a browser that did not mean to (any method but GET, HEAD and OPTIONS outside
 * the API open to other sites' pages) and on routes that say `ownOriginOnly` (the MCP endpoint).
 * Programs send no `Origin`, so webhooks and agents are not concerned. The name checked is the
 * Host header itself, never X-Forwarded-Host, even from a proxy named in TRUST_PROXY: Shopify's
 * app proxy forwards the shop's own domain in it, and a proxy that rewrites Host sends a name of
 * its own, which ALLOWED_HOSTS lists. A request without any Host (HTTP/1.0) names nothing to
 * check; HTTP/1.1 without one is refused before this runs.
 */
export function hostAndOriginCheck(policy: HostPolicy): onRequestHookHandler {
  return (request, _reply, done) => {
    const host = request.headers.host;
    if (host !== undefined && !policy.servesHost(host)) {
      return done(new Problem('misdirected-request', 'This service does not answer for the host this request names. Use the address the service publishes.'));
    }
    if (refusesOtherSites(request) && sentByAnotherSite(request, policy)) {
      return done(new Problem('foreign-origin', 'This endpoint does not take requests from another site’s pages.'));
    }
    done();
  };
}

/**
 * Whether a browser sent this from a page of another site. `Sec-Fetch-Site` is the browser's own
 * word for it; `Origin` must be one of ours, except `null` from a page of ours whose referrer
 * policy hides its origin (the capability pages'), which the browser vouches for as same-origin.
 * Programs send neither.
 */
function sentByAnotherSite(request: FastifyRequest, policy: HostPolicy): boolean {
  const site = request.headers['sec-fetch-site'];
  if (site !== undefined && site !== 'same-origin' && site !== 'none') return true;
  const origin = request.headers.origin;
  if (origin === undefined || policy.isOwnOrigin(origin)) return false;
  return !(origin === 'null' && site === 'same-origin');
}

function refusesOtherSites(request: FastifyRequest): boolean {
  if (request.routeOptions.config?.ownOriginOnly) return true;
  if (SAFE_METHODS.has(request.method)) return false;
  return !takesOtherSitesPages(request.routeOptions.url ?? request.url.split('?')[0]!);
}
