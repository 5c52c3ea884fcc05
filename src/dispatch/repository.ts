// Longer than most files on purpose: every query of the three dispatch tables (restocks, the
// notification ledger, suppressions) in one place, where their indexes are chosen together.
import { sql } from 'kysely';
import type { DeliveryReport } from '../core/channels.ts';
import { chunks } from '../core/chunks.ts';
import type { Database, Trx } from '../core/db/database.ts';
import { lockRows } from '../core/db/locking.ts';
import type { NotificationsTable, RestocksTable, SuppressionsTable, UnitHoldsTable } from '../core/db/schema.ts';
import { paddedLists, powerOfTwoLists } from './list-sizes.ts';

export type RestockRow = RestocksTable;
export type NotificationRow = NotificationsTable;
export type SuppressionRow = SuppressionsTable;
export type SentNotificationRow = Pick<NotificationRow, 'id' | 'product_id' | 'variant_id' | 'kind' | 'channel'> & { sent_at: string };

/**
 * A leased alert as the worker holds it: every column but the audit's words (why it was queued,
 * what became of it), which sending never reads and which would otherwise stay in memory with
 * every alert leased, the why being most of a row.
 */
export type ClaimedNotification = Omit<NotificationRow, 'reason' | 'outcome'>;

const CLAIMED_COLUMNS = [
  'id',
  'restock_id',
  'subscription_id',
  'store_domain',
  'email',
  'email_key',
  'product_id',
  'variant_id',
  'batch',
  'position',
  'status',
  'attempts',
  'next_attempt_at',
  'lease_owner',
  'lease_until',
  'created_at',
  'sent_at',
  'locale',
  'held_by_plan',
  'third_party',
  'kind',
  'reminder_of',
  'channel',
  'contact_point_id',
  'provider_ref',
  'delivery_status',
] as const satisfies ReadonlyArray<keyof ClaimedNotification>;

/**
 * Claimed rows stay in memory until their outcome is written, hundreds of sends later: long
 * enough for the heap to move them to its old generation, where garbage waits for a full
 * collection. So they are kept small. The driver builds each row as a dictionary (a hash table
 * of its columns, over a kilobyte) and gives it its own copy of every text; each row becomes a
 * plain object of one shape, and the texts a claim repeats (its restock, store, product, lease,
 * times) are kept once. The driver's rows are dropped while still young.
 */
function compactClaim(rows: readonly ClaimedNotification[]): ClaimedNotification[] {
  const seen = new Map<string, string>();
  const shared = <T extends string | null>(value: T): T => {
    if (value === null) return value;
    const known = seen.get(value);
    if (known !== undefined) return known as T;
    seen.set(value, value);
    return value;
  };
  return rows.map((row) => ({
    id: row.id,
    restock_id: shared(row.restock_id),
    subscription_id: row.subscription_id,
    store_domain: shared(row.store_domain),
    email: row.email,
    email_key: row.email_key === row.email ? row.email : row.email_key,
    product_id: shared(row.product_id),
    variant_id: shared(row.variant_id),
    batch: row.batch,
    position: row.position,
    status: shared(row.status),
    attempts: row.attempts,
    next_attempt_at: shared(row.next_attempt_at),
    lease_owner: shared(row.lease_owner),
    lease_until: shared(row.lease_until),
    created_at: shared(row.created_at),
    sent_at: row.sent_at,
    locale: shared(row.locale),
    held_by_plan: row.held_by_plan,
    third_party: row.third_party,
    kind: shared(row.kind),
    reminder_of: row.reminder_of,
    channel: shared(row.channel),
    contact_point_id: row.contact_point_id,
    provider_ref: row.provider_ref,
    delivery_status: row.delivery_status,
  }));
}

const LEDGER_STATUSES = ['queued', 'sending', 'sent', 'skipped', 'failed'] as const;

/** A ledger status from a checked filter; anything else is a programming error, never spliced into SQL. */
function ledgerStatus(status: string): (typeof LEDGER_STATUSES)[number] {
  const known = LEDGER_STATUSES.find((candidate) => candidate === status);
  if (!known) throw new Error(`not a ledger status: ${JSON.stringify(status)}`);
  return known;
}

/**
 * Storage of restocks, the notification ledger and suppressions; the only code that touches
 * those tables. The ledger is also the send queue: rows are claimed with a lease, so a worker
 * that dies leaves its rows to be retaken when the lease runs out.
 */
