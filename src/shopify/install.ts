import type { IncomingMessage } from 'node:http';
import {
  AuthScopes,
  BotActivityDetected,
  CookieNotFound,
  InvalidHmacError,
  InvalidJwtError,
  InvalidOAuthError,
  InvalidShopError,
  RequestedTokenType,
  type Session,
} from '@shopify/shopify-api';
import type { FastifyBaseLogger } from 'fastify';
import { Problem } from '../core/problems.ts';
import { shopifyShopSchema } from '../stores/schemas.ts';
import type { AdminApi } from './admin-api.ts';
import type { ShopifyConnections } from './connections.ts';
import { callShopify, offlineTokenOf, UpstreamError, upstreamProblem, type ShopifyApi } from './shopify-api.ts';

export const CALLBACK_PATH = '/shopify/callback';

export interface InstallResult {
  shop: string;
  scopes: string;
}

/**
 * Stands in for Node's ServerResponse when the library writes an answer (the OAuth redirect, its
 * cookies), so Fastify still sends the reply itself: its hooks, request id and error handling
 * then apply as to any other route.
 */
export class CapturedResponse {
  statusCode = 200;
  statusMessage = '';
  body = '';
  private readonly headers: Record<string, string | string[]> = {};

  getHeaders(): Record<string, string | string[]> {
    return { ...this.headers };
  }

  setHeader(name: string, value: string | string[]): void {
    this.headers[name.toLowerCase()] = value;
  }

  write(chunk: string): void {
    this.body += chunk;
  }

  end(): void {}

  headerEntries(): Array<[string, string | string[]]> {
    return Object.entries(this.headers);
  }
}

/**
 * Installing the app on a store, by OAuth or by token exchange, through the library. Either way
 * asks for an expiring offline token (required of public apps) and ends the same: the owner's
 * address is obtained from Shopify first, and the store with its sealed tokens is stored last,
 * so a failure at Shopify leaves nothing behind. Webhooks are declared in the app's
 * configuration, not subscribed per store.
 */
export class ShopifyInstaller {
  constructor(
    private readonly shopify: ShopifyApi,
    private readonly admin: AdminApi,
    private readonly connections: ShopifyConnections,
    private readonly log: FastifyBaseLogger,
  ) {}

  /** OAuth step 1: the library signs a state cookie and redirects to Shopify's grant screen. */
  async beginOAuth(shop: string, rawRequest: IncomingMessage): Promise<CapturedResponse> {
    const response = new CapturedResponse();
    await this.shopify.auth.begin({ shop, callbackPath: CALLBACK_PATH, isOnline: false, rawRequest, rawResponse: response });
    return response;
  }

  /**
   * OAuth step 2: the library checks the state cookie and the HMAC Shopify put on the query,
   * then trades the code for an expiring offline token. `response` receives the cookie it clears.
   */
  async installWithOAuth(rawRequest: IncomingMessage, response: CapturedResponse): Promise<InstallResult> {
    const { session } = await this.upstream(() =>
      callShopify('Completing OAuth', async () => {
        try {
          return await this.shopify.auth.callback({ rawRequest, rawResponse: response, expiring: true });
        } catch (err) {
          if (isOAuthRejection(err)) {
            throw new Problem('forbidden', 'This install callback could not be verified (its state cookie or signature is missing, expired or wrong). Start the install again.');
          }
          throw err;
        }
      }),
    );
    return this.completeInstall(session);
  }

  /**
   * The embedded app opening in the admin with its session token (`id_token`): installs the
   * store by token exchange unless it is already connected with every scope asked for.
   */
  async openEmbedded(sessionToken: string, shop: string): Promise<void> {
    if ((await this.shopOfSessionToken(sessionToken)) !== shop) throw invalidSessionToken('it is for another store');
    if (!(await this.isConnected(shop))) await this.installWithTokenExchange(sessionToken);
  }

  /**
   * Connected: active, with an expiring token that Shopify has not refused and that holds every
   * scope the app asks for. Opening the app otherwise gets a new token: that is how a refused
   * refresh token is recovered, and how a non-expiring token is replaced without waiting for
   * its first use.
   */
  async isConnected(shop: string): Promise<boolean> {
    const token = await this.connections.offlineToken(shop);
    if (!token?.expiring || token.reauthorizationRequired) return false;
    return new AuthScopes(token.scopes).has(this.shopify.config.scopes);
  }

  /** Whether Shopify signed this query (as when it opens the app URL), within the library's 90 s. */
  async isSignedByShopify(query: Record<string, string>): Promise<boolean> {
    try {
      return await this.shopify.utils.validateHmac(query);
    } catch {
      return false;
    }
  }

  /** An embedded app's session token (App Bridge) traded for an expiring offline token, without a redirect. */
  async installWithTokenExchange(sessionToken: string): Promise<InstallResult> {
    const shop = await this.shopOfSessionToken(sessionToken);
    const { session } = await this.upstream(() =>
      callShopify('Exchanging the session token', () =>
        this.shopify.auth.tokenExchange({ shop, sessionToken, requestedTokenType: RequestedTokenType.OfflineAccessToken, expiring: true }),
      ),
    );
    return this.completeInstall(session);
  }

  private async completeInstall(session: Session): Promise<InstallResult> {
    const shop = shopifyShopSchema.safeParse(session.shop.toLowerCase());
    const token = offlineTokenOf(session);
    if (!shop.success || !token) {
      throw new Problem('upstream-failed', 'Shopify did not hand over an offline token for a myshopify.com store. Nothing was stored.');
    }
    const ownerEmail = await this.upstream(() => this.admin.shopEmail(shop.data, token.accessToken));
    await this.connections.install(shop.data, { ...token, ownerEmail });
    this.log.info({ shop: shop.data, scopes: token.scopes, expiring: token.expiring !== undefined }, 'Shopify app installed');
    return { shop: shop.data, scopes: token.scopes };
  }

  /**
   * The store a session token speaks for. The library checks the signature (the app's secret),
   * expiry and audience (the app's key); the issuer must be the same store's admin.
   */
  async shopOfSessionToken(sessionToken: string): Promise<string> {
    let payload: Awaited<ReturnType<ShopifyApi['session']['decodeSessionToken']>>;
    try {
      payload = await this.shopify.session.decodeSessionToken(sessionToken);
    } catch (err) {
      if (err instanceof InvalidJwtError) throw invalidSessionToken('it is not signed for this app, or has expired');
      throw err;
    }
    const dest = hostOf(payload.dest);
    const shop = shopifyShopSchema.safeParse(dest);
    if (!shop.success) throw invalidSessionToken('its destination is not a myshopify.com store');
    if (hostOf(payload.iss) !== dest) throw invalidSessionToken('its issuer is not the store it is for');
    return shop.data;
  }

  private async upstream<T>(work: () => Promise<T>): Promise<T> {
    try {
      return await work();
    } catch (err) {
      if (err instanceof UpstreamError) {
        this.log.warn({ err }, 'Shopify install failed at Shopify');
        throw upstreamProblem(err);
      }
      throw err;
    }
  }
}

function isOAuthRejection(err: unknown): boolean {
  return [CookieNotFound, InvalidOAuthError, InvalidHmacError, BotActivityDetected, InvalidShopError].some((kind) => err instanceof kind);
}

function invalidSessionToken(why: string): Problem {
  return new Problem('invalid-token', `The Shopify session token was refused: ${why}. Send a fresh one from App Bridge.`);
}

function hostOf(url: unknown): string | undefined {
  if (typeof url !== 'string') return undefined;
  try {
    return new URL(url).hostname.toLowerCase();
  } catch {
    return undefined;
  }
}
