import { randomBytes } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import type { StockReport, StockSource } from './stock-report.ts';
import { nowIso } from '../clock.ts';
import type { SecretBox } from '../sealed-secrets.ts';
import { sameSecret } from '../secrets.ts';
import { webhookIdsOf, type ConnectionRepository, type ConnectionRow } from './connections.ts';

export interface ConnectedStoresDeps {
  connections: ConnectionRepository;
  stores: { markConnected(domain: string): Promise<void>; uninstall(domain: string): Promise<void> };
  secrets: SecretBox;
  inventory: { reportStock(storeDomain: string, reports: StockReport[], source: StockSource): Promise<unknown> };
  log: FastifyBaseLogger;
}

/** What every platform's connection shows its store's agents; each platform adds where the store lives. */
export interface ConnectionView {
  storeDomain: string;
  status: 'connected' | 'disconnected';
  webhookIds: number[];
  connectedAt: string;
  disconnectedAt: string | null;
  disconnectReason: string | null;
  reconciledAt: string | null;
}

/** What a connection is made of once the platform took it: where the store lives, what its API takes, the webhooks made there. */
export interface NewConnection {
  site: string;
  /** WooCommerce's keys, BigCommerce's token: kept sealed, given back by `credentialsOf`. */
  credentials: unknown;
  /** The secret the webhooks prove themselves with (`newWebhookSecret`). */
  webhookSecret: string;
  webhookIds: number[];
}

/** A secret of 32 random bytes for a connection's webhooks. */
export function newWebhookSecret(): string {
  return randomBytes(32).toString('base64url');
}

/**
 * The part of a connector that is the same on every platform keeping its credentials in
 * `store_connections`: the connection's record (sealed), which stores are due a reconciliation, the
 * reconciliation's course, and the end of a connection. What differs (reading the platform,
 * knowing a refused credential) is passed in.
 */
export class ConnectedStores {
  constructor(private readonly deps: ConnectedStoresDeps) {}

  /** Records the store's connection, made anew if it had one, and marks the store connected: it sends again. */
  async connect(store: string, connection: NewConnection): Promise<ConnectionRow> {
    const now = nowIso();
    const row = await this.deps.connections.save({
      store_domain: store,
      site: connection.site,
      status: 'connected',
      credentials_sealed: await this.deps.secrets.seal(JSON.stringify(connection.credentials)),
      webhook_secret_sealed: await this.deps.secrets.seal(connection.webhookSecret),
      webhook_ids: JSON.stringify(connection.webhookIds),
      connected_at: now,
      disconnected_at: null,
      disconnect_reason: null,
      reconciled_at: null,
      updated_at: now,
    });
    await this.deps.stores.markConnected(store);
    this.deps.log.info({ store, platform: this.deps.connections.platform, webhooks: connection.webhookIds.length }, 'store connected to its platform');
    return row;
  }

  /** The credentials a connected store's row keeps, unsealed (the platform's own schema reads them). */
  async credentialsOf(row: ConnectionRow): Promise<unknown> {
    if (row.credentials_sealed === null) throw new Error(`${row.store_domain} is disconnected: its credentials are forgotten.`);
    return JSON.parse(await this.deps.secrets.open(row.credentials_sealed));
  }

  /** Whether `given` is the connection's webhook secret. */
  async webhookSecretIs(row: ConnectionRow, given: string): Promise<boolean> {
    return row.webhook_secret_sealed !== null && sameSecret(given, await this.webhookSecretOf(row));
  }

  /** The connection's webhook secret, for checking a signature made with it. */
  webhookSecretOf(row: ConnectionRow): Promise<string> {
    if (row.webhook_secret_sealed === null) throw new Error(`${row.store_domain}'s connection has no webhook secret of its own.`);
    return this.deps.secrets.open(row.webhook_secret_sealed);
  }

  async storesToReconcile(intervalMs: number, limit: number): Promise<string[]> {
    return (await this.deps.connections.due(new Date(Date.now() - intervalMs).toISOString(), limit)).map((row) => row.store_domain);
  }

  /**
   * Reads the store's products as the platform has them (`read`) and reports them: what a missed or
   * late webhook left behind. A credential the platform refuses (`refusal` names why) ends the
   * connection. The store is marked reconciled whatever came of it.
   */
  async reconcile(domain: string, read: (row: ConnectionRow) => Promise<StockReport[]>, refusal: (err: unknown) => string | undefined): Promise<number> {
    const row = await this.deps.connections.find(domain.toLowerCase());
    if (!row || row.status !== 'connected') return 0;
    let reports: StockReport[];
    try {
      reports = await read(row);
    } catch (err) {
      const reason = refusal(err);
      if (reason === undefined) throw err;
      await this.end(row.store_domain, reason);
      return 0;
    } finally {
      await this.deps.connections.markReconciled(row.store_domain, nowIso());
    }
    if (reports.length > 0) await this.deps.inventory.reportStock(row.store_domain, reports, { kind: 'reconciliation', ref: `reconciliation ${reports[0]!.updatedAt}`, verified: true });
    return reports.length;
  }

  /** Nothing more is sent for the store, and its platform's deliveries are refused. */
  async end(store: string, reason: string): Promise<void> {
    if (await this.deps.connections.disconnect(store, reason, nowIso())) {
      await this.deps.stores.uninstall(store);
      this.deps.log.info({ store, platform: this.deps.connections.platform, reason }, 'store disconnected from its platform');
    }
  }
}

export function connectionView(row: ConnectionRow): ConnectionView {
  return {
    storeDomain: row.store_domain,
    status: row.status,
    webhookIds: webhookIdsOf(row),
    connectedAt: row.connected_at,
    disconnectedAt: row.disconnected_at,
    disconnectReason: row.disconnect_reason,
    reconciledAt: row.reconciled_at,
  };
}
