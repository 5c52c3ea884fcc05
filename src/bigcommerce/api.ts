import { z } from 'zod';
import { jsonOf } from '../core/json.ts';

/** BigCommerce's own hosts: fixed, never taken from a request, so no tenant's address is ever dialled. */
export const LOGIN_ORIGIN = 'https://login.bigcommerce.com';
export const API_ORIGIN = 'https://api.bigcommerce.com';
const TIMEOUT_MS = 15_000;
/** A page of products with their variants stays well under this. */
const MAX_BODY_BYTES = 8 * 1024 * 1024;

/** A BigCommerce store's domain in this service: the permanent address BigCommerce gives every store. */
export function storeDomainOf(hash: string): string {
  return `store-${hash}.mybigcommerce.com`;
}

/** The store hash in a `stores/{hash}` context, or undefined when it is not one. */
export function hashOfContext(context: string): string | undefined {
  const match = /^stores\/([a-z0-9]{1,32})$/.exec(context);
  return match?.[1];
}

/**
 * BigCommerce answered with an error (its `{status, title, type, errors}` shape: only the status
 * and the title are kept), or could not be reached (status null).
 */
export class BigCommerceError extends Error {
  override name = 'BigCommerceError';

  constructor(
    message: string,
    readonly status: number | null,
  ) {
    super(message);
  }

  /** The access token no longer works: the app was uninstalled, or the token revoked. */
  get tokenRefused(): boolean {
    return this.status === 401 || this.status === 403;
  }
}

/** What the token endpoint answers to an authorization code. */
export const grantSchema = z.object({
  access_token: z.string().min(1),
  scope: z.string(),
  context: z.string(),
  user: z.object({ id: z.number(), email: z.string() }),
  owner: z.object({ id: z.number(), email: z.string() }).optional(),
  account_uuid: z.string().optional(),
});
export type Grant = z.infer<typeof grantSchema>;

/**
 * Trades the one-time code of an install for the store's access token (OAuth authorization code
 * at login.bigcommerce.com/oauth2/token); the token does not expire.
 */
export async function exchangeCode(app: { clientId: string; clientSecret: string }, callback: { code: string; scope: string; context: string; redirectUri: string }): Promise<Grant> {
  const body = new URLSearchParams({
    client_id: app.clientId,
    client_secret: app.clientSecret,
    code: callback.code,
    scope: callback.scope,
    context: callback.context,
    grant_type: 'authorization_code',
    redirect_uri: callback.redirectUri,
  });
  const answer = await send(`${LOGIN_ORIGIN}/oauth2/token`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' }, body: body.toString() });
  const grant = grantSchema.safeParse(answer);
  if (!grant.success) throw new BigCommerceError(`the token endpoint answered without ${grant.error.issues[0]!.path.join('.') || 'a grant'}`, 200);
  return grant.data;
}

/** The REST API of one store (`api.bigcommerce.com/stores/{hash}`), with its access token. */
export class StoreApi {
  constructor(
    readonly hash: string,
    private readonly accessToken: string,
    private readonly clientId: string,
  ) {}

  get(path: string, query: Record<string, string | number> = {}): Promise<unknown> {
    return this.call('GET', path, query);
  }

  post(path: string, body: unknown): Promise<unknown> {
    return this.call('POST', path, {}, body);
  }

  delete(path: string): Promise<unknown> {
    return this.call('DELETE', path, {});
  }

  private call(method: string, path: string, query: Record<string, string | number>, body?: unknown): Promise<unknown> {
    const url = new URL(`${API_ORIGIN}/stores/${this.hash}${path}`);
    for (const [name, value] of Object.entries(query)) url.searchParams.set(name, String(value));
    return send(url.href, {
      method,
      headers: {
        'x-auth-token': this.accessToken,
        'x-auth-client': this.clientId,
        accept: 'application/json',
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
  }
}

/** One call: a deadline, a bounded answer, BigCommerce's error shape read. A 204 answers undefined. */
async function send(url: string, init: RequestInit): Promise<unknown> {
  let response: Response;
  let text: string;
  try {
    response = await fetch(url, { ...init, redirect: 'error', signal: AbortSignal.timeout(TIMEOUT_MS) });
    text = await boundedText(response);
  } catch (err) {
    throw new BigCommerceError(`BigCommerce could not be reached: ${(err as Error).name === 'TimeoutError' ? `no answer within ${TIMEOUT_MS / 1000} s` : (err as Error).message}`, null);
  }
  const parsed = jsonOf(text);
  if (!response.ok) {
    const title = titleOf(parsed);
    throw new BigCommerceError(`BigCommerce answered ${response.status}${title ? ` (${title})` : ''}`, response.status);
  }
  if (response.status === 204 || text === '') return undefined;
  if (parsed === undefined) throw new BigCommerceError('BigCommerce answered with something that is not JSON', response.status);
  return parsed;
}

async function boundedText(response: Response): Promise<string> {
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of response.body ?? []) {
    size += chunk.byteLength;
    if (size > MAX_BODY_BYTES) throw new Error(`the answer was over ${MAX_BODY_BYTES} bytes`);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** The `title` of BigCommerce's error body (v3), or the `message` of its v2/OAuth errors, when short. */
function titleOf(body: unknown): string | undefined {
  const first = Array.isArray(body) ? body[0] : body;
  if (typeof first !== 'object' || first === null) return undefined;
  const { title, message, error } = first as { title?: unknown; message?: unknown; error?: unknown };
  const text = [title, message, error].find((value): value is string => typeof value === 'string');
  return text?.slice(0, 200);
}
