import '@shopify/shopify-api/adapters/node';
import {
  GraphqlQueryError,
  HttpResponseError,
  LogSeverity,
  Session,
  shopifyApi,
  type ApiVersion,
  type Shopify,
} from '@shopify/shopify-api';
import type { FastifyBaseLogger } from 'fastify';
import type { ShopifyConfig } from './settings.ts';
import { Problem } from '../core/problems.ts';
import type { OfflineToken } from './connections.ts';

export type ShopifyApi = Shopify;

/** How long one call to Shopify may take before we give up on it. */
export const SHOPIFY_TIMEOUT_MS = 10_000;

/**
 * The official library, configured for this service. Its Node adapter uses the global `fetch`,
 * so every call to Shopify goes out through Node's HTTP client like any other.
 */
export function createShopifyApi(config: ShopifyConfig, baseUrl: string, log: FastifyBaseLogger): ShopifyApi {
  const origin = new URL(baseUrl);
  return shopifyApi({
    apiKey: config.apiKey,
    apiSecretKey: config.apiSecret,
    apiVersion: config.apiVersion as ApiVersion,
    scopes: config.scopes,
    hostName: origin.host,
    hostScheme: origin.protocol === 'http:' ? 'http' : 'https',
    isEmbeddedApp: true,
    logger: { level: LogSeverity.Info, log: libraryLogger(log) },
  });
}

/**
 * The library's notices go into our JSON logs. Its "info" is chatty (its version, every OAuth
 * step), so it is debug here; its warnings and errors keep their level.
 */
function libraryLogger(log: FastifyBaseLogger) {
  const child = log.child({ module: 'shopify-api' });
  return async (severity: LogSeverity, message: string) => {
    if (severity === LogSeverity.Error) child.error(message);
    else if (severity === LogSeverity.Warning) child.warn(message);
    else child.debug(message);
  };
}

/** An offline session around a stored token, for the library's Admin API client. */
export function offlineSession(shopify: ShopifyApi, shop: string, accessToken: string): Session {
  return new Session({ id: shopify.session.getOfflineId(shop), shop, state: '', isOnline: false, accessToken });
}

/**
 * The offline token a session from the library holds (OAuth, token exchange, refresh or
 * migration), with its refresh token when it expires; undefined for an online session or none.
 */
export function offlineTokenOf(session: Session): OfflineToken | undefined {
  if (session.isOnline || !session.accessToken) return undefined;
  const { expires, refreshToken, refreshTokenExpires } = session;
  return {
    accessToken: session.accessToken,
    scopes: session.scope ?? '',
    ...(expires &&
      refreshToken &&
      refreshTokenExpires && { expiring: { expiresAt: expires.toISOString(), refreshToken, refreshTokenExpiresAt: refreshTokenExpires.toISOString() } }),
  };
}

/** A failed call to Shopify (its answer, its GraphQL errors, the network, a timeout): callers answer 502 or retry. */
export class UpstreamError extends Error {
  override name = 'UpstreamError';
}

/**
 * Runs one call to Shopify through the library. Whatever it throws is Shopify's failure, not
 * ours, and becomes an UpstreamError; a call that hangs is abandoned after SHOPIFY_TIMEOUT_MS
 * (the library's token requests take no abort signal, so the wait is bounded here).
 */
export async function callShopify<T>(what: string, work: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const controller = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      controller.abort();
      reject(new UpstreamError(`${what}: Shopify did not answer within ${SHOPIFY_TIMEOUT_MS} ms`));
    }, SHOPIFY_TIMEOUT_MS);
  });
  try {
    return await Promise.race([work(controller.signal), timeout]);
  } catch (err) {
    // Our own verdicts (a refused callback) pass through as they are.
    if (err instanceof UpstreamError || err instanceof Problem) throw err;
    throw new UpstreamError(`${what}: ${describeFailure(err)}`, { cause: err });
  } finally {
    clearTimeout(timer);
  }
}

/** Shopify answered 401: the access token is expired, revoked or unknown to it. */
export function isUnauthorized(err: unknown): boolean {
  return err instanceof UpstreamError && err.cause instanceof HttpResponseError && err.cause.response.code === 401;
}

/** The 502 answered when Shopify's API failed; nothing was stored. */
export function upstreamProblem(err: UpstreamError): Problem {
  return new Problem('upstream-failed', `${err.message}. Nothing was stored; try again.`);
}

/** A short reason, safe to show and log: the status and Shopify's first message, never a token. */
function describeFailure(err: unknown): string {
  if (err instanceof HttpResponseError) return `HTTP ${err.response.code} ${err.response.statusText ?? ''}`.trim();
  if (err instanceof GraphqlQueryError) return `GraphQL error: ${truncate(err.message)}`;
  if (err instanceof Error) return truncate(err.cause instanceof Error ? `${err.message} (${err.cause.message})` : err.message);
  return 'unknown error';
}

function truncate(text: string): string {
  const line = text.split('\n')[0] ?? '';
  return line.length > 200 ? `${line.slice(0, 197)}...` : line;
}
