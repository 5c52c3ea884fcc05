/**
 * Queries written to use a particular index: the SQL each store method runs is pinned per
 * dialect, and the database's own plan for that very statement (its parameters included) must
 * use the index: SQLite's EXPLAIN QUERY PLAN, without statistics as the service runs it, and
 * PostgreSQL's EXPLAIN over an analysed ledger with sequential scans off. An edit that changes
 * the SQL fails the first check; one that loses the index, however it is made, the second.
 */
import assert from 'node:assert/strict';
import { CompiledQuery, DefaultQueryExecutor, sql } from 'kysely';
import { after, before, describe, it } from './fixtures/suites.ts';
import { createTestDatabase, dialectSkip, testConfig, testDialects, type TestDatabase } from './fixtures/app.ts';
import { SubscriptionRepository, WaitingRepository } from '../src/alerts/repository.ts';
import { BillingRepository } from '../src/billing/repository.ts';
import { ConversionRepository } from '../src/conversions/repository.ts';
import { Database } from '../src/core/db/database.ts';
import type { Dialect } from '../src/core/db/dialect.ts';
import { MailOutboxRepository } from '../src/core/mail/outbox-repository.ts';
import { DispatchRepository, type NotificationRow, type RestockRow } from '../src/dispatch/repository.ts';
import { InventoryRepository } from '../src/inventory/repository.ts';
import { WebhookEventRepository } from '../src/shopify/webhook-events.ts';
import { LocalChangeBus } from '../src/core/changes/bus.ts';

interface Statement {
  sql: string;
  parameters: readonly unknown[];
}

/**
 * The statements `run` sends to the database, as compiled. Every Kysely instance and transaction
 * runs its queries through a DefaultQueryExecutor, so this sees the stores' own queries, group
 * commit and transactions included. Tests in a file run one at a time, so nothing else is caught.
 */
async function statementsOf(run: () => Promise<unknown>): Promise<Statement[]> {
  const executor = DefaultQueryExecutor.prototype as unknown as { executeQuery(query: CompiledQuery, ...rest: unknown[]): Promise<unknown> };
  const original = Object.getOwnPropertyDescriptor(executor, 'executeQuery');
  const seen: Statement[] = [];
  const execute = executor.executeQuery;
  executor.executeQuery = function (this: unknown, query: CompiledQuery, ...rest: unknown[]) {
    seen.push({ sql: query.sql, parameters: query.parameters });
    return execute.call(this, query, ...rest);
  };
  try {
    await run();
  } finally {
    if (original) Object.defineProperty(executor, 'executeQuery', original);
    else delete (executor as Partial<typeof executor>).executeQuery;
  }
  return seen;
}

/**
 * The database's plan for one statement, one line per step. `inIndexOrder`: on PostgreSQL, also
 * discourage bitmap scans and sorts, so the plan shows whether the index alone can give the rows
 * in the order asked for.
 */
async function planOf(database: Database, statement: Statement, inIndexOrder = false): Promise<string> {
  const explain = (prefix: string) => CompiledQuery.raw(`${prefix} ${statement.sql}`, [...statement.parameters]);
  if (database.dialect === 'sqlite') {
    const { rows } = await database.db.executeQuery<{ detail: string }>(explain('explain query plan'));
    return rows.map((row) => row.detail).join('\n');
  }
  return database.db.transaction().execute(async (trx) => {
    // Can the index serve the query (and in its order)? On tables this small a scan (or a
    // bitmap of row positions and a sort) costs less, and the planner would rightly pick it.
    // An incremental sort is a sort too: an index on a prefix of the order would otherwise pass for one on all of it.
    for (const method of inIndexOrder ? ['seqscan', 'bitmapscan', 'sort', 'incremental_sort'] : ['seqscan']) {
      await sql`set local ${sql.raw(`enable_${method}`)} = off`.execute(trx);
    }
    const { rows } = await trx.executeQuery<{ 'QUERY PLAN': string }>(explain('explain'));
    return rows.map((row) => row['QUERY PLAN']).join('\n');
  });
}

/** `index`: a name, or names any of which will do; on SQLite, `PRIMARY KEY` for a WITHOUT ROWID table's key. */
function assertUsesIndex(dialect: Dialect, plan: string, index: string | string[]): void {
  const names = [index].flat().join('|');
  const uses = dialect === 'sqlite' ? new RegExp(`USING ((COVERING )?INDEX (${names})\\b|${[index].flat().includes('PRIMARY KEY') ? 'PRIMARY KEY' : '(?!)'})`) : new RegExp(`(Index|Index Only|Bitmap Index) Scan (Backward )?(using|on) (${names})\\b`);
  assert.match(plan, uses, `the plan uses ${[index].flat().join(' or ')}:\n${plan}`);
}

function assertNoFullScan(dialect: Dialect, plan: string): void {
  assert.doesNotMatch(plan, dialect === 'sqlite' ? /^SCAN /m : /Seq Scan/, `no table is read whole:\n${plan}`);
}

/** The index already gives the rows in the order asked for: nothing is sorted. */
function assertNoSort(dialect: Dialect, plan: string): void {
  assert.doesNotMatch(plan, dialect === 'sqlite' ? /TEMP B-TREE/ : /\bSort\b/, `nothing is sorted:\n${plan}`);
}

const NOW = '2026-06-01T12:00:00.000Z';
const EARLIER = '2026-06-01T11:00:00.000Z';
const LATER = '2026-06-01T13:00:00.000Z';
const STORES = 20;

/**
 * A ledger and its neighbours of a few thousand rows spread over stores, restocks and states,
 * so PostgreSQL's statistics describe a table where an index is worth using.
 */
