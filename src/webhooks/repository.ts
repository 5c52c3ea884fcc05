import { sql } from 'kysely';
import type { Database, Trx } from '../core/db/database.ts';
import { lockRows } from '../core/db/locking.ts';
import type { ChangeBus } from '../core/changes/bus.ts';
import { ChangeCache } from '../core/changes/cache.ts';
import { newId } from '../core/ids.ts';
import type { WebhookAttemptsTable, WebhookDeliveriesTable, WebhookEndpointsTable } from '../core/db/schema.ts';

export type EndpointRow = WebhookEndpointsTable;
/** A subscription's callback with what routing needs of its endpoint. */
export type DeliveryRow = WebhookDeliveriesTable;
export type AttemptRow = WebhookAttemptsTable;

/** A delivery of `payload` to an endpoint, queued now and due at once. */
export function pendingDelivery(delivery: Pick<DeliveryRow, 'endpoint_id' | 'store_domain' | 'event_id' | 'event_type' | 'payload'>, now: string): DeliveryRow {
  return { id: newId('whd'), ...delivery, status: 'pending', attempts: 0, next_attempt_at: now, last_error: null, created_at: now, finished_at: null };
}

/** A delivery as a worker claimed it, with what it needs of its endpoint (absent: deleted since). */
export interface ClaimedDelivery {
  delivery: DeliveryRow;
  endpoint: Pick<EndpointRow, 'id' | 'url' | 'secret_sealed' | 'enabled' | 'kind' | 'agent_id'> | undefined;
}

/** How a claimed delivery's attempt ended, as the delivery will record it. */
export interface SettledAttempt {
  attempt: AttemptRow;
  delivered: boolean;
  /** Pending with a retry time, or finished. */
  next: { status: 'pending'; nextAttemptAt: string } | { status: 'delivered' | 'failed' };
}

/** The endpoint's run of failures once an attempt is counted; undefined when the claim was lost. */
export interface FailureRun {
  consecutiveFailures: number;
  failingSince: string | null;
  enabled: boolean;
}

/** Deliveries and their log beyond these are dropped by `prune`. */
export interface Retention {
  before: string;
  keepPerEndpoint: number;
  limit: number;
}

type EnabledEndpoint = Pick<EndpointRow, 'id' | 'event_types'>;

/** A store's endpoints changed (added, changed, disabled, deleted); the key is the store's domain. */
const ENDPOINT_CHANGES = 'webhook-endpoints';
/** Stores whose enabled endpoints each process keeps at most. */
const CACHED_STORES = 10_000;

/** The only code that touches `webhook_endpoints`, `webhook_deliveries` and `webhook_attempts`. */
export class WebhookRepository {
  /** Each store's enabled endpoints, kept in memory between changes: every event a store announces asks them. */
  private readonly enabled: ChangeCache<EnabledEndpoint[]>;

  constructor(
    private readonly database: Database,
    changes: ChangeBus,
  ) {
    // Frozen: every announcement of the store shares the list.
    this.enabled = new ChangeCache(changes, ENDPOINT_CHANGES, async (storeDomain) => Object.freeze((await this.readEnabledEndpoints(storeDomain)).map((row) => Object.freeze(row))) as EnabledEndpoint[], CACHED_STORES);
  }

  listEndpoints(storeDomain: string): Promise<EndpointRow[]> {
    return this.database.db.selectFrom('webhook_endpoints').selectAll().where('kind', '=', 'store').where('store_domain', '=', storeDomain).orderBy('created_at').orderBy('id').execute();
  }

  findEndpoint(storeDomain: string, id: string): Promise<EndpointRow | undefined> {
    return this.database.db.selectFrom('webhook_endpoints').selectAll().where('kind', '=', 'store').where('store_domain', '=', storeDomain).where('id', '=', id).executeTakeFirst();
  }

  /** Inserts the endpoint unless the store already has `limit`; false when it has. */
  insertEndpoint(row: EndpointRow, limit: number): Promise<boolean> {
    return this.announced(row.store_domain, this.database.write(async (trx) => {
      // Creates in parallel must not slip past the limit together (SQLite has one writer already).
      if (this.database.dialect === 'postgres') await sql`select pg_advisory_xact_lock(hashtext(${`webhook-endpoints\n${row.store_domain}`}))`.execute(trx);
      const { n } = await trx
        .selectFrom('webhook_endpoints')
        .select((eb) => eb.fn.countAll<number>().as('n'))
        .where('kind', '=', 'store')
        .where('store_domain', '=', row.store_domain)
        .executeTakeFirstOrThrow();
      if (Number(n) >= limit) return false;
      await trx.insertInto('webhook_endpoints').values(row).execute();
      return true;
    }));
  }

  async updateEndpoint(storeDomain: string, id: string, changes: Partial<EndpointRow>): Promise<EndpointRow | undefined> {
    return this.announced(storeDomain, this.database.writeStatement((db) =>
      db.updateTable('webhook_endpoints').set(changes).where('kind', '=', 'store').where('store_domain', '=', storeDomain).where('id', '=', id).returningAll().executeTakeFirst(),
    ));
  }

