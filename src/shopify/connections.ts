import { isoAfter, nowIso } from '../core/clock.ts';
import type { ConnectionRepository, RefreshableCredentials, RefreshClaim } from '../core/connectors/connections.ts';
import type { SecretBox } from '../core/sealed-secrets.ts';
import type { Store } from '../stores/schemas.ts';
import type { StoreService } from '../stores/service.ts';

/** What Shopify's connections do to a store: install it, uninstall it, forget it. */
export type ConnectionStores = Pick<StoreService, 'installApp' | 'uninstall' | 'forgetStore'>;

/**
 * An offline Admin API token as Shopify handed it over. An expiring one lasts an hour and
 * comes with a refresh token; one without `expiring` never expires (stores installed before
 * expiring tokens hold one until it is migrated).
 */
export interface OfflineToken {
  accessToken: string;
  scopes: string;
  expiring?: { expiresAt: string; refreshToken: string; refreshTokenExpiresAt: string };
}

/** The store's offline token as stored, opened. */
export interface StoredOfflineToken extends OfflineToken {
  /** Shopify refused the refresh token: nothing may be asked of Shopify until the merchant opens the app again. */
  reauthorizationRequired: boolean;
  /** Different for every token stored (it is the sealed token): what a refresh of this token claims. */
  version: string;
}

/** Why a Shopify store's connection ends. */
const UNINSTALLED = 'uninstalled';

/**
 * The Shopify stores' connections (`store_connections`, platform `shopify`): the offline token
 * sealed as the connection's credentials, with its expiry, its refresh token, the refresh lease
 * and the mark that Shopify refused it; the scopes granted; when the store was last reconciled.
 * The store itself (its owner, whether it is installed) stays the stores feature's.
 */
export class ShopifyConnections {
  constructor(
    private readonly connections: ConnectionRepository,
    private readonly stores: ConnectionStores,
    private readonly secrets: SecretBox,
  ) {}

  /**
   * A Shopify installation (OAuth or token exchange) completed: the store kept, active and owned
   * by `ownerEmail`, and its sealed offline token as its connection. A new token ends any wait
   * for the merchant and any refresh under way with the old one.
   */
  async install(shop: string, install: OfflineToken & { ownerEmail: string }): Promise<Store> {
    const domain = shop.toLowerCase();
    const now = nowIso();
    await this.connections.save({
      store_domain: domain,
      site: domain,
      status: 'connected',
      credentials_sealed: await this.secrets.seal(install.accessToken),
      ...(await this.sealRefreshable(install)),
      webhook_secret_sealed: null,
      webhook_ids: '[]',
      connected_at: now,
      disconnected_at: null,
      disconnect_reason: null,
      reconciled_at: (await this.connections.find(domain))?.reconciled_at ?? null,
      updated_at: now,
    });
    return this.stores.installApp(domain, install.ownerEmail, 'shopify');
  }

  /** The store's offline token, when the store is installed and connected; undefined otherwise. */
  async offlineToken(shop: string): Promise<StoredOfflineToken | undefined> {
    const row = await this.connections.find(shop.toLowerCase());
    if (!row || row.status !== 'connected' || !row.credentials_sealed) return undefined;
    const expiring =
      row.credentials_expire_at && row.refresh_credentials_sealed && row.refresh_credentials_expire_at
        ? { expiresAt: row.credentials_expire_at, refreshToken: await this.secrets.open(row.refresh_credentials_sealed), refreshTokenExpiresAt: row.refresh_credentials_expire_at }
        : undefined;
    return {
      accessToken: await this.secrets.open(row.credentials_sealed),
      scopes: row.scopes ?? '',
      ...(expiring && { expiring }),
      reauthorizationRequired: row.reauthorization_required_at !== null,
      version: row.credentials_sealed,
    };
  }

  /** The scopes the store granted the app, as Shopify lists them (kept after an uninstall); empty when none are known. */
  async scopesOf(shop: string): Promise<string> {
    return (await this.connections.find(shop.toLowerCase()))?.scopes ?? '';
  }

  /** Takes the lease to refresh the token `version` for `leaseMs`; see ConnectionRepository.claimRefresh. */
  claimTokenRefresh(shop: string, version: string, leaseMs: number): Promise<RefreshClaim> {
    return this.connections.claimRefresh(shop.toLowerCase(), version, nowIso(), isoAfter(leaseMs));
  }

  /** The token that replaces `version` (refreshed or migrated), stored as one write; the lease ends. */
  async replaceOfflineToken(shop: string, version: string, token: OfflineToken): Promise<void> {
    const changes = { credentials_sealed: await this.secrets.seal(token.accessToken), ...(await this.sealRefreshable(token)) };
    await this.connections.endRefresh(shop.toLowerCase(), version, changes, nowIso());
  }

  /** A refresh of `version` that came to nothing (Shopify did not answer): the lease ends, the token stays. */
  releaseTokenRefresh(shop: string, version: string): Promise<void> {
    return this.connections.endRefresh(shop.toLowerCase(), version, {}, nowIso());
  }

  /**
   * Shopify refused to refresh the token `version`: the store stays installed with its data, and
   * nothing is asked of Shopify for it until the merchant opens the app again (a new token).
   */
  markReauthorizationRequired(shop: string, version: string): Promise<void> {
    const now = nowIso();
    return this.connections.endRefresh(shop.toLowerCase(), version, { reauthorization_required_at: now }, now);
  }

  /** `app/uninstalled`: the store stops sending and its tokens are dropped (its data stays until `shop/redact`). */
  async uninstall(shop: string): Promise<void> {
    const domain = shop.toLowerCase();
    await this.stores.uninstall(domain);
    await this.connections.disconnect(domain, UNINSTALLED, nowIso());
  }

  /** `shop/redact`: the connection and the store row go (its subscriptions and alerts are erased by their features). */
  async forget(shop: string): Promise<void> {
    const domain = shop.toLowerCase();
    await this.connections.remove(domain);
    await this.stores.forgetStore(domain);
  }

  /** Connected stores whose token Shopify has not refused, not reconciled within `intervalMs`, least recently reconciled first. */
  async storesToReconcile(intervalMs: number, limit: number): Promise<string[]> {
    return (await this.connections.due(new Date(Date.now() - intervalMs).toISOString(), limit)).map((row) => row.store_domain);
  }

  async markReconciled(shop: string): Promise<void> {
    await this.connections.markReconciled(shop.toLowerCase(), nowIso());
  }

  private async sealRefreshable(token: OfflineToken): Promise<Omit<RefreshableCredentials, 'refresh_lease_until' | 'reauthorization_required_at'>> {
    return {
      scopes: token.scopes,
      credentials_expire_at: token.expiring?.expiresAt ?? null,
      refresh_credentials_sealed: token.expiring ? await this.secrets.seal(token.expiring.refreshToken) : null,
      refresh_credentials_expire_at: token.expiring?.refreshTokenExpiresAt ?? null,
    };
  }
}
