import { setTimeout as sleep } from 'node:timers/promises';
import { HttpResponseError, type Session } from '@shopify/shopify-api';
import type { FastifyBaseLogger } from 'fastify';
import type { ShopifyConnections, StoredOfflineToken } from './connections.ts';
import { callShopify, offlineTokenOf, SHOPIFY_TIMEOUT_MS, UpstreamError, type ShopifyApi } from './shopify-api.ts';

/** A token is refreshed this long before it expires, so that a call begun just before expiry still gets through. */
export const REFRESH_MARGIN_MS = 5 * 60_000;
/** Longer than one refresh may take, so a lease outlasts its holder only when the holder died mid-refresh. */
const LEASE_MS = SHOPIFY_TIMEOUT_MS + 5_000;
/** How often a process waiting for another's refresh looks whether it is done. */
const WAIT_MS = 50;
/** The token endpoint's OAuth errors that mean the grant itself is dead, not that Shopify had a bad moment. */
const DEAD_GRANT_ERRORS = new Set(['invalid_grant', 'invalid_subject_token']);

/** Shopify refused the store's refresh token (or the token to migrate): only the merchant opening the app again helps. */
export class ReauthorizationRequired extends UpstreamError {
  override name = 'ReauthorizationRequired';

  constructor(shop: string) {
    super(`Shopify no longer accepts Restock's token for ${shop}; the store's owner must open Restock from the Shopify admin again`);
  }
}

/**
 * The stores' Admin API tokens, kept usable. Shopify's expiring offline tokens last an hour and
 * its refresh tokens are replaced at every refresh, so a refresh is done by one process at a
 * time, under a lease on the store's connection: the others wait for it and take the token it stored,
 * rather than spend a refresh token that is being replaced. A refresh also revokes the access
 * token before it, so two refreshes would leave one process holding a dead token.
 */
export class AccessTokens {
  constructor(
    private readonly shopify: ShopifyApi,
    private readonly connections: ShopifyConnections,
    private readonly log: FastifyBaseLogger,
  ) {}

  /**
   * A token to call the Admin API with now: refreshed first when it expires within the margin,
   * migrated to an expiring one first when it never expires (Shopify refuses those from
   * 2027-01-01). Undefined when the store has no token; ReauthorizationRequired, without asking
   * Shopify, once Shopify refused the store's refresh token.
   */
  async current(shop: string): Promise<string | undefined> {
    const token = await this.connections.offlineToken(shop);
    if (!token) return undefined;
    if (token.reauthorizationRequired) throw new ReauthorizationRequired(shop);
    if (token.expiring && Date.parse(token.expiring.expiresAt) - Date.now() > REFRESH_MARGIN_MS) return token.accessToken;
    return this.replace(shop, token);
  }

  /**
   * Shopify answered 401 to `rejected`: the token to try once more. Another process may already
   * have replaced it (then that one); otherwise it is refreshed now.
   */
  async afterRejection(shop: string, rejected: string): Promise<string> {
    const token = await this.stored(shop);
    if (token.accessToken !== rejected) return token.accessToken;
    return this.replace(shop, token);
  }

  /** `stale` replaced by a refreshed token: by this process if it gets the lease, else by the one holding it. */
  private async replace(shop: string, stale: StoredOfflineToken): Promise<string> {
    for (;;) {
      const claim = await this.connections.claimTokenRefresh(shop, stale.version, LEASE_MS);
      if (claim === 'claimed') return this.refresh(shop, stale);
      if (claim !== 'busy') return (await this.stored(shop)).accessToken;
      await sleep(WAIT_MS);
    }
  }

  /** Under the lease: trades the refresh token (or the non-expiring token) for a new pair and stores it. */
  private async refresh(shop: string, stale: StoredOfflineToken): Promise<string> {
    let session: Session;
    try {
      ({ session } = await this.exchange(shop, stale));
    } catch (err) {
      if (!isDeadGrant(err)) {
        // Shopify did not answer: the refresh token is still good and the next call tries again.
        await this.connections.releaseTokenRefresh(shop, stale.version);
        throw err;
      }
      await this.connections.markReauthorizationRequired(shop, stale.version);
      this.log.warn({ shop }, 'Shopify refused the store\'s refresh token; no Admin API call until the merchant opens the app again');
      throw new ReauthorizationRequired(shop);
    }
    const token = offlineTokenOf(session);
    if (!token) {
      await this.connections.releaseTokenRefresh(shop, stale.version);
      throw new UpstreamError('Refreshing the access token: Shopify\'s answer holds no offline token');
    }
    await this.connections.replaceOfflineToken(shop, stale.version, { ...token, scopes: token.scopes || stale.scopes });
    return token.accessToken;
  }

  private exchange(shop: string, stale: StoredOfflineToken): Promise<{ session: Session }> {
    if (stale.expiring) {
      const refreshToken = stale.expiring.refreshToken;
      return callShopify('Refreshing the access token', () => this.shopify.auth.refreshToken({ shop, refreshToken }));
    }
    return callShopify('Migrating to an expiring token', () =>
      this.shopify.auth.migrateToExpiringToken({ shop, nonExpiringOfflineAccessToken: stale.accessToken }),
    );
  }

  /** The store's token as stored now; fails when there is none to use. */
  private async stored(shop: string): Promise<StoredOfflineToken> {
    const token = await this.connections.offlineToken(shop);
    if (!token) throw new UpstreamError(`${shop} has no Admin API token (not installed, or uninstalled)`);
    if (token.reauthorizationRequired) throw new ReauthorizationRequired(shop);
    return token;
  }
}

/** The token endpoint's 400 with an OAuth error naming the grant (RFC 6749 §5.2), as opposed to an outage. */
function isDeadGrant(err: unknown): boolean {
  const cause = err instanceof UpstreamError ? err.cause : undefined;
  if (!(cause instanceof HttpResponseError) || cause.response.code !== 400) return false;
  const body = cause.response.body as { error?: unknown } | undefined;
  return typeof body?.error === 'string' && DEAD_GRANT_ERRORS.has(body.error);
}