  /**
   * Disables the endpoint (if it still is enabled) and cancels its pending deliveries, in one
   * write. True when this call disabled it: only that caller tells the owner.
   */
  async disableEndpoint(id: string, reason: string, now: string): Promise<boolean> {
    const disabledIn = await this.database.write(async (trx) => {
      const disabled = await trx
        .updateTable('webhook_endpoints')
        .set({ enabled: 0, disabled_reason: reason, disabled_at: now, updated_at: now })
        .where('id', '=', id)
        .where('enabled', '=', 1)
        .returning('store_domain')
        .executeTakeFirst();
      await this.cancelPending(trx, id, now, 'the endpoint was disabled');
      return disabled?.store_domain;
    });
    if (disabledIn === undefined) return false;
    if (disabledIn !== null) await this.enabled.changed(disabledIn);
    return true;
  }

  /** The endpoint, its deliveries and their log, in one write; false when there was no such endpoint. */
  deleteEndpoint(storeDomain: string, id: string): Promise<boolean> {
    return this.announced(storeDomain, this.database.write(async (trx) => {
      const deleted = await trx.deleteFrom('webhook_endpoints').where('kind', '=', 'store').where('store_domain', '=', storeDomain).where('id', '=', id).executeTakeFirst();
      if (Number(deleted.numDeletedRows) === 0) return false;
      await trx.deleteFrom('webhook_attempts').where('endpoint_id', '=', id).execute();
      await trx.deleteFrom('webhook_deliveries').where('endpoint_id', '=', id).execute();
      return true;
    }));
  }

  /** The write's result, once the store's endpoints are announced changed. */
  private async announced<T>(storeDomain: string, write: Promise<T>): Promise<T> {
    const result = await write;
    await this.enabled.changed(storeDomain);
    return result;
  }

  /** The store's endpoints that take events now, with the types each takes (each process keeps them between changes). */
  enabledEndpoints(storeDomain: string): Promise<Array<Pick<EndpointRow, 'id' | 'event_types'>>> {
    return this.enabled.get(storeDomain);
  }

  private readEnabledEndpoints(storeDomain: string): Promise<Array<Pick<EndpointRow, 'id' | 'event_types'>>> {
    return this.database.db.selectFrom('webhook_endpoints').select(['id', 'event_types']).where('kind', '=', 'store').where('store_domain', '=', storeDomain).where('enabled', '=', 1).execute();
  }

  /** New deliveries in one statement; one already made for an (endpoint, event) stays as it is. */
  async insertDeliveries(rows: DeliveryRow[]): Promise<void> {
    if (rows.length === 0) return;
    await this.database.writeStatement((db) =>
      db
        .insertInto('webhook_deliveries')
        .values(rows)
        .onConflict((oc) => oc.columns(['endpoint_id', 'event_id']).doNothing())
        .execute(),
    );
  }

  /**
   * Leases up to `limit` due deliveries until `leaseUntil`: the claim moves each one's
   * `next_attempt_at` to the end of the lease, so one a worker took and never settled (it died)
   * is due again then, and counts the attempt, so a delivery that kills its worker still runs
   * out of attempts.
   */
  claimDue(now: string, leaseUntil: string, limit: number): Promise<ClaimedDelivery[]> {
    return this.database.write(async (trx) => {
      const due = trx
        .selectFrom('webhook_deliveries')
        .select('id')
        .where('status', '=', 'pending')
        .where('next_attempt_at', '<=', now)
        .orderBy('next_attempt_at')
        .limit(limit);
      // Other workers skip the rows this one is taking instead of queueing behind them.
      const ids = (await lockRows(this.database, due, { skipLocked: true }).execute()).map((row) => row.id);
      if (ids.length === 0) return [];
      const deliveries = await trx
        .updateTable('webhook_deliveries')
        .set((eb) => ({ next_attempt_at: leaseUntil, attempts: eb('attempts', '+', 1) }))
        .where('id', 'in', ids)
        .returningAll()
        .execute();
      const endpoints = await trx
        .selectFrom('webhook_endpoints')
        .select(['id', 'url', 'secret_sealed', 'enabled', 'kind', 'agent_id'])
        .where('id', 'in', [...new Set(deliveries.map((row) => row.endpoint_id))])
        .execute();
      const byId = new Map(endpoints.map((endpoint) => [endpoint.id, endpoint]));
      return deliveries.map((delivery) => ({ delivery, endpoint: byId.get(delivery.endpoint_id) }));
    });
  }

