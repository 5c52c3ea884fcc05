import { checkDestination } from '../core/net/destination.ts';
import { describeFailure, exchange } from '../core/net/http-post.ts';
import type { OutboundPolicy } from '../core/net/outbound-guard.ts';

/**
 * The API revision every call names (`revision` header, required by Klaviyo): the current one
 * when this was written, https://developers.klaviyo.com/en/reference/create_event (revision
 * 2026-10-15). The bodies below follow that revision's reference.
 */
export const KLAVIYO_REVISION = '2026-10-15';

const TIMEOUT_MS = 10_000;

/** What one call came to: Klaviyo's status (null when no answer came), its JSON:API `errors` codes, and our words for a failure. */
export interface KlaviyoAnswer {
  status: number | null;
  /** The body, parsed, when it was JSON. */
  body: unknown;
  /** Set when no answer came (refused destination, timeout, connection error). */
  failure: string | null;
}

/**
 * Klaviyo's REST API with a store's private key: `Authorization: Klaviyo-API-Key <key>`, the
 * pinned revision, JSON:API bodies (https://developers.klaviyo.com/en/docs/authenticate_,
 * https://developers.klaviyo.com/en/docs/api_versioning_and_deprecation_policy). Every call goes
 * through the outbound guard: the origin is fixed by the operator, but a store's traffic is still
 * a tenant's, and the tests' loopback stand-in is allowed only where the allow-list says so.
 */
export class KlaviyoApi {
  constructor(
    private readonly apiUrl: string,
    private readonly policy: OutboundPolicy,
  ) {}

  /** GET /api/accounts: the key works and names its account (https://developers.klaviyo.com/en/reference/get_accounts). */
  accounts(key: string): Promise<KlaviyoAnswer> {
    return this.call('GET', '/api/accounts', key, '');
  }

  /** POST /api/events: one event on a profile; 202 with no body (https://developers.klaviyo.com/en/reference/create_event). */
  createEvent(key: string, body: string): Promise<KlaviyoAnswer> {
    return this.call('POST', '/api/events', key, body);
  }

  private async call(method: 'GET' | 'POST', path: string, key: string, body: string): Promise<KlaviyoAnswer> {
    const destination = checkDestination(`${this.apiUrl}${path}`, this.policy);
    if ('refused' in destination) return { status: null, body: undefined, failure: `Klaviyo's address ${destination.refused}` };
    const headers: Record<string, string> = {
      authorization: `Klaviyo-API-Key ${key}`,
      revision: KLAVIYO_REVISION,
      accept: 'application/vnd.api+json',
      'user-agent': 'Restock/1.0',
    };
    if (method === 'POST') headers['content-type'] = 'application/vnd.api+json';
    try {
      const hop = await exchange(destination.url, destination.host, { method, body, headers, keepBody: true }, this.policy, Date.now() + TIMEOUT_MS);
      let parsed: unknown;
      try {
        parsed = hop.body.length > 0 ? JSON.parse(hop.body.toString('utf8')) : undefined;
      } catch {
        parsed = undefined;
      }
      return { status: hop.statusCode, body: parsed, failure: null };
    } catch (err) {
      return { status: null, body: undefined, failure: describeFailure(err, TIMEOUT_MS, false) };
    }
  }
}

/** The `code`s of a JSON:API error answer (Klaviyo's: `{errors: [{status, code, title, detail, source}]}`), never its prose. */
export function errorCodes(body: unknown): string[] {
  const errors = (body as { errors?: unknown } | undefined)?.errors;
  if (!Array.isArray(errors)) return [];
  return errors.flatMap((error) => {
    const code = (error as { code?: unknown }).code;
    return typeof code === 'string' && /^[a-z0-9_]{1,60}$/.test(code) ? [code] : [];
  });
}