export class DispatchRepository {
  constructor(private readonly database: Database) {}

  /** A new restock, unless one is already being dispatched for the same variant (then that one). */
  async insertRestock(row: RestockRow): Promise<{ restock: RestockRow; created: boolean }> {
    const result = await this.database.writeStatement((db) =>
      db.insertInto('restocks').values(row).onConflict((oc) => oc.doNothing()).executeTakeFirst(),
    );
    if (Number(result.numInsertedOrUpdatedRows ?? 0n) === 1) return { restock: row, created: true };
    const live = await this.database.db
      .selectFrom('restocks')
      .selectAll()
      .where('store_domain', '=', row.store_domain)
      .where('product_id', '=', row.product_id)
      .where(sql<string>`coalesce(variant_id, '')`, '=', row.variant_id ?? '')
      .where('status', '=', sql.lit('dispatching'))
      .executeTakeFirst();
    if (live) return { restock: live, created: false };
    // The live one finished between the insert and the read: this report starts a new one.
    return this.insertRestock(row);
  }

  /**
   * Leases one restock whose next batch is due, so only one worker plans it. A restock whose
   * last batch is still going out is not due: batches follow one another.
   */
  claimDueRestock(owner: string, now: string, leaseUntil: string): Promise<RestockRow | undefined> {
    return this.database.write(async (trx) => {
      const candidate = trx
        .selectFrom('restocks')
        .select('id')
        .where('status', '=', 'dispatching')
        .where('next_batch_at', '<=', now)
        .where((eb) => eb.or([eb('lease_until', 'is', null), eb('lease_until', '<', now)]))
        .where(({ not, exists, selectFrom }) =>
          not(
            exists(
              selectFrom('notifications')
                .select('notifications.id')
                .whereRef('notifications.restock_id', '=', 'restocks.id')
                .where((eb) =>
                  eb.or([
                    eb('notifications.status', '=', 'sending'),
                    eb.and([eb('notifications.status', '=', 'queued'), eb('notifications.next_attempt_at', '<=', now)]),
                  ]),
                ),
            ),
          ),
        )
        .orderBy('next_batch_at')
        .limit(1);
      const due = await lockRows(this.database, candidate, { skipLocked: true }).executeTakeFirst();
      if (!due) return undefined;
      await trx.updateTable('restocks').set({ lease_owner: owner, lease_until: leaseUntil }).where('id', '=', due.id).execute();
      return trx.selectFrom('restocks').selectAll().where('id', '=', due.id).executeTakeFirstOrThrow();
    });
  }

  /**
   * Queues a planned page of a batch and moves the restock on, in one transaction. The lease is
   * let go unless `changes` renews it (a batch with pages still to plan).
   */
  async queueBatch(owner: string, restock: Pick<RestockRow, 'id'>, rows: NotificationRow[], changes: Partial<RestockRow>, holds: UnitHoldsTable[] = []): Promise<boolean> {
    return this.database.writeRetrying(async (trx) => {
      const still = await trx
        .updateTable('restocks')
        .set({ lease_owner: null, lease_until: null, ...changes })
        .where('id', '=', restock.id)
        .where('lease_owner', '=', owner)
        .executeTakeFirst();
      // The lease ran out and another worker took the restock over: its plan stands, not ours.
      if (Number(still.numUpdatedRows) === 0) return false;
      for (const chunk of chunks(rows)) {
        await trx
          .insertInto('notifications')
          .values(chunk)
          .onConflict((oc) => oc.doNothing())
          .execute();
      }
      // The units to hold for the batch's shoppers, with the alerts that will carry them.
      for (const chunk of chunks(holds)) await trx.insertInto('unit_holds').values(chunk).execute();
      return true;
    });
  }

  async releaseRestock(owner: string, id: string, changes: Partial<RestockRow>): Promise<void> {
    await this.database.writeStatement((db) =>
      db.updateTable('restocks').set({ ...changes, lease_owner: null, lease_until: null }).where('id', '=', id).where('lease_owner', '=', owner).execute(),
    );
  }