async function seed(database: Database): Promise<void> {
  const store = (i: number) => `shop-${i % STORES}.myshopify.com`;
  const notifications: NotificationRow[] = Array.from({ length: 3000 }, (_, i) => ({
    id: `ntf_${i}`,
    restock_id: `rst_${i % 30}`,
    subscription_id: `sub_${i}`,
    store_domain: store(i),
    email: `shopper-${i % 900}@example.com`,
    email_key: `shopper-${i % 900}@example.com`,
    product_id: `prod_${i % 30}`,
    variant_id: i % 3 === 0 ? null : `var_${i % 30}`,
    batch: 1 + (i % 4),
    position: i,
    status: ['sent', 'sent', 'sent', 'sent', 'sent', 'sent', 'queued', 'sending', 'skipped', 'failed'][i % 10]!,
    reason: 'seeded',
    outcome: i % 10 === 6 && i % 20 === 6 ? 'held by the plan: seeded' : null,
    attempts: 1,
    next_attempt_at: i % 2 === 0 ? EARLIER : LATER,
    lease_owner: i % 10 === 7 ? 'worker_seed' : null,
    lease_until: i % 10 === 7 ? (i % 20 === 7 ? EARLIER : LATER) : null,
    created_at: EARLIER,
    sent_at: i % 10 < 6 ? EARLIER : null,
    locale: null,
    held_by_plan: i % 10 === 6 && i % 20 === 6 ? 1 : 0,
    third_party: i % 7 === 0 ? 1 : 0,
    kind: i % 11 === 0 ? 'reminder' : 'alert',
    reminder_of: null,
    channel: 'email',
    contact_point_id: null,
    provider_ref: null,
    delivery_status: null,
  }));
  const restocks: RestockRow[] = Array.from({ length: 300 }, (_, i) => ({
    id: `rst_${i}`,
    store_domain: store(i),
    product_id: `prod_${i}`,
    variant_id: i % 3 === 0 ? null : `var_${i}`,
    available: 5,
    source: 'inventory-api',
    source_ref: null,
    include_unowned: 0,
    status: i % 5 === 0 ? 'dispatching' : 'done',
    batches: 1,
    planned: 10,
    cursor_created_at: null,
    cursor_id: null,
    third_party_cursor_created_at: null,
    third_party_cursor_id: null,
    next_batch_at: i % 2 === 0 ? EARLIER : LATER,
    lease_owner: null,
    lease_until: null,
    stop_reason: null,
    detected_at: EARLIER,
    updated_at: EARLIER,
  }));
  const subscriptions = Array.from({ length: 3000 }, (_, i) => ({
    id: `sub_${i}`,
    product_id: `prod_${i % 100}`,
    variant_id: i % 3 === 0 ? null : `var_${i % 100}`,
    email: `shopper-${i}@example.com`,
    email_key: `shopper-${i}@example.com`,
    status: i % 4 === 0 ? 'notified' : 'active',
    store_domain: store(i),
    // Every seventh made by one of a few agents not bound to the store.
    agent_id: i % 7 === 0 ? `agt_${i % 5}` : null,
    third_party: i % 7 === 0 ? 1 : 0,
    created_at: new Date(Date.parse(EARLIER) + i * 1000).toISOString(),
    updated_at: EARLIER,
    locale: null,
  }));
  const events = Array.from({ length: 2000 }, (_, i) => ({
    event_id: `evt_${i}`,
    store_domain: store(i),
    topic: 'inventory_levels/update',
    webhook_id: null,
    payload: '{}',
    triggered_at: null,
    status: i % 20 === 0 ? 'queued' : i % 20 === 1 ? 'processing' : 'done',
    attempts: 1,
    lease_until: null,
    error: null,
    received_at: new Date(Date.parse(EARLIER) + i * 1000).toISOString(),
    processed_at: null,
  }));
  const variants = Array.from({ length: 2000 }, (_, i) => ({
    store_domain: store(i),
    product_id: `prod_${i}`,
    variant_id: `var_${i}`,
    inventory_item_id: `item_${i}`,
    available: i % 7,
    published: 1,
    product_title: null,
    variant_title: null,
    image_url: null,
    product_url: null,
    source_updated_at: null,
    updated_at: EARLIER,
  }));
  const outbox = Array.from({ length: 2000 }, (_, i) => ({
    id: `msg_${i}`,
    recipient: `shopper-${i}@example.com`,
    subject: 'seeded',
    text_body: 'seeded',
    html_body: null,
    headers: '{}',
    purpose: 'restock-alert',
    created_at: new Date(Date.parse(EARLIER) + i * 1000).toISOString(),
    store_domain: store(i),
  }));
  const suppressions = Array.from({ length: 1000 }, (_, i) => ({ store_domain: store(i), email: `shopper-${i}@example.com`, email_key: `shopper-${i}@example.com`, reason: 'bounce', detail: null, created_at: EARLIER }));
  const usage = Array.from({ length: 500 }, (_, i) => ({ shop: store(i), period_start: `2026-${String(1 + (i % 12)).padStart(2, '0')}-${String(1 + Math.floor(i / 12)).padStart(2, '0')}T00:00:00.000Z`, used: i, notified_at: null }));

  for (const [table, rows] of [
    ['notifications', notifications],
    ['restocks', restocks],
    ['subscriptions', subscriptions],
    ['shopify_webhook_events', events],
    ['inventory_variants', variants],
    ['mail_outbox', outbox],
    ['suppressions', suppressions],
    ['plan_usage', usage],
  ] as const) {
    for (let i = 0; i < rows.length; i += 200) {
      const page = rows.slice(i, i + 200);
      await database.write((trx) => trx.insertInto(table).values(page as never).execute());
    }
  }
  // Autovacuum would do this in service; the test cannot wait for it.
  if (database.dialect === 'postgres') await sql`analyze`.execute(database.db);
}

interface Stores {
  dispatch: DispatchRepository;
  alerts: SubscriptionRepository;
  waiting: WaitingRepository;
  webhooks: WebhookEventRepository;
  billing: BillingRepository;
  inventory: InventoryRepository;
  outbox: MailOutboxRepository;
  conversions: ConversionRepository;
}

