import type { FastifyBaseLogger } from 'fastify';
import { z } from 'zod';
import { isoAfter, nowIso } from '../core/clock.ts';
import { ConnectionRepository } from '../core/connectors/connections.ts';
import type { Database } from '../core/db/database.ts';
import { lockRows } from '../core/db/locking.ts';
import type { FlowTriggersTable } from '../core/db/schema.ts';
import type { EventSink, StoreEvent, StoreEventType } from '../core/events.ts';
import { newId } from '../core/ids.ts';
import type { WorkerJob } from '../core/jobs.ts';
import type { AdminApi } from './admin-api.ts';

/**
 * Shopify Flow triggers (docs/shopify.md, "Shopify Flow"): each is a Flow trigger extension of the
 * app, `extensions/<handle>/shopify.extension.toml` (https://shopify.dev/docs/apps/build/flow/triggers/create,
 * https://shopify.dev/docs/apps/build/flow/triggers/reference), fired for an installed store with
 * the Admin API's `flowTriggerReceive(handle, payload)`, whose payload holds exactly the fields the
 * extension declares, by their keys; a product reference as `product_id`, the product's numeric id.
 */
export const FLOW_TRIGGERS: Partial<Record<StoreEventType, { handle: string; payload(data: Record<string, unknown>): Record<string, unknown> }>> = {
  'subscription.created': {
    handle: 'restock-shopper-subscribed',
    payload: (data) => ({ ...product(data), 'Subscription ID': text(data.subscriptionId), Email: text(data.email) }),
  },
  'alert.sent': {
    handle: 'restock-alert-sent',
    payload: (data) => ({ ...product(data), 'Alert ID': text(data.alertId), 'Subscription ID': text(data.subscriptionId), Channel: text(data.channel), Email: text(data.email) }),
  },
  'waitlist.threshold': {
    handle: 'restock-waitlist-threshold',
    payload: (data) => ({ ...product(data), Waiting: Number(data.waiting ?? 0), Threshold: Number(data.threshold ?? 0) }),
  },
  'product.restocked': {
    handle: 'restock-product-back',
    payload: (data) => ({ ...product(data), Available: Number(data.available ?? 0), 'Restock ID': text(data.restockId) }),
  },
};

/** The reference field and the variant: `product_id` is the number in `gid://shopify/Product/<n>`. */
function product(data: Record<string, unknown>): Record<string, unknown> {
  const productId = /^gid:\/\/shopify\/Product\/(\d{1,19})$/.exec(text(data.productId))?.[1];
  return { ...(productId ? { product_id: Number(productId) } : {}), 'Variant ID': text(data.variantId) };
}

function text(value: unknown): string {
  return typeof value === 'string' ? value : '';
}

const FLOW_TRIGGER_RECEIVE = `mutation RestockFlowTrigger($handle: String, $payload: JSON) {
  flowTriggerReceive(handle: $handle, payload: $payload) { userErrors { field message } }
}`;
const received = z.object({ flowTriggerReceive: z.object({ userErrors: z.array(z.object({ field: z.array(z.string()).nullable().optional(), message: z.string() })) }) });

/** After a failed attempt that may pass later (Shopify away, a throttle): the waits, then given up. */
const RETRY_SCHEDULE_MS = [10_000, 60_000, 5 * 60_000, 30 * 60_000, 2 * 3600_000, 6 * 3600_000, 12 * 3600_000, 24 * 3600_000];
const CLAIM_SIZE = 20;
const LEASE_MS = 120_000;

type FlowTriggerRow = FlowTriggersTable;

/** The queue of Flow triggers (`flow_triggers`), the only code that touches it. */
export class FlowTriggerRepository {
  constructor(private readonly database: Database) {}

  async enqueue(rows: FlowTriggerRow[]): Promise<void> {
    if (rows.length === 0) return;
    await this.database.writeStatement((db) => db.insertInto('flow_triggers').values(rows).onConflict((oc) => oc.columns(['store_domain', 'event_id']).doNothing()).execute());
  }