  /**
   * Leases up to `limit` alerts that are due, first come first served: queued ones whose time
   * has come, and ones a dead worker left in `sending` past their lease.
   */
  claimNotifications(owner: string, now: string, leaseUntil: string, limit: number): Promise<ClaimedNotification[]> {
    return this.database.writeRetrying(async (trx) => {
      // Two queries, each walking notifications_queue in its order (an OR of both would sort
      // every due row of the table on each claim): alerts a dead worker left first, then queued.
      const due = (status: 'sending' | 'queued', n: number) => {
        const query = trx
          .selectFrom('notifications')
          .select('id')
          .where('status', '=', status)
          .where(status === 'sending' ? 'lease_until' : 'next_attempt_at', status === 'sending' ? '<' : '<=', now)
          .orderBy('next_attempt_at')
          .orderBy('restock_id')
          .orderBy('position')
          .limit(n);
        return lockRows(this.database, query, { skipLocked: true }).execute();
      };
      const ids = (await due('sending', limit)).map((row) => row.id);
      if (ids.length < limit) for (const row of await due('queued', limit - ids.length)) ids.push(row.id);
      if (ids.length === 0) return [];
      const leased: ClaimedNotification[] = [];
      for (const list of paddedLists(ids)) {
        const rows = await trx
          .updateTable('notifications')
          .set((eb) => ({ status: 'sending', lease_owner: owner, lease_until: leaseUntil, attempts: eb('attempts', '+', 1) }))
          .where('id', 'in', list)
          .returning(CLAIMED_COLUMNS)
          .execute();
        leased.push(...rows);
      }
      return compactClaim(leased).sort((a, b) => a.position - b.position);
    });
  }

  /**
   * Gives back alerts this worker leased and never tried: queued again as they were before the
   * claim (its attempt uncounted), due at once for any worker.
   */
  async giveBack(owner: string, ids: string[]): Promise<void> {
    if (ids.length === 0) return;
    await this.database.writeRetrying(async (trx) => {
      for (const list of paddedLists(ids)) {
        await trx
          .updateTable('notifications')
          .set((eb) => ({ status: 'queued', lease_owner: null, lease_until: null, attempts: eb('attempts', '-', 1) }))
          .where('id', 'in', list)
          .where('lease_owner', '=', owner)
          .where('status', '=', 'sending')
          .execute();
      }
    });
  }

  /** Extends the lease on alerts this worker still holds. */
  async renewLeases(owner: string, ids: string[], leaseUntil: string): Promise<void> {
    if (ids.length === 0) return;
    await this.database.write(async (trx) => {
      for (const list of paddedLists(ids)) {
        await trx
          .updateTable('notifications')
          .set({ lease_until: leaseUntil })
          .where('id', 'in', list)
          .where('lease_owner', '=', owner)
          .where('status', '=', 'sending')
          .execute();
      }
    });
  }

  /**
   * Records outcomes of leased alerts in one transaction: sent ones in one statement per chunk,
   * the others one by one, then `alongside` (the subscriptions' move to notified) in the same
   * commit. A row whose lease another worker took is left alone.
   */
  async settle(
    owner: string,
    sent: { ids: string[]; at: string; providerRefs?: Array<{ id: string; ref: string }> },
    others: Array<{ id: string; changes: Partial<NotificationRow> }>,
    alongside: (trx: Trx) => Promise<void>,
  ): Promise<void> {
    await this.database.writeRetrying(async (trx) => {
      for (const list of paddedLists(sent.ids)) {
        await trx
          .updateTable('notifications')
          // A delivery report can land before this (Twilio answers fast): its outcome stays.
          .set({ status: 'sent', sent_at: sent.at, outcome: sql<string>`case when delivery_status is null then 'accepted' else outcome end`, held_by_plan: 0, lease_owner: null, lease_until: null })
          .where('id', 'in', list)
          .where('lease_owner', '=', owner)
          .execute();
      }
      // The provider's id of each text, which its delivery reports name.
      for (const { id, ref } of sent.providerRefs ?? []) {
        await trx.updateTable('notifications').set({ provider_ref: ref }).where('id', '=', id).execute();
      }
      for (const { id, changes } of others) {
        await trx
          .updateTable('notifications')
          .set({ ...changes, lease_owner: null, lease_until: null })
          .where('id', '=', id)
          .where('lease_owner', '=', owner)
          .execute();
      }
      await alongside(trx);
    });
  }