interface PlanCase {
  name: string;
  /** Runs the store method whose statement is pinned. */
  run(stores: Stores): Promise<unknown>;
  /** Which of the statements it ran is the one pinned (in the order run; negative: from the last). */
  statement?: number;
  sql: Record<Dialect, string>;
  /** Indexes the plan must use, per dialect (a list of names: any of them). */
  indexes: Record<Dialect, Array<string | string[]>>;
  /** The index gives the order asked for: nothing may be sorted. */
  inIndexOrder?: boolean;
}

const both = (index: string) => ({ sqlite: [index], postgres: [index] });

const CASES: PlanCase[] = [
  {
    name: 'dispatch: claiming alerts whose lease ran out walks notifications_queue in its order',
    run: ({ dispatch }) => dispatch.claimNotifications('worker_test', NOW, LATER, 10),
    statement: 0,
    sql: {
      sqlite: 'select "id" from "notifications" where "status" = ? and "lease_until" < ? order by "next_attempt_at", "restock_id", "position" limit ?',
      postgres: 'select "id" from "notifications" where "status" = $1 and "lease_until" < $2 order by "next_attempt_at", "restock_id", "position" limit $3 for update skip locked',
    },
    indexes: both('notifications_queue'),
    inIndexOrder: true,
  },
  {
    name: 'dispatch: claiming queued alerts that are due walks notifications_queue in its order',
    run: ({ dispatch }) => dispatch.claimNotifications('worker_test', NOW, LATER, 1000),
    statement: 1,
    sql: {
      sqlite: 'select "id" from "notifications" where "status" = ? and "next_attempt_at" <= ? order by "next_attempt_at", "restock_id", "position" limit ?',
      postgres: 'select "id" from "notifications" where "status" = $1 and "next_attempt_at" <= $2 order by "next_attempt_at", "restock_id", "position" limit $3 for update skip locked',
    },
    indexes: both('notifications_queue'),
    inIndexOrder: true,
  },
  {
    name: 'dispatch: the next restock due comes from restocks_due, its alerts still out from the ledger by restock',
    run: ({ dispatch }) => dispatch.claimDueRestock('worker_test', NOW, LATER),
    sql: {
      sqlite:
        'select "id" from "restocks" where "status" = ? and "next_batch_at" <= ? and ("lease_until" is null or "lease_until" < ?) and not exists (select "notifications"."id" from "notifications" where "notifications"."restock_id" = "restocks"."id" and ("notifications"."status" = ? or ("notifications"."status" = ? and "notifications"."next_attempt_at" <= ?))) order by "next_batch_at" limit ?',
      postgres:
        'select "id" from "restocks" where "status" = $1 and "next_batch_at" <= $2 and ("lease_until" is null or "lease_until" < $3) and not exists (select "notifications"."id" from "notifications" where "notifications"."restock_id" = "restocks"."id" and ("notifications"."status" = $4 or ("notifications"."status" = $5 and "notifications"."next_attempt_at" <= $6))) order by "next_batch_at" limit $7 for update skip locked',
    },
    indexes: { sqlite: ['restocks_due', 'notifications_once_per_restock'], postgres: ['restocks_due', 'notifications_once_per_restock'] },
    inIndexOrder: true,
  },
  {
    name: 'dispatch: the restock already live for a variant is found through restocks_one_live',
    async run({ dispatch }) {
      const live = (await dispatch.listRestocks('shop-0.myshopify.com', 300)).find((row) => row.status === 'dispatching')!;
      await dispatch.insertRestock({ ...live, id: 'rst_again' });
    },
    // The list, the insert the live one refuses, then the lookup.
    statement: 2,
    sql: {
      sqlite: `select * from "restocks" where "store_domain" = ? and "product_id" = ? and coalesce(variant_id, '') = ? and "status" = 'dispatching'`,
      postgres: `select * from "restocks" where "store_domain" = $1 and "product_id" = $2 and coalesce(variant_id, '') = $3 and "status" = 'dispatching'`,
    },
    indexes: both('restocks_one_live'),
  },
  {
    name: "dispatch: a store's past alerts to some addresses come from notifications_by_address_key",
    run: ({ dispatch }) => dispatch.sentTo('shop-1.myshopify.com', ['shopper-1@example.com', 'shopper-21@example.com']),
    sql: {
      sqlite: 'select "email_key", "restock_id", "sent_at", "kind", "channel", "contact_point_id" from "notifications" where "store_domain" = ? and "email_key" in (?, ?) and "status" = ?',
      postgres: 'select "email_key", "restock_id", "sent_at", "kind", "channel", "contact_point_id" from "notifications" where "store_domain" = $1 and "email_key" in ($2, $3) and "status" = $4',
    },
    indexes: both('notifications_by_address_key'),
  },
  {
    name: 'dispatch: subscriptions already alerted come from notifications_by_subscription',
    run: ({ dispatch }) => dispatch.alreadySent(['sub_1', 'sub_2']),
    sql: {
      sqlite: 'select "subscription_id", "restock_id", "channel", "contact_point_id", "kind" from "notifications" where "subscription_id" in (?, ?) and "status" = ?',
      postgres: 'select "subscription_id", "restock_id", "channel", "contact_point_id", "kind" from "notifications" where "subscription_id" in ($1, $2) and "status" = $3',
    },
    indexes: both('notifications_by_subscription'),
  },
  {
    name: 'dispatch: alerts held by the plan are counted from notifications_held_by_plan alone',
    run: ({ dispatch }) => dispatch.countHeldByPlan('shop-6.myshopify.com'),
    sql: {
      sqlite: `select count(*) as "n" from "notifications" where "store_domain" = ? and "held_by_plan" = 1 and "status" = 'queued'`,
      postgres: `select count(*) as "n" from "notifications" where "store_domain" = $1 and "held_by_plan" = 1 and "status" = 'queued'`,
    },
    indexes: both('notifications_held_by_plan'),
  },
  {
    name: "dispatch: a store's suppressed addresses are looked up by its key",
    run: ({ dispatch }) => dispatch.suppressed('shop-1.myshopify.com', ['shopper-1@example.com', 'shopper-21@example.com']),
    sql: {
      sqlite: 'select "email_key", "reason" from "suppressions" where "store_domain" = ? and "email_key" in (?, ?)',
      postgres: 'select "email_key", "reason" from "suppressions" where "store_domain" = $1 and "email_key" in ($2, $3)',
    },
    indexes: both('suppressions_by_key'),
  },
  {
    name: "dispatch: a store's restocks, newest first, in restocks_by_store order",
    run: ({ dispatch }) => dispatch.listRestocks('shop-1.myshopify.com', 50),
    sql: {
      sqlite: 'select * from "restocks" where "store_domain" = ? order by "detected_at" desc limit ?',
      postgres: 'select * from "restocks" where "store_domain" = $1 order by "detected_at" desc limit $2',
    },
    indexes: both('restocks_by_store'),
    inIndexOrder: true,
  },
  {
    name: "alerts: the waiting subscribers of a variant, in signup order, from the product's active subscriptions",
    run: ({ waiting }) =>
      waiting.waiting({ storeDomain: 'shop-1.myshopify.com', includeUnowned: false, productId: 'prod_1', variantId: 'var_1', thirdParty: false, after: { createdAt: EARLIER, id: 'sub_0' }, limit: 10 }),
    sql: {
      sqlite:
        'select "id", "email", "product_id", "variant_id", "created_at", "store_domain", "locale", "email_muted" from "subscriptions" where "product_id" = ? and "status" = \'active\' and "third_party" = ? and ("variant_id" = ? or "variant_id" is null) and "store_domain" = ? and ("created_at" > ? or ("created_at" = ? and "id" > ?)) order by "created_at", "id" limit ?',
      postgres:
        'select "id", "email", "product_id", "variant_id", "created_at", "store_domain", "locale", "email_muted" from "subscriptions" where "product_id" = $1 and "status" = \'active\' and "third_party" = $2 and ("variant_id" = $3 or "variant_id" is null) and "store_domain" = $4 and ("created_at" > $5 or ("created_at" = $6 and "id" > $7)) order by "created_at", "id" limit $8',
    },
    // PostgreSQL may as well take the partial subscriptions_one_live: it too holds only the
    // active subscriptions, product first.
    indexes: { sqlite: ['subscriptions_by_product'], postgres: [['subscriptions_by_product', 'subscriptions_one_live']] },
  },
  {
    name: 'alerts: the live subscription a duplicate signup runs into is one probe of subscriptions_one_live',
    async run({ alerts }) {
      const target = { productId: 'prod_1', variantId: 'var_1', email: 'shopper-1@example.com' };
      await alerts.subscribe(target, { storeDomain: 'shop-1.myshopify.com', agentId: null, thirdParty: false }, NOW);
    },
    statement: 1,
    sql: {
      sqlite: `select * from "subscriptions" where "product_id" = ? and coalesce(variant_id, '') = ? and "email_key" = ? and coalesce(store_domain, '') = ? and coalesce(agent_id, '') = ? and "status" = 'active'`,
      postgres: `select * from "subscriptions" where "product_id" = $1 and coalesce(variant_id, '') = $2 and "email_key" = $3 and coalesce(store_domain, '') = $4 and coalesce(agent_id, '') = $5 and "status" = 'active'`,
    },
    indexes: both('subscriptions_one_live'),
  },
  {
    name: "alerts: an agent's live third-party subscriptions for a store are counted from subscriptions_third_party_live alone",
    async run({ alerts }) {
      const target = { productId: 'prod_9', variantId: null, email: 'new-shopper@example.com' };
      await alerts.subscribeWithin(target, { storeDomain: 'shop-2.myshopify.com', agentId: 'agt_2', thirdParty: true }, NOW, 50);
    },
    // The live lookup, the count, then the insert (PostgreSQL takes an advisory lock first).
    statement: -2,
    sql: {
      sqlite: `select count(*) as "n" from "subscriptions" where "agent_id" = ? and coalesce(store_domain, '') = ? and "status" = 'active' and "third_party" = 1`,
      postgres: `select count(*) as "n" from "subscriptions" where "agent_id" = $1 and coalesce(store_domain, '') = $2 and "status" = 'active' and "third_party" = 1`,
    },
    indexes: both('subscriptions_third_party_live'),
  },
  {
    name: "alerts: an address's waiting subscriptions an alert fulfils are found through subscriptions_by_address",
    // The update runs inside the settling transaction the worker opens.
    run: ({ waiting }) =>
      waiting['database'].write((trx) =>
        waiting.markAddressesNotified(trx, [{ storeDomain: 'shop-1.myshopify.com', productId: 'prod_1', variantId: 'var_1', emailKey: 'shopper-1@example.com' }], NOW),
      ),
    statement: -1,
    sql: {
      sqlite: `update "subscriptions" set "status" = ?, "updated_at" = ? where "store_domain" = ? and "email_key" in (?) and "product_id" = ? and "status" = ? and ("variant_id" = ? or "variant_id" is null)`,
      postgres: `update "subscriptions" set "status" = $1, "updated_at" = $2 where "store_domain" = $3 and "email_key" in ($4) and "product_id" = $5 and "status" = $6 and ("variant_id" = $7 or "variant_id" is null)`,
    },
    indexes: both('subscriptions_by_address'),
  },
  {
    name: "alerts: a store's subscriptions of one address come from subscriptions_by_address",
    run: ({ waiting }) => waiting.ofCustomer('shop-1.myshopify.com', 'shopper-1@example.com'),
    sql: {
      sqlite: 'select * from "subscriptions" where "store_domain" = ? and "email_key" = ?',
      postgres: 'select * from "subscriptions" where "store_domain" = $1 and "email_key" = $2',
    },
    indexes: both('subscriptions_by_address'),
  },
  // A store's pages at any size (bench/scale.ts): counts read from what triggers keep, lists
  // read in an index's order and stopped at their limit.
  {
    name: "alerts: a store's subscriptions per status are read from subscription_counts, not counted",
    run: ({ waiting }) => waiting.countsByStatus('shop-1.myshopify.com'),
    sql: {
      sqlite: 'select "status", "n" from "subscription_counts" where "store_domain" = ? and "n" > ?',
      postgres: 'select "status", "n" from "subscription_counts" where "store_domain" = $1 and "n" > $2',
    },
    indexes: { sqlite: ['sqlite_autoindex_subscription_counts_1'], postgres: ['subscription_counts_pk'] },
  },
  {
    name: "alerts: a store's waiting subscribers per product are read from waitlists, not counted",
    run: ({ waiting }) => waiting.waitingCounts('shop-1.myshopify.com', 1000, 'product'),
    sql: {
      sqlite: `select "product_id", nullif(variant_key, '') as "variant_id", "waiting" from "waitlists" where "store_domain" = ? order by "product_id", nullif(variant_key, '') limit ?`,
      postgres: `select "product_id", nullif(variant_key, '') as "variant_id", "waiting" from "waitlists" where "store_domain" = $1 order by "product_id", nullif(variant_key, '') limit $2`,
    },
    indexes: { sqlite: ['sqlite_autoindex_waitlists_1'], postgres: ['waitlists_pk'] },
  },
  {
    name: "alerts: a store's most wanted products come from waitlists_most_wanted in its order",
    run: ({ waiting }) => waiting.waitingCounts('shop-1.myshopify.com', 20, 'most-wanted'),
    sql: {
      sqlite: `select "product_id", nullif(variant_key, '') as "variant_id", "waiting" from "waitlists" where "store_domain" = ? order by "waiting" desc, "product_id", "variant_key" limit ?`,
      postgres: `select "product_id", nullif(variant_key, '') as "variant_id", "waiting" from "waitlists" where "store_domain" = $1 order by "waiting" desc, "product_id", "variant_key" limit $2`,
    },
    indexes: both('waitlists_most_wanted'),
    inIndexOrder: true,
  },
  {
    name: "purchasing: a store's first page of ranked waitlists comes from waitlists_purchasing in its order",
    run: ({ waiting }) => waiting.rankedWaitlists('shop-1.myshopify.com', null, 100),
    sql: {
      sqlite: `select "product_id", "variant_key", "waiting", "waiting_since_sum" from "waitlists" where "store_domain" = ? order by "waiting" desc, "waiting_since_sum", "product_id", "variant_key" limit ?`,
      postgres: `select "product_id", "variant_key", "waiting", "waiting_since_sum" from "waitlists" where "store_domain" = $1 order by "waiting" desc, "waiting_since_sum", "product_id", "variant_key" limit $2`,
    },
    indexes: both('waitlists_purchasing'),
    inIndexOrder: true,
  },
  {
    name: 'purchasing: a later page seeks the rest of its waiting count in waitlists_purchasing',
    run: ({ waiting }) => waiting.rankedWaitlists('shop-1.myshopify.com', { waiting: 2, waitingSinceSum: 3_000_000_000, productId: 'prod_1', variantKey: '' }, 100),
    statement: 0,
    sql: {
      sqlite: `select "product_id", "variant_key", "waiting", "waiting_since_sum" from "waitlists" where "store_domain" = ? and "waiting" = ? and ("waiting_since_sum", "product_id", "variant_key") > (?, ?, ?) order by "waiting" desc, "waiting_since_sum", "product_id", "variant_key" limit ?`,
      postgres: `select "product_id", "variant_key", "waiting", "waiting_since_sum" from "waitlists" where "store_domain" = $1 and "waiting" = $2 and ("waiting_since_sum", "product_id", "variant_key") > ($3, $4, $5) order by "waiting" desc, "waiting_since_sum", "product_id", "variant_key" limit $6`,
    },
    indexes: both('waitlists_purchasing'),
    inIndexOrder: true,
  },
  {
    name: 'purchasing: a later page then seeks the smaller waiting counts in waitlists_purchasing',
    run: ({ waiting }) => waiting.rankedWaitlists('shop-1.myshopify.com', { waiting: 2, waitingSinceSum: 3_000_000_000, productId: 'prod_1', variantKey: '' }, 100),
    statement: 1,
    sql: {
      sqlite: `select "product_id", "variant_key", "waiting", "waiting_since_sum" from "waitlists" where "store_domain" = ? and "waiting" < ? order by "waiting" desc, "waiting_since_sum", "product_id", "variant_key" limit ?`,
      postgres: `select "product_id", "variant_key", "waiting", "waiting_since_sum" from "waitlists" where "store_domain" = $1 and "waiting" < $2 order by "waiting" desc, "waiting_since_sum", "product_id", "variant_key" limit $3`,
    },
    indexes: both('waitlists_purchasing'),
    inIndexOrder: true,
  },
  {
    name: "alerts: a store's latest unsubscribes come from the partial subscriptions_unsubscribed in its order",
    run: ({ waiting }) => waiting.inStatus('shop-1.myshopify.com', 'unsubscribed', 100),
    sql: {
      sqlite: `select * from "subscriptions" where "store_domain" = ? and "status" = 'unsubscribed' order by "updated_at" desc limit ?`,
      postgres: `select * from "subscriptions" where "store_domain" = $1 and "status" = 'unsubscribed' order by "updated_at" desc limit $2`,
    },
    indexes: both('subscriptions_unsubscribed'),
    inIndexOrder: true,
  },
  {
    name: "dispatch: a store's ledger, newest first, is read from notifications_ledger in its order",
    run: ({ dispatch }) => dispatch.listNotifications({ storeDomain: 'shop-1.myshopify.com', limit: 200 }),
    sql: {
      sqlite: 'select * from "notifications" where "store_domain" = ? order by "created_at" desc, "position" desc limit ?',
      postgres: 'select * from "notifications" where "store_domain" = $1 order by "created_at" desc, "position" desc limit $2',
    },
    indexes: both('notifications_ledger'),
    inIndexOrder: true,
  },
  {
    // PostgreSQL has an index led by (store_domain, status) (migration 0017); SQLite a partial
    // index per status but sent (migration 0018), which only a literal status selects.
    name: "dispatch: a store's ledger in one status, newest first, is read from notifications_ledger_by_status (PostgreSQL) or that status's partial index (SQLite) in its order",
    run: ({ dispatch }) => dispatch.listNotifications({ storeDomain: 'shop-1.myshopify.com', status: 'failed', limit: 200 }),
    sql: {
      sqlite: `select * from "notifications" where "store_domain" = ? and "status" = 'failed' order by "created_at" desc, "position" desc limit ?`,
      postgres: `select * from "notifications" where "store_domain" = $1 and "status" = 'failed' order by "created_at" desc, "position" desc limit $2`,
    },
    indexes: { sqlite: ['notifications_ledger_failed'], postgres: ['notifications_ledger_by_status'] },
    inIndexOrder: true,
  },
  {
    name: "dispatch: a store's queued alerts, newest first, are read from notifications_ledger_queued (SQLite) without walking its sent ones",
    run: ({ dispatch }) => dispatch.listNotifications({ storeDomain: 'shop-1.myshopify.com', status: 'queued', limit: 200 }),
    sql: {
      sqlite: `select * from "notifications" where "store_domain" = ? and "status" = 'queued' order by "created_at" desc, "position" desc limit ?`,
      postgres: `select * from "notifications" where "store_domain" = $1 and "status" = 'queued' order by "created_at" desc, "position" desc limit $2`,
    },
    indexes: { sqlite: ['notifications_ledger_queued'], postgres: ['notifications_ledger_by_status'] },
    inIndexOrder: true,
  },
  {
    name: "dispatch: a store's queued alerts are counted through notifications_ledger_queued (SQLite) or notifications_ledger_by_status, not its whole ledger",
    run: ({ dispatch }) => dispatch.countsByStatus('shop-1.myshopify.com'),
    statement: 1,
    sql: {
      sqlite: `select 'queued' as "status", count(*) as "n" from "notifications" where "store_domain" = ? and "status" = 'queued'`,
      postgres: `select 'queued' as "status", count(*) as "n" from "notifications" where "store_domain" = $1 and "status" = 'queued'`,
    },
    indexes: { sqlite: ['notifications_ledger_queued'], postgres: ['notifications_ledger_by_status'] },
  },
  {
    name: "dispatch: a store's alerts in a final status are read from ledger_counts, not counted",
    run: ({ dispatch }) => dispatch.countsByStatus('shop-1.myshopify.com'),
    sql: {
      sqlite: 'select "status", "n" from "ledger_counts" where "store_domain" = ? and "n" > ?',
      postgres: 'select "status", "n" from "ledger_counts" where "store_domain" = $1 and "n" > $2',
    },
    indexes: { sqlite: ['PRIMARY KEY'], postgres: ['ledger_counts_pk'] },
  },
  {
    name: 'dispatch: the alerts a store sent per day and channel are read from alerts_sent_daily',
    run: ({ dispatch }) => dispatch.sentDaily('shop-1.myshopify.com', '2026-01-01'),
    sql: {
      sqlite: 'select "day", "channel", "kind", "n" from "alerts_sent_daily" where "store_domain" = ? and "day" >= ? and "n" > ?',
      postgres: 'select "day", "channel", "kind", "n" from "alerts_sent_daily" where "store_domain" = $1 and "day" >= $2 and "n" > $3',
    },
    indexes: { sqlite: ['PRIMARY KEY'], postgres: ['alerts_sent_daily_pk'] },
  },
  {
    name: 'dispatch: the alerts sent for the products a report shows are read from alerts_sent_by_product',
    run: ({ dispatch }) => dispatch.sentForProducts('shop-1.myshopify.com', '2026-01-01', ['gid://shopify/Product/1', 'gid://shopify/Product/2']),
    sql: {
      sqlite: `select "product_id", nullif(variant_key, '') as "variant_id", "kind", sum("n") as "n" from "alerts_sent_by_product" where "store_domain" = ? and "product_id" in (?, ?) and "day" >= ? group by "product_id", "variant_key", "kind"`,
      postgres: `select "product_id", nullif(variant_key, '') as "variant_id", "kind", sum("n") as "n" from "alerts_sent_by_product" where "store_domain" = $1 and "product_id" in ($2, $3) and "day" >= $4 group by "product_id", "variant_key", "kind"`,
    },
    indexes: { sqlite: ['PRIMARY KEY'], postgres: ['alerts_sent_by_product_pk'] },
  },
  {
    name: 'dispatch: the first products alerts went out for come from alerts_sent_by_product in its order',
    run: ({ dispatch }) => dispatch.productsSentSince('shop-1.myshopify.com', '2026-01-01', 200),
    sql: {
      sqlite: `select "product_id", nullif(variant_key, '') as "variant_id" from "alerts_sent_by_product" where "store_domain" = ? and "day" >= ? and "kind" = 'alert' and "n" > ? group by "product_id", "variant_key" order by "product_id", "variant_key" limit ?`,
      postgres: `select "product_id", nullif(variant_key, '') as "variant_id" from "alerts_sent_by_product" where "store_domain" = $1 and "day" >= $2 and "kind" = 'alert' and "n" > $3 group by "product_id", "variant_key" order by "product_id", "variant_key" limit $4`,
    },
    indexes: { sqlite: ['PRIMARY KEY'], postgres: ['alerts_sent_by_product_pk'] },
    inIndexOrder: true,
  },
  {
    name: 'conversions: clicks per day and channel are read from alert_clicks_daily',
    run: ({ conversions }) => conversions.clicksDaily('shop-1.myshopify.com', '2026-01-01'),
    sql: {
      sqlite: 'select "day", "channel", "n" from "alert_clicks_daily" where "store_domain" = ? and "day" >= ? and "n" > ?',
      postgres: 'select "day", "channel", "n" from "alert_clicks_daily" where "store_domain" = $1 and "day" >= $2 and "n" > $3',
    },
    indexes: { sqlite: ['PRIMARY KEY'], postgres: ['alert_clicks_daily_pk'] },
  },
  {
    name: 'conversions: clicks for the products a report shows are read from alert_clicks_by_product',
    run: ({ conversions }) => conversions.clicksForProducts('shop-1.myshopify.com', '2026-01-01', ['gid://shopify/Product/1', 'gid://shopify/Product/2']),
    sql: {
      sqlite: `select "product_id", nullif(variant_key, '') as "variant_id", sum("n") as "n" from "alert_clicks_by_product" where "store_domain" = ? and "product_id" in (?, ?) and "day" >= ? group by "product_id", "variant_key"`,
      postgres: `select "product_id", nullif(variant_key, '') as "variant_id", sum("n") as "n" from "alert_clicks_by_product" where "store_domain" = $1 and "product_id" in ($2, $3) and "day" >= $4 group by "product_id", "variant_key"`,
    },
    indexes: { sqlite: ['PRIMARY KEY'], postgres: ['alert_clicks_by_product_pk'] },
  },
  {
    name: 'conversions: the first products whose alerts were clicked come from alert_clicks_by_product in its order',
    run: ({ conversions }) => conversions.productsClickedSince('shop-1.myshopify.com', '2026-01-01', 200),
    sql: {
      sqlite: `select "product_id", nullif(variant_key, '') as "variant_id" from "alert_clicks_by_product" where "store_domain" = ? and "day" >= ? and "n" > ? group by "product_id", "variant_key" order by "product_id", "variant_key" limit ?`,
      postgres: `select "product_id", nullif(variant_key, '') as "variant_id" from "alert_clicks_by_product" where "store_domain" = $1 and "day" >= $2 and "n" > $3 group by "product_id", "variant_key" order by "product_id", "variant_key" limit $4`,
    },
    indexes: { sqlite: ['PRIMARY KEY'], postgres: ['alert_clicks_by_product_pk'] },
    inIndexOrder: true,
  },
  {
    name: "dispatch: a store's suppressions, newest first, come from suppressions_by_store_time in its order",
    run: ({ dispatch }) => dispatch.listSuppressions('shop-1.myshopify.com', 500),
    sql: {
      sqlite: 'select * from "suppressions" where "store_domain" = ? order by "created_at" desc limit ?',
      postgres: 'select * from "suppressions" where "store_domain" = $1 order by "created_at" desc limit $2',
    },
    indexes: both('suppressions_by_store_time'),
    inIndexOrder: true,
  },
  {
    name: "conversions: a page of the attributed orders export comes from order_attributions_by_store_order in its order",
    run: ({ conversions }) => conversions.attributionPage('shop-1.myshopify.com', { placedAt: EARLIER, orderId: 'ord_1', lineId: 'line_1' }, 1000),
    sql: {
      sqlite:
        'select * from "order_attributions" where "store_domain" = ? and ("placed_at" > ? or ("placed_at" = ? and "order_id" > ?) or ("placed_at" = ? and "order_id" = ? and "line_id" > ?)) order by "placed_at", "order_id", "line_id" limit ?',
      postgres:
        'select * from "order_attributions" where "store_domain" = $1 and ("placed_at" > $2 or ("placed_at" = $3 and "order_id" > $4) or ("placed_at" = $5 and "order_id" = $6 and "line_id" > $7)) order by "placed_at", "order_id", "line_id" limit $8',
    },
    indexes: both('order_attributions_by_store_order'),
    inIndexOrder: true,
  },
  {
    name: "conversions: the first page of the attributed orders export comes from order_attributions_by_store_order in its order",
    run: ({ conversions }) => conversions.attributionPage('shop-1.myshopify.com', undefined, 100),
    sql: {
      sqlite: 'select * from "order_attributions" where "store_domain" = ? order by "placed_at", "order_id", "line_id" limit ?',
      postgres: 'select * from "order_attributions" where "store_domain" = $1 order by "placed_at", "order_id", "line_id" limit $2',
    },
    indexes: both('order_attributions_by_store_order'),
    inIndexOrder: true,
  },
  {
    name: 'conversions: attributed orders per day are read from orders_daily',
    run: ({ conversions }) => conversions.ordersDaily('shop-1.myshopify.com', '2026-01-01'),
    sql: {
      sqlite: 'select "day", "shop_currency", "currency", "orders", "direct_orders", "net_minor", "net_shop_minor" from "orders_daily" where "store_domain" = ? and "day" >= ? and "orders" > ?',
      postgres: 'select "day", "shop_currency", "currency", "orders", "direct_orders", "net_minor", "net_shop_minor" from "orders_daily" where "store_domain" = $1 and "day" >= $2 and "orders" > $3',
    },
    indexes: { sqlite: ['PRIMARY KEY'], postgres: ['orders_daily_pk'] },
  },
  {
    name: 'conversions: attributed orders per channel are read from orders_by_channel_daily',
    run: ({ conversions }) => conversions.ordersPerChannel('shop-1.myshopify.com', '2026-01-01'),
    sql: {
      sqlite: 'select "channel", "shop_currency", sum("orders") as "orders", sum("net_shop_minor") as "revenue" from "orders_by_channel_daily" where "store_domain" = ? and "day" >= ? and "orders" > ? group by "channel", "shop_currency"',
      postgres: 'select "channel", "shop_currency", sum("orders") as "orders", sum("net_shop_minor") as "revenue" from "orders_by_channel_daily" where "store_domain" = $1 and "day" >= $2 and "orders" > $3 group by "channel", "shop_currency"',
    },
    indexes: { sqlite: ['PRIMARY KEY'], postgres: ['orders_by_channel_daily_pk'] },
  },
  {
    name: 'conversions: attributed orders per product are read from orders_by_product_daily by day',
    run: ({ conversions }) => conversions.ordersPerProduct('shop-1.myshopify.com', '2026-01-01'),
    sql: {
      sqlite: `select "product_id", nullif(variant_key, '') as "variant_id", "shop_currency" as "currency", sum("orders") as "orders", sum("net_shop_minor") as "revenue" from "orders_by_product_daily" where "store_domain" = ? and "day" >= ? and "orders" > ? group by "product_id", "variant_key", "shop_currency"`,
      postgres: `select "product_id", nullif(variant_key, '') as "variant_id", "shop_currency" as "currency", sum("orders") as "orders", sum("net_shop_minor") as "revenue" from "orders_by_product_daily" where "store_domain" = $1 and "day" >= $2 and "orders" > $3 group by "product_id", "variant_key", "shop_currency"`,
    },
    // PostgreSQL weighs the two by its statistics; on a seeded handful of rows it may take the key.
    indexes: { sqlite: ['orders_by_product_daily_by_day'], postgres: [['orders_by_product_daily_by_day', 'orders_by_product_daily_pk']] },
  },
  {
    name: "shopify: the webhook queue is claimed through shopify_webhook_events_queue",
    run: ({ webhooks }) => webhooks.claim(10, 60_000),
    sql: {
      sqlite:
        'select "event_id" from "shopify_webhook_events" where (("status" = ? and ("lease_until" is null or "lease_until" <= ?)) or ("status" = ? and "lease_until" <= ?)) order by "received_at", "event_id" limit ?',
      postgres:
        'select "event_id" from "shopify_webhook_events" where (("status" = $1 and ("lease_until" is null or "lease_until" <= $2)) or ("status" = $3 and "lease_until" <= $4)) order by "received_at", "event_id" limit $5 for update skip locked',
    },
    indexes: both('shopify_webhook_events_queue'),
  },
  {
    name: "billing: the period's usage is read, and locked on PostgreSQL, by its key",
    run: ({ billing }) => billing.reserveUsage('shop-1.myshopify.com', '2026-02-01T00:00:00.000Z', 1000, 1000, 1),
    statement: 1,
    sql: {
      sqlite: 'select "used" from "plan_usage" where "shop" = ? and "period_start" = ?',
      postgres: 'select "used" from "plan_usage" where "shop" = $1 and "period_start" = $2 for update',
    },
    indexes: { sqlite: ['sqlite_autoindex_plan_usage_1'], postgres: ['plan_usage_pk'] },
  },
  {
    name: "billing: the store's plan is read, and locked on PostgreSQL, before an event changes it",
    run: ({ billing }) =>
      billing.applyEvent(
        'stripe',
        'evt_plan_lock',
        'customer.subscription.updated',
        { shop: 'shop-1.myshopify.com', plan: 'starter', status: 'active', provider: 'stripe', externalId: 'sub_ext', at: NOW, periodStart: NOW, periodEnd: LATER },
        NOW,
      ),
    statement: 1,
    sql: {
      sqlite: 'select * from "store_plans" where "shop" = ?',
      postgres: 'select * from "store_plans" where "shop" = $1 for update',
    },
    indexes: { sqlite: ['sqlite_autoindex_store_plans_1'], postgres: ['store_plans_pkey'] },
  },
  {
    name: 'inventory: a variant is found by its inventory item through inventory_variants_by_item',
    run: ({ inventory }) => inventory.byItem('shop-1.myshopify.com', 'item_1'),
    sql: {
      sqlite: 'select * from "inventory_variants" where "store_domain" = ? and "inventory_item_id" = ?',
      postgres: 'select * from "inventory_variants" where "store_domain" = $1 and "inventory_item_id" = $2',
    },
    indexes: both('inventory_variants_by_item'),
  },
  {
    name: "mail: a store's outbox, newest first, from mail_outbox_by_store",
    run: ({ outbox }) => outbox.listForStore('shop-1.myshopify.com', 20),
    sql: {
      // Mail that carries a credential is filtered out on the index's rows, never listed (docs/security.md).
      sqlite: 'select * from "mail_outbox" where "store_domain" = ? and "purpose" not in (?, ?, ?, ?) order by "created_at" desc, "id" desc limit ?',
      postgres: 'select * from "mail_outbox" where "store_domain" = $1 and "purpose" not in ($2, $3, $4, $5) order by "created_at" desc, "id" desc limit $6',
    },
    indexes: both('mail_outbox_by_store'),
  },
];

