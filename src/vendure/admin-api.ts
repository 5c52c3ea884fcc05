import { checkDestination, checkTenantApiAddress } from '../core/net/destination.ts';
import { describeFailure, exchange } from '../core/net/http-post.ts';
import { ForbiddenDestination, type OutboundPolicy } from '../core/net/outbound-guard.ts';
import { jsonOf } from '../core/json.ts';

/** A page of 100 variants with their stock levels is a few hundred KB at most. */
const MAX_BODY_BYTES = 4 * 1024 * 1024;
const TIMEOUT_MS = 15_000;

/**
 * The server answered with an error, or could not be reached. `keyRefused` is Vendure's word that
 * the API key no longer works (deleted, or its role lost a permission): the connection then ends.
 */
export class VendureError extends Error {
  override name = 'VendureError';

  constructor(
    message: string,
    /** The HTTP status, or null when nothing came back. */
    readonly status: number | null,
    /** The GraphQL error's `extensions.code` (`FORBIDDEN`), when it gave one. */
    readonly code: string | null = null,
  ) {
    super(message);
  }

  get keyRefused(): boolean {
    return this.code === 'FORBIDDEN' || this.status === 401 || this.status === 403;
  }
}

/**
 * The Admin API's address as a merchant gives it (`https://shop.example.com/admin-api`): https,
 * or http to an address the operator allowed (a local server in development). No credentials,
 * query or fragment.
 */
export function parseAdminApiUrl(text: string, policy: OutboundPolicy): URL | string {
  return checkTenantApiAddress(text, policy, { what: 'the Admin API’s address', tls: 'the API key travels with every request' });
}

/**
 * Vendure's Admin API (GraphQL) for one server, with an API key (Vendure 3.6 and later,
 * `authOptions.tokenMethod` including `'api-key'`): every request through the outbound guard,
 * one deadline, a bounded answer.
 */
export class VendureAdminApi {
  constructor(
    private readonly endpoint: URL,
    private readonly apiKey: string,
    private readonly policy: OutboundPolicy,
  ) {}

  async query(document: string, variables: Record<string, unknown> = {}): Promise<unknown> {
    const checked = checkDestination(this.endpoint, this.policy);
    if ('refused' in checked) throw new VendureError(`the Admin API's address ${checked.refused}`, null);
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      accept: 'application/json',
      'vendure-api-key': this.apiKey,
      'user-agent': 'Restock (back-in-stock alerts)',
    };
    let answer;
    try {
      answer = await exchange(checked.url, checked.host, { method: 'POST', body: JSON.stringify({ query: document, variables }), headers, keepBody: true, maxBodyBytes: MAX_BODY_BYTES }, this.policy, Date.now() + TIMEOUT_MS);
    } catch (err) {
      throw new VendureError(`the Admin API could not be reached: ${describeFailure(err, TIMEOUT_MS, false)}`, null, err instanceof ForbiddenDestination ? 'forbidden_destination' : null);
    }
    if (!answer.complete) throw new VendureError(`the Admin API's answer was over ${MAX_BODY_BYTES} bytes`, answer.statusCode);
    const parsed = jsonOf(answer.body.toString('utf8')) as { data?: unknown; errors?: Array<{ extensions?: { code?: unknown } }> } | undefined;
    const code = errorCodeOf(parsed?.errors);
    if (answer.statusCode < 200 || answer.statusCode >= 300 || code !== null) {
      throw new VendureError(`the Admin API answered ${answer.statusCode}${code ? ` (${code})` : ''}`, answer.statusCode, code);
    }
    if (parsed === undefined || typeof parsed !== 'object' || parsed.data === undefined) throw new VendureError('the Admin API answered with something that is not GraphQL', answer.statusCode);
    return parsed.data;
  }
}

/** The first GraphQL error's code when it looks like one (Vendure's own words are not kept: they are the server's). */
function errorCodeOf(errors: unknown): string | null {
  if (!Array.isArray(errors) || errors.length === 0) return null;
  const code = (errors[0] as { extensions?: { code?: unknown } } | null)?.extensions?.code;
  return typeof code === 'string' && /^[A-Z0-9_]{1,80}$/.test(code) ? code : 'GRAPHQL_ERROR';
}