  /** The alerts (and reminders) sent to these subscriptions, by any restock, on any channel. */
  async alreadySent(subscriptionIds: string[]): Promise<Array<Pick<NotificationRow, 'subscription_id' | 'restock_id' | 'channel' | 'contact_point_id' | 'kind'>>> {
    const out: Array<Pick<NotificationRow, 'subscription_id' | 'restock_id' | 'channel' | 'contact_point_id' | 'kind'>> = [];
    for (const list of paddedLists(subscriptionIds)) {
      out.push(
        ...(await this.database.db
          .selectFrom('notifications')
          .select(['subscription_id', 'restock_id', 'channel', 'contact_point_id', 'kind'])
          .where('subscription_id', 'in', list)
          .where('status', '=', 'sent')
          .execute()),
      );
    }
    return out;
  }

  /**
   * A provider's delivery report of a text or push, found by the alert id our callback URL carried (the
   * report may come before the send's SID is recorded) and the provider's reference; a store's
   * own account reports only on its store's texts. False when no such text.
   */
  async recordDelivery({ channel, providerRef, status, outcome, notification }: DeliveryReport): Promise<boolean> {
    const result = await this.database.writeStatement((db) =>
      db
        .updateTable('notifications')
        .set({ delivery_status: status, outcome })
        .where('id', '=', notification.id)
        .where('channel', '=', channel)
        .where((eb) => eb.or([eb('provider_ref', 'is', null), eb('provider_ref', '=', providerRef)]))
        .$if(notification.storeDomain !== undefined, (query) => query.where('store_domain', '=', notification.storeDomain!))
        .executeTakeFirst(),
    );
    return Number(result.numUpdatedRows) > 0;
  }

  /**
   * Every alert the store sent to these address keys: for which restock, and when. Read by key
   * (notifications_by_address_key): naming the restock too made SQLite walk the restock's every
   * row (notifications_once_per_restock) instead, a whole batch for each claim.
   */
  async sentTo(storeDomain: string, emailKeys: string[]): Promise<Array<Pick<NotificationRow, 'email_key' | 'restock_id' | 'sent_at' | 'kind' | 'channel' | 'contact_point_id'>>> {
    const out: Array<Pick<NotificationRow, 'email_key' | 'restock_id' | 'sent_at' | 'kind' | 'channel' | 'contact_point_id'>> = [];
    for (const list of paddedLists(emailKeys)) {
      out.push(
        ...(await this.database.db
          .selectFrom('notifications')
          .select(['email_key', 'restock_id', 'sent_at', 'kind', 'channel', 'contact_point_id'])
          .where('store_domain', '=', storeDomain)
          .where('email_key', 'in', list)
          .where('status', '=', 'sent')
          .execute()),
      );
    }
    return out;
  }

  /** What the store sent one address about these products (notifications_by_address_key): what attribution credits. */
  sentToAddressFor(storeDomain: string, emailKey: string, productIds: string[]): Promise<SentNotificationRow[]> {
    return this.database.db
      .selectFrom('notifications')
      .select(['id', 'product_id', 'variant_id', 'sent_at', 'kind', 'channel'])
      .where('store_domain', '=', storeDomain)
      .where('email_key', '=', emailKey)
      .where('status', '=', 'sent')
      .where('product_id', 'in', productIds)
      .$narrowType<{ sent_at: string }>()
      .execute();
  }

  /** What was sent for one subscription, oldest first (notifications_by_subscription): its news. */
  sentForSubscription(subscriptionId: string, limit: number): Promise<Array<SentNotificationRow & Pick<NotificationRow, 'restock_id'>>> {
    return this.database.db
      .selectFrom('notifications')
      .select(['id', 'product_id', 'variant_id', 'sent_at', 'kind', 'channel', 'restock_id'])
      .where('subscription_id', '=', subscriptionId)
      .where('status', '=', 'sent')
      .orderBy('sent_at')
      .limit(limit)
      .$narrowType<{ sent_at: string }>()
      .execute();
  }

  /** A notification by id alone: its click link names it. */
  notificationById(id: string): Promise<NotificationRow | undefined> {
    return this.database.db.selectFrom('notifications').selectAll().where('id', '=', id).executeTakeFirst();
  }

  /** Queues the reminders of alerts just sent, in the transaction that records them sent. */
  async queueReminders(trx: Trx, rows: NotificationRow[]): Promise<void> {
    for (const list of powerOfTwoLists(rows, 256)) {
      await trx.insertInto('notifications').values(list).onConflict((oc) => oc.doNothing()).execute();
    }
  }

