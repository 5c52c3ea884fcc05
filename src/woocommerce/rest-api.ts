import { checkDestination, checkTenantApiAddress } from '../core/net/destination.ts';
import { jsonOf } from '../core/json.ts';
import { describeFailure, exchange, type HopRequest } from '../core/net/http-post.ts';
import { ForbiddenDestination, type OutboundPolicy } from '../core/net/outbound-guard.ts';

/** A page of products is at most 100 (WordPress's limit), each a few KB. */
const MAX_BODY_BYTES = 4 * 1024 * 1024;
const TIMEOUT_MS = 15_000;
/** WordPress's own ceiling for `per_page`. */
export const PER_PAGE = 100;

/** A store's REST API keys, as WooCommerce hands them out (ck_/cs_ and 40 hex digits). */
export interface WooCommerceKeys {
  consumerKey: string;
  consumerSecret: string;
}

/**
 * The site answered with an error, in its `{code, message, data: {status}}` shape (only the
 * status and the code are kept: the message is the site's words), or could not be reached.
 */
export class WooCommerceError extends Error {
  override name = 'WooCommerceError';

  constructor(
    message: string,
    /** The HTTP status, or null when nothing came back. */
    readonly status: number | null,
    /** WooCommerce's error code (`woocommerce_rest_cannot_view`), when it gave one. */
    readonly code: string | null = null,
  ) {
    super(message);
  }

  /**
   * The keys no longer work: WooCommerce answers 401 to a revoked or deleted key (it then runs
   * the request as nobody, `woocommerce_rest_cannot_view`) and to a key without the rights asked.
   */
  get keysRefused(): boolean {
    return this.status === 401;
  }
}

/**
 * The site's address, as a store owner gives it: https (WooCommerce takes keys by HTTP Basic only
 * over TLS), or http to an address the operator allowed (a local site in development). No
 * credentials, query or fragment; a path is kept (WordPress under /shop).
 */
export function parseSiteUrl(text: string, policy: OutboundPolicy): URL | string {
  return checkTenantApiAddress(text, policy, { what: 'the site’s address', tls: 'WooCommerce takes API keys only over TLS' });
}

/**
 * WooCommerce's REST API (`/wp-json/wc/v3`) for one site: every request through the outbound
 * guard, with the keys by HTTP Basic, one deadline, and a bounded answer.
 */
export class WooCommerceApi {
  constructor(
    private readonly site: URL,
    private readonly keys: WooCommerceKeys,
    private readonly policy: OutboundPolicy,
  ) {}

  /** GETs a path under /wp-json/wc/v3, with the query given. */
  get(path: string, query: Record<string, string | number> = {}): Promise<unknown> {
    return this.call('GET', path, query);
  }

  post(path: string, body: unknown): Promise<unknown> {
    return this.call('POST', path, {}, body);
  }

  delete(path: string, query: Record<string, string | number> = {}): Promise<unknown> {
    return this.call('DELETE', path, query);
  }

  private async call(method: HopRequest['method'], path: string, query: Record<string, string | number>, body?: unknown): Promise<unknown> {
    const url = new URL(`${this.site.href.replace(/\/$/, '')}/wp-json/wc/v3${path}`);
    for (const [name, value] of Object.entries(query)) url.searchParams.set(name, String(value));
    const checked = checkDestination(url, this.policy);
    if ('refused' in checked) throw new WooCommerceError(`the site's address ${checked.refused}`, null);
    const text = body === undefined ? '' : JSON.stringify(body);
    const headers: Record<string, string> = {
      authorization: `Basic ${Buffer.from(`${this.keys.consumerKey}:${this.keys.consumerSecret}`).toString('base64')}`,
      accept: 'application/json',
      'user-agent': 'Restock (back-in-stock alerts)',
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    };
    let answer;
    try {
      answer = await exchange(checked.url, checked.host, { method, body: text, headers, keepBody: true, maxBodyBytes: MAX_BODY_BYTES }, this.policy, Date.now() + TIMEOUT_MS);
    } catch (err) {
      throw new WooCommerceError(`the site could not be reached: ${describeFailure(err, TIMEOUT_MS, false)}`, null, err instanceof ForbiddenDestination ? 'forbidden_destination' : null);
    }
    if (!answer.complete) throw new WooCommerceError(`the site's answer was over ${MAX_BODY_BYTES} bytes`, answer.statusCode);
    const parsed = jsonOf(answer.body.toString('utf8'));
    if (answer.statusCode < 200 || answer.statusCode >= 300) {
      const code = errorCodeOf(parsed);
      throw new WooCommerceError(`the site answered ${answer.statusCode}${code ? ` (${code})` : ''}`, answer.statusCode, code);
    }
    if (parsed === undefined) throw new WooCommerceError('the site answered with something that is not JSON', answer.statusCode);
    return parsed;
  }
}

/** WooCommerce's error code, when the body is its error shape and the code looks like one. */
function errorCodeOf(body: unknown): string | null {
  const code = typeof body === 'object' && body !== null ? (body as { code?: unknown }).code : undefined;
  return typeof code === 'string' && /^[a-z0-9_]{1,80}$/.test(code) ? code : null;
}
