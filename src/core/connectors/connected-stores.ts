import type { FastifyBaseLogger } from 'fastify';
import type { StockReport, StockSource } from '../../inventory/service.ts';
import { nowIso } from '../clock.ts';
import { webhookIdsOf, type ConnectionRepository, type ConnectionRow } from './connections.ts';

export interface ConnectedStoresDeps {
  connections: ConnectionRepository;
  stores: { uninstall(domain: string): Promise<void> };
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

/**
 * The part of a connector that is the same on every platform keeping its credentials in
 * `store_connections`: which stores are due a reconciliation, the reconciliation's course, and the
 * end of a connection. What differs (reading the platform, knowing a refused credential) is passed in.
 */
export class ConnectedStores {
  constructor(private readonly deps: ConnectedStoresDeps) {}

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