  claimDue(now: string, leaseUntil: string, limit: number): Promise<FlowTriggerRow[]> {
    return this.database.write(async (trx) => {
      const due = trx.selectFrom('flow_triggers').select('id').where('status', '=', 'pending').where('next_attempt_at', '<=', now).orderBy('next_attempt_at').limit(limit);
      const ids = (await lockRows(this.database, due, { skipLocked: true }).execute()).map((row) => row.id);
      if (ids.length === 0) return [];
      return trx.updateTable('flow_triggers').set((eb) => ({ next_attempt_at: leaseUntil, attempts: eb('attempts', '+', 1) })).where('id', 'in', ids).returningAll().execute();
    });
  }

  async settle(claimed: FlowTriggerRow, next: Pick<FlowTriggerRow, 'status' | 'next_attempt_at' | 'last_error' | 'finished_at'>): Promise<void> {
    await this.database.writeStatement((db) => db.updateTable('flow_triggers').set(next).where('id', '=', claimed.id).where('attempts', '=', claimed.attempts).where('status', '=', 'pending').execute());
  }
}

/**
 * The sink that queues a Flow trigger for each event that has one, at stores where the app is
 * installed (a live Shopify connection); other stores' events are not queued.
 */
export function flowTriggerSink(database: Database): EventSink {
  const repository = new FlowTriggerRepository(database);
  const connections = new ConnectionRepository(database, 'shopify');
  return {
    async announce(...events: StoreEvent[]) {
      const wanted = events.filter((event) => FLOW_TRIGGERS[event.type] !== undefined);
      const now = nowIso();
      const rows: FlowTriggerRow[] = [];
      for (const store of new Set(wanted.map((event) => event.storeDomain.toLowerCase()))) {
        if ((await connections.find(store))?.status !== 'connected') continue;
        for (const event of wanted.filter((candidate) => candidate.storeDomain.toLowerCase() === store)) {
          const trigger = FLOW_TRIGGERS[event.type]!;
          rows.push({
            id: newId('flt'),
            store_domain: store,
            event_id: event.id,
            handle: trigger.handle,
            payload: JSON.stringify(trigger.payload(event.data)),
            status: 'pending',
            attempts: 0,
            next_attempt_at: now,
            last_error: null,
            created_at: now,
            finished_at: null,
          });
        }
      }
      await repository.enqueue(rows);
    },
  };
}

/** The worker job that fires the queued triggers with the store's Admin API token. */
export function flowTriggerJob(database: Database, admin: AdminApi, log: FastifyBaseLogger): WorkerJob {
  const repository = new FlowTriggerRepository(database);
  const fire = async (row: FlowTriggerRow) => {
    const done = (status: FlowTriggerRow['status'], error: string | null) =>
      repository.settle(row, { status, next_attempt_at: null, last_error: error, finished_at: nowIso() });
    let token: string | undefined;
    try {
      token = await admin.tokens.current(row.store_domain);
    } catch (err) {
      // Shopify refused the store's refresh token: nothing fires until the merchant opens the app again.
      return done('failed', `no usable Admin API token: ${(err as Error).name}`);
    }
    if (!token) return done('cancelled', 'the app is no longer installed on the store');
    try {
      const data = await admin.query(row.store_domain, token, 'Firing a Flow trigger', FLOW_TRIGGER_RECEIVE, { handle: row.handle, payload: JSON.parse(row.payload) }, received);
      const refused = data.flowTriggerReceive.userErrors;
      if (refused.length === 0) return done('delivered', null);
      // Shopify refused the trigger itself (handle, payload): the same call would be refused again.
      log.warn({ shop: row.store_domain, handle: row.handle, errors: refused.map((error) => error.message) }, 'Shopify refused a Flow trigger');
      return done('failed', `Shopify refused it: ${refused.map((error) => `${(error.field ?? []).join('.')} ${error.message}`.trim()).join('; ').slice(0, 500)}`);
    } catch (err) {
      const error = (err as Error).message.slice(0, 500);
      if (row.attempts > RETRY_SCHEDULE_MS.length) return done('failed', error);
      const base = RETRY_SCHEDULE_MS[row.attempts - 1]!;
      return repository.settle(row, { status: 'pending', next_attempt_at: isoAfter(Math.round(base * (0.9 + Math.random() * 0.2))), last_error: error, finished_at: null });
    }
  };
  return {
    name: 'shopify-flow-triggers',
    async run() {
      const claimed = await repository.claimDue(nowIso(), isoAfter(LEASE_MS), CLAIM_SIZE);
      await Promise.all(claimed.map(fire));
      return claimed.length;
    },
  };
}