  /** Alerts (not reminders) sent in [from, to). */
  async countSent(storeDomain: string, from: string, to: string): Promise<number> {
    const row = await this.database.db
      .selectFrom('notifications')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('store_domain', '=', storeDomain)
      .where('status', '=', 'sent')
      .where('sent_at', '>=', from)
      .where('sent_at', '<', to)
      .where('kind', '=', sql.lit('alert'))
      .executeTakeFirstOrThrow();
    return Number(row.n);
  }

  /** Alerts and reminders sent from the UTC day `fromDay` on, per day, channel and kind (kept in alerts_sent_daily). */
  async sentDaily(storeDomain: string, fromDay: string): Promise<Array<{ day: string; channel: string; kind: string; n: number }>> {
    const rows = await this.database.db
      .selectFrom('alerts_sent_daily')
      .select(['day', 'channel', 'kind', 'n'])
      .where('store_domain', '=', storeDomain)
      .where('day', '>=', fromDay)
      .where('n', '>', 0)
      .execute();
    return rows.map((row) => ({ ...row, n: Number(row.n) }));
  }

  /** Alerts and reminders sent from `fromDay` on for these products, per product, variant and kind (alerts_sent_by_product). */
  async sentForProducts(storeDomain: string, fromDay: string, productIds: string[]): Promise<Array<{ product_id: string; variant_id: string | null; kind: string; n: number }>> {
    const out: Array<{ product_id: string; variant_id: string | null; kind: string; n: number }> = [];
    for (const chunk of chunks([...new Set(productIds)])) {
      const rows = await this.database.db
        .selectFrom('alerts_sent_by_product')
        .select(['product_id', sql<string | null>`nullif(variant_key, '')`.as('variant_id'), 'kind', (eb) => eb.fn.sum<number>('n').as('n')])
        .where('store_domain', '=', storeDomain)
        .where('product_id', 'in', chunk)
        .where('day', '>=', fromDay)
        .groupBy(['product_id', 'variant_key', 'kind'])
        .execute();
      for (const row of rows) if (Number(row.n) > 0) out.push({ ...row, n: Number(row.n) });
    }
    return out;
  }

  /** The first `limit` products and variants, in id order, that alerts (not reminders) went out for from `fromDay` on. */
  productsSentSince(storeDomain: string, fromDay: string, limit: number): Promise<Array<{ product_id: string; variant_id: string | null }>> {
    return this.database.db
      .selectFrom('alerts_sent_by_product')
      .select(['product_id', sql<string | null>`nullif(variant_key, '')`.as('variant_id')])
      .where('store_domain', '=', storeDomain)
      .where('day', '>=', fromDay)
      .where('kind', '=', sql.lit('alert'))
      .where('n', '>', 0)
      .groupBy(['product_id', 'variant_key'])
      .orderBy('product_id')
      .orderBy('variant_key')
      .limit(limit)
      .execute();
  }

  /** One page of the store's ledger in id order (creation order: ids begin with the time), after the cursor: exports read it page by page. */
  ledgerPage(storeDomain: string, after: string | undefined, limit: number): Promise<NotificationRow[]> {
    let query = this.database.db.selectFrom('notifications').selectAll().where('store_domain', '=', storeDomain);
    if (after !== undefined) query = query.where('id', '>', after);
    return query.orderBy('id').limit(limit).execute();
  }

  /** The suppressed among these address keys, with the reason. */
  async suppressed(storeDomain: string, emailKeys: string[]): Promise<Map<string, string>> {
    const found = new Map<string, string>();
    for (const list of paddedLists(emailKeys)) {
      const rows = await this.database.db.selectFrom('suppressions').select(['email_key', 'reason']).where('store_domain', '=', storeDomain).where('email_key', 'in', list).execute();
      for (const row of rows) found.set(row.email_key, row.reason);
    }
    return found;
  }

  /** One suppression per store and key: another case of a suppressed address changes nothing. */
  async suppress(row: SuppressionRow): Promise<void> {
    await this.database.writeStatement((db) => db.insertInto('suppressions').values(row).onConflict((oc) => oc.doNothing()).execute());
  }

  async unsuppress(storeDomain: string, emailKey: string): Promise<boolean> {
    const result = await this.database.writeStatement((db) =>
      db.deleteFrom('suppressions').where('store_domain', '=', storeDomain).where('email_key', '=', emailKey).executeTakeFirst(),
    );
    return Number(result.numDeletedRows) > 0;
  }