for (const dialect of testDialects()) {
  describe(`indexed queries on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    let testDatabase: TestDatabase;
    let database: Database;
    let stores: Stores;
    before(async () => {
      testDatabase = await createTestDatabase(dialect);
      database = Database.open(testConfig(testDatabase.url).database);
      await seed(database);
      stores = {
        dispatch: new DispatchRepository(database),
        alerts: new SubscriptionRepository(database),
        waiting: new WaitingRepository(database),
        webhooks: new WebhookEventRepository(database),
        billing: new BillingRepository(database),
        inventory: new InventoryRepository(database, new LocalChangeBus()),
        outbox: new MailOutboxRepository(database),
        conversions: new ConversionRepository(database),
      };
    });
    after(async () => {
      await database.close();
      await testDatabase.drop();
    });

    for (const query of CASES) {
      it(query.name, async () => {
        const statements = await statementsOf(() => query.run(stores));
        const statement = statements.at(query.statement ?? 0);
        assert.ok(statement, `it ran ${statements.length} statements:\n${statements.map((s) => s.sql).join('\n')}`);
        assert.equal(statement.sql, query.sql[dialect]);
        const plan = await planOf(database, statement, query.inIndexOrder);
        for (const index of query.indexes[dialect]) assertUsesIndex(dialect, plan, index);
        assertNoFullScan(dialect, plan);
        if (query.inIndexOrder) assertNoSort(dialect, plan);
      });
    }

    it('the plan checks see an index lost: a claim ordered other than notifications_queue must sort', async () => {
      const statement = database.db
        .selectFrom('notifications')
        .select('id')
        .where('status', '=', 'queued')
        .where('next_attempt_at', '<=', NOW)
        .orderBy('position')
        .orderBy('next_attempt_at')
        .limit(10)
        .compile();
      const plan = await planOf(database, statement, true);
      assert.throws(() => assertNoSort(dialect, plan), /nothing is sorted/);
    });
  });
}