  /**
   * Records an attempt of a claimed delivery and what follows (delivered, a retry, given up),
   * and counts it in its endpoint's run of failures (a success ends the run), in one write.
   * Undefined when the claim was lost (its lease ran out and another worker took it, or the
   * endpoint was disabled or deleted meanwhile): then nothing is written.
   */
  settle(claimed: DeliveryRow, settled: SettledAttempt): Promise<FailureRun | undefined> {
    return this.database.write(async (trx) => {
      const now = settled.attempt.attempted_at;
      const next = settled.next;
      const updated = await trx
        .updateTable('webhook_deliveries')
        .set({
          status: next.status,
          next_attempt_at: next.status === 'pending' ? next.nextAttemptAt : null,
          last_error: settled.attempt.error,
          finished_at: next.status === 'pending' ? null : now,
        })
        .where('id', '=', claimed.id)
        // The lease is the claim's fence.
        .where('status', '=', 'pending')
        .where('next_attempt_at', '=', claimed.next_attempt_at)
        .executeTakeFirst();
      if (Number(updated.numUpdatedRows) === 0) return undefined;
      await trx.insertInto('webhook_attempts').values(settled.attempt).execute();
      const run = await trx
        .updateTable('webhook_endpoints')
        .set(
          settled.delivered
            ? { consecutive_failures: 0, failing_since: null }
            : (eb) => ({ consecutive_failures: eb('consecutive_failures', '+', 1), failing_since: eb.fn.coalesce('failing_since', eb.val(now)) }),
        )
        .where('id', '=', claimed.endpoint_id)
        .returning(['consecutive_failures', 'failing_since', 'enabled'])
        .executeTakeFirst();
      return run && { consecutiveFailures: run.consecutive_failures, failingSince: run.failing_since, enabled: run.enabled === 1 };
    });
  }

  /** A claimed delivery whose endpoint is gone or disabled: it will not be attempted. */
  async cancelClaimed(claimed: DeliveryRow, now: string): Promise<void> {
    await this.database.writeStatement((db) =>
      db
        .updateTable('webhook_deliveries')
        .set({ status: 'cancelled', next_attempt_at: null, finished_at: now, last_error: 'the endpoint was disabled or removed' })
        .where('id', '=', claimed.id)
        .where('status', '=', 'pending')
        .where('next_attempt_at', '=', claimed.next_attempt_at)
        .execute(),
    );
  }

  /** The endpoint's deliveries, newest first, each with its attempts in order. */
  async listDeliveries(endpointId: string, limit: number): Promise<Array<{ delivery: DeliveryRow; attempts: AttemptRow[] }>> {
    const deliveries = await this.database.db
      .selectFrom('webhook_deliveries')
      .selectAll()
      .where('endpoint_id', '=', endpointId)
      .orderBy('created_at', 'desc')
      .orderBy('id', 'desc')
      .limit(limit)
      .execute();
    if (deliveries.length === 0) return [];
    const attempts = await this.database.db
      .selectFrom('webhook_attempts')
      .selectAll()
      .where('delivery_id', 'in', deliveries.map((row) => row.id))
      .orderBy('delivery_id')
      .orderBy('attempt')
      .execute();
    return deliveries.map((delivery) => ({ delivery, attempts: attempts.filter((attempt) => attempt.delivery_id === delivery.id) }));
  }

  /**
   * Drops finished deliveries (and their log) made before `before`, and those beyond the newest
   * `keepPerEndpoint` of an endpoint; at most `limit` of each kind per call. Pending ones stay.
   */
  async prune(retention: Retention): Promise<number> {
    const old = await this.database.db
      .selectFrom('webhook_deliveries')
      .select('id')
      .where('created_at', '<', retention.before)
      .where('status', '!=', 'pending')
      .limit(retention.limit)
      .execute();
    let dropped = await this.dropDeliveries(old.map((row) => row.id));
    const crowded = await this.database.db
      .selectFrom('webhook_deliveries')
      .select('endpoint_id')
      .groupBy('endpoint_id')
      .having((eb) => eb.fn.countAll(), '>', retention.keepPerEndpoint)
      .limit(retention.limit)
      .execute();
    for (const { endpoint_id } of crowded) {
      const beyond = await this.database.db
        .selectFrom('webhook_deliveries')
        .select('id')
        .where('endpoint_id', '=', endpoint_id)
        .where('status', '!=', 'pending')
        .orderBy('created_at', 'desc')
        .orderBy('id', 'desc')
        .offset(retention.keepPerEndpoint)
        .limit(retention.limit)
        .execute();
      dropped += await this.dropDeliveries(beyond.map((row) => row.id));
    }
    return dropped;
  }

  private async dropDeliveries(ids: string[]): Promise<number> {
    if (ids.length === 0) return 0;
    return this.database.write(async (trx) => {
      await trx.deleteFrom('webhook_attempts').where('delivery_id', 'in', ids).execute();
      const deleted = await trx.deleteFrom('webhook_deliveries').where('id', 'in', ids).executeTakeFirst();
      return Number(deleted.numDeletedRows);
    });
  }

  private async cancelPending(trx: Trx, endpointId: string, now: string, reason: string): Promise<void> {
    await trx
      .updateTable('webhook_deliveries')
      .set({ status: 'cancelled', next_attempt_at: null, finished_at: now, last_error: reason })
      .where('endpoint_id', '=', endpointId)
      .where('status', '=', 'pending')
      .execute();
  }
}