  listSuppressions(storeDomain: string, limit: number): Promise<SuppressionRow[]> {
    return this.database.db
      .selectFrom('suppressions')
      .selectAll()
      .where('store_domain', '=', storeDomain)
      .orderBy('created_at', 'desc')
      .limit(limit)
      .execute();
  }

  async countSuppressions(storeDomain: string): Promise<number> {
    const row = await this.database.db
      .selectFrom('suppressions')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('store_domain', '=', storeDomain)
      .executeTakeFirstOrThrow();
    return Number(row.n);
  }

  listRestocks(storeDomain: string, limit: number): Promise<RestockRow[]> {
    return this.database.db
      .selectFrom('restocks')
      .selectAll()
      .where('store_domain', '=', storeDomain)
      .orderBy('detected_at', 'desc')
      .limit(limit)
      .execute();
  }

  listNotifications(filter: { storeDomain: string; status?: string; restockId?: string; limit: number }): Promise<NotificationRow[]> {
    let query = this.database.db.selectFrom('notifications').selectAll().where('store_domain', '=', filter.storeDomain);
    // Spelt as a literal: on SQLite a status other than sent is read through its partial index
    // (migration 0018), which a bound parameter would not select.
    if (filter.status) query = query.where('status', '=', sql.lit(ledgerStatus(filter.status)));
    if (filter.restockId) query = query.where('restock_id', '=', filter.restockId);
    return query.orderBy('created_at', 'desc').orderBy('position', 'desc').limit(filter.limit).execute();
  }

  findNotification(storeDomain: string, id: string): Promise<NotificationRow | undefined> {
    return this.database.db.selectFrom('notifications').selectAll().where('id', '=', id).where('store_domain', '=', storeDomain).executeTakeFirst();
  }

  findRestock(storeDomain: string, id: string): Promise<RestockRow | undefined> {
    return this.database.db.selectFrom('restocks').selectAll().where('id', '=', id).where('store_domain', '=', storeDomain).executeTakeFirst();
  }

  /**
   * Queued alerts held back by the store's plan. Spelled like the partial index
   * notifications_held_by_plan (literals, so PostgreSQL matches its predicate in any plan), so
   * the count reads only the held rows, not the store's whole ledger.
   */
  async countHeldByPlan(storeDomain: string): Promise<number> {
    const row = await this.database.db
      .selectFrom('notifications')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('store_domain', '=', storeDomain)
      .where('held_by_plan', '=', sql.lit(1))
      .where('status', '=', sql.lit('queued'))
      .executeTakeFirstOrThrow();
    return Number(row.n);
  }

  /**
   * Alerts per ledger status: the final ones kept in ledger_counts by triggers (migration 0018),
   * queued and sending counted where they are, each through its own index (the queue is short).
   */
  async countsByStatus(storeDomain: string): Promise<Record<string, number>> {
    const inQueue = (status: 'queued' | 'sending') =>
      this.database.db
        .selectFrom('notifications')
        .select((eb) => [sql.lit(status).as('status'), eb.fn.countAll<number>().as('n')])
        .where('store_domain', '=', storeDomain)
        .where('status', '=', sql.lit(status))
        .executeTakeFirstOrThrow();
    const [kept, queued, sending] = await Promise.all([
      this.database.db.selectFrom('ledger_counts').select(['status', 'n']).where('store_domain', '=', storeDomain).where('n', '>', 0).execute(),
      inQueue('queued'),
      inQueue('sending'),
    ]);
    const rows = [...kept, ...[queued, sending].filter((row) => Number(row.n) > 0)];
    return Object.fromEntries(rows.map((row) => [row.status, Number(row.n)]));
  }

  async eraseCustomer(storeDomain: string, emailKey: string): Promise<number> {
    return this.database.write(async (trx) => {
      const ledger = await trx.deleteFrom('notifications').where('store_domain', '=', storeDomain).where('email_key', '=', emailKey).executeTakeFirst();
      await trx.deleteFrom('suppressions').where('store_domain', '=', storeDomain).where('email_key', '=', emailKey).execute();
      return Number(ledger.numDeletedRows);
    });
  }

  async eraseStore(storeDomain: string): Promise<void> {
    await this.database.write(async (trx: Trx) => {
      await trx.deleteFrom('notifications').where('store_domain', '=', storeDomain).execute();
      await trx.deleteFrom('restocks').where('store_domain', '=', storeDomain).execute();
      await trx.deleteFrom('suppressions').where('store_domain', '=', storeDomain).execute();
    });
  }
}
