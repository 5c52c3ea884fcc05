import type { FastifyBaseLogger } from 'fastify';
import type { z } from 'zod';
import type { SubscriptionService } from '../alerts/service.ts';
import type { OrderSink } from '../conversions/service.ts';
import { isoAfter, nowIso } from '../core/clock.ts';
import type { MailTransport } from '../core/mail/transport.ts';
import type { Metrics } from '../core/metrics.ts';
import type { WorkerJob } from '../core/jobs.ts';
import type { StockSource } from '../core/connectors/stock-report.ts';
import type { InventoryService } from '../inventory/service.ts';
import type { StoreService } from '../stores/service.ts';
import type { AppSubscriptionNews } from '../billing/service.ts';
import type { AdminApi } from './admin-api.ts';
import { appSubscriptionNews } from './billing.ts';
import type { ShopifyConnections } from './connections.ts';
import { productOfInventoryItem } from './catalog.ts';
import { cancellationReport, orderCancelledPayload, orderCreatePayload, orderReport, refundCreatePayload, refundReport } from './order-payloads.ts';
import { readProductReports } from './reconcile.ts';
import {
  customerPayload,
  gid,
  inventoryLevelPayload,
  isHandledTopic,
  productUpdatePayload,
  productUpdateReports,
  shopDomainPayload,
  type HandledTopic,
} from './payloads.ts';
import type { WebhookEventRow, WebhookEventRepository } from './webhook-events.ts';

/** What Shopify's webhooks ask of the subscriptions: what shoppers wait for (a product read back), a customer's data, and erasing a customer or a store. */
export type WebhookSubscriptions = Pick<SubscriptionService, 'customerData' | 'eraseCustomer' | 'eraseStore' | 'waitingProducts' | 'waitingCountries'>;

/** What Shopify's webhooks tell the inventory: stock, levels and countries not sold in, and a store to forget. */
export type WebhookInventory = Pick<InventoryService, 'reportStock' | 'reportLevel' | 'forgetStore' | 'setUnlistedCountries'>;

/** What the webhook worker asks of the stores: a store as it is. */
export type WebhookStores = Pick<StoreService, 'findStore'>;

/** Events one run takes; small, so one run stays short even when each needs the Admin API. */
const CLAIM_SIZE = 10;
/** Long enough for a whole claim whose every event waits out Shopify's timeout. */
const LEASE_MS = 10 * 60_000;

/**
 * Compliance and order payloads name customers and shops (an order its buyer's address); once
 * handled, only the record that they were is kept.
 */
const CARRIES_PERSONAL_DATA = new Set(['CUSTOMERS_DATA_REQUEST', 'CUSTOMERS_REDACT', 'SHOP_REDACT', 'ORDERS_CREATE', 'ORDERS_CANCELLED', 'REFUNDS_CREATE']);
/** Done events are kept this long, well past Shopify's retries (up to 4 hours), to recognise late ones. */
const KEEP_DONE_MS = 7 * 24 * 3600_000;
/** Failed events are kept longer, for someone to look into. */
const KEEP_FAILED_MS = 30 * 24 * 3600_000;
const PRUNE_EVERY_MS = 3600_000;
const PRUNE_LIMIT = 1000;

/** Where Shopify's news about a store's app subscription goes (the billing feature). */
export interface ShopifyBillingSink {
  appSubscriptionChanged(shop: string, eventId: string, news: AppSubscriptionNews): Promise<string>;
}

export interface WebhookWorkerDeps {
  events: WebhookEventRepository;
  inventory: WebhookInventory;
  stores: WebhookStores;
  /** The stores' Admin API tokens and scopes. */
  connections: ShopifyConnections;
  alerts: WebhookSubscriptions;
  dispatch: {
    eraseCustomer(storeDomain: string, email: string): Promise<number>;
    eraseStore(storeDomain: string): Promise<void>;
  };
  mail: MailTransport;
  admin: AdminApi;
  billing: ShopifyBillingSink;
  /** Where orders, refunds and cancellations go for attribution (the conversions service). */
  orders: OrderSink;
  log: FastifyBaseLogger;
  /** Where the time from receipt to processing is measured. */
  metrics?: Metrics;
  /** Attempts before an event is given up as failed. */
  maxAttempts: number;
  /** First retry delay; doubles with each attempt. */
  retryBaseMs: number;
}

/** A failure that no retry can cure (a payload that does not parse): the event fails at once. */
export class PermanentFailure extends Error {
  override name = 'PermanentFailure';
}

export function webhookJob(deps: WebhookWorkerDeps): WorkerJob {
  let prunedAt = 0;
  return {
    name: 'shopify-webhooks',
    async run() {
      let handled = await processWebhookEvents(deps);
      if (Date.now() - prunedAt >= PRUNE_EVERY_MS) {
        const pruned = await pruneWebhookEvents(deps.events);
        handled += pruned.count;
        // A backlog larger than one slice is worked off on the next runs, not an hour later.
        if (!pruned.more) prunedAt = Date.now();
      }
      return handled;
    },
  };
}

/** The table would otherwise grow with every product edit of every store. */
async function pruneWebhookEvents(events: WebhookEventRepository): Promise<{ count: number; more: boolean }> {
  const now = Date.now();
  const done = await events.prune('done', new Date(now - KEEP_DONE_MS).toISOString(), PRUNE_LIMIT);
  const failed = await events.prune('failed', new Date(now - KEEP_FAILED_MS).toISOString(), PRUNE_LIMIT);
  return { count: done + failed, more: done === PRUNE_LIMIT || failed === PRUNE_LIMIT };
}

/** One bounded slice of the queue: claims a few events and settles each. */
export async function processWebhookEvents(deps: WebhookWorkerDeps): Promise<number> {
  const claimed = await deps.events.claim(CLAIM_SIZE, LEASE_MS);
  for (const event of claimed) await settleEvent(deps, event);
  return claimed.length;
}

async function settleEvent(deps: WebhookWorkerDeps, event: WebhookEventRow): Promise<void> {
  const log = deps.log.child({ shop: event.store_domain, topic: event.topic, eventId: event.event_id, attempt: event.attempts });
  try {
    await processEvent(deps, event);
    await deps.events.markDone(event, { dropPayload: CARRIES_PERSONAL_DATA.has(event.topic) });
    deps.metrics?.webhookLag((Date.now() - Date.parse(event.received_at)) / 1000);
  } catch (err) {
    const reason = err instanceof Error ? err.message : String(err);
    if (err instanceof PermanentFailure || event.attempts >= deps.maxAttempts) {
      log.error({ err }, 'Shopify webhook failed for good');
      await deps.events.markFailed(event, reason);
      return;
    }
    const retryAt = isoAfter(backoffMs(deps.retryBaseMs, event.attempts));
    log.warn({ err, retryAt }, 'Shopify webhook failed; will retry');
    await deps.events.retryLater(event, retryAt, reason);
  }
}

/** Doubling from the base, with up to a quarter of jitter so a burst of failures spreads out. */
function backoffMs(baseMs: number, attempt: number): number {
  const delay = baseMs * 2 ** Math.max(0, attempt - 1);
  return Math.round(delay * (1 + Math.random() * 0.25));
}

async function processEvent(deps: WebhookWorkerDeps, event: WebhookEventRow): Promise<void> {
  if (!isHandledTopic(event.topic)) return;
  const shop = event.store_domain;
  const body = parseJson(event.payload);
  checkSameShop(shop, body);
  const source: StockSource = { kind: 'shopify-webhook', ref: event.event_id, verified: true };
  const handlers: Record<HandledTopic, () => Promise<void>> = {
    PRODUCTS_UPDATE: () => processProductUpdate(deps, shop, parse(productUpdatePayload, body), source),
    INVENTORY_LEVELS_UPDATE: () => processInventoryLevel(deps, shop, parse(inventoryLevelPayload, body), source),
    APP_UNINSTALLED: () => deps.connections.uninstall(shop),
    APP_SUBSCRIPTIONS_UPDATE: async () => void (await deps.billing.appSubscriptionChanged(shop, event.event_id, appSubscriptionNews(body))),
    ORDERS_CREATE: () => deps.orders.recordOrder(converted(() => orderReport(shop, parse(orderCreatePayload, body)))),
    ORDERS_CANCELLED: () => deps.orders.recordCancellation(converted(() => cancellationReport(shop, parse(orderCancelledPayload, body)))),
    REFUNDS_CREATE: () => deps.orders.recordRefund(converted(() => refundReport(shop, parse(refundCreatePayload, body)))),
    CUSTOMERS_DATA_REQUEST: () => processDataRequest(deps, shop, parse(customerPayload, body)),
    CUSTOMERS_REDACT: () => processCustomerRedact(deps, shop, parse(customerPayload, body)),
    SHOP_REDACT: () => processShopRedact(deps, shop, event.event_id),
  };
  await handlers[event.topic]();
}

/**
 * Every variant of the product, as of the payload's `updated_at` (older news is dropped as
 * stale). A variant the payload would restock is read from the Admin API first, which knows
 * what sells online.
 */
export async function processProductUpdate(
  deps: WebhookWorkerDeps,
  shop: string,
  product: z.infer<typeof productUpdatePayload>,
  source: StockSource,
): Promise<void> {
  const reports = productUpdateReports(shop, product);
  if (reports.length > 0) await deps.inventory.reportStock(shop, reports, source, { confirm: (ids) => readFromShopify(deps, shop, ids) });
}

/**
 * One location's level. An item never seen in a product payload is looked up through the
 * Admin API, which maps it to its variant and gives the variant's stock across locations.
 */
export async function processInventoryLevel(
  deps: WebhookWorkerDeps,
  shop: string,
  level: z.infer<typeof inventoryLevelPayload>,
  source: StockSource,
): Promise<void> {
  const inventoryItemId = gid('InventoryItem', level.inventory_item_id);
  const outcome = await deps.inventory.reportLevel(
    shop,
    { inventoryItemId, locationId: gid('Location', level.location_id), available: level.available ?? null, updatedAt: level.updated_at ?? null },
    source,
    { confirm: (ids) => readFromShopify(deps, shop, ids) },
  );
  if (outcome === undefined) await mapInventoryItem(deps, shop, inventoryItemId, source);
}

/**
 * The products as the Admin API has them now, for a restock that a payload suggested. A level
 * or a total may count stock in a shop that does not sell online; Shopify's own answer decides.
 */
async function readFromShopify(deps: WebhookWorkerDeps, shop: string, productIds: string[]) {
  const token = await tokenOrRetry(deps, shop);
  return token ? readProductReports(deps, shop, token, productIds) : [];
}

/** The store's token; none for an uninstalled store (nothing to do), a retry while an install completes. */
async function tokenOrRetry(deps: WebhookWorkerDeps, shop: string): Promise<string | undefined> {
  const token = await deps.admin.tokens.current(shop);
  if (token) return token;
  const store = await deps.stores.findStore(shop);
  // An uninstalled store has no token any more and will not get one back by waiting.
  if (store?.status === 'uninstalled') return undefined;
  // The install may still be completing (Shopify sends events as soon as it is granted).
  throw new Error('No Admin API token for the store yet; cannot read its products');
}

/** An item never seen: its product is looked up, and every variant of it reported as Shopify has it. */
async function mapInventoryItem(deps: WebhookWorkerDeps, shop: string, inventoryItemId: string, source: StockSource): Promise<void> {
  const token = await tokenOrRetry(deps, shop);
  if (!token) return;
  const productId = await productOfInventoryItem(deps.admin, shop, token, inventoryItemId);
  if (!productId) return;
  const reports = await readProductReports(deps, shop, token, [productId]);
  if (reports.length > 0) await deps.inventory.reportStock(shop, reports, source);
}

/** Sends the store owner what is held about the customer; Shopify expects the merchant to answer them. */
export async function processDataRequest(deps: WebhookWorkerDeps, shop: string, request: z.infer<typeof customerPayload>): Promise<void> {
  const owner = (await deps.stores.findStore(shop))?.owner_email;
  if (!owner) throw new PermanentFailure('No owner address is known for the store, so the data request cannot be answered');
  const email = request.customer?.email ?? null;
  const held = email ? await deps.alerts.customerData(shop, email) : [];
  const requestId = request.data_request?.id;
  const lines = [
    `Shopify passed on a customer's request for their data${requestId !== undefined ? ` (request ${requestId})` : ''} for ${shop}.`,
    '',
    email
      ? held.length > 0
        ? `Restock holds these back-in-stock alerts for ${email}:`
        : `Restock holds no data for ${email}.`
      : 'The request names no e-mail address. Restock keeps shoppers only by e-mail address, so it holds nothing for this customer.',
    ...held.map((alert) =>
      [
        '',
        `- Alert ${alert.subscriptionId} (${alert.status})`,
        `  Product: ${alert.productId}${alert.variantId ? `, variant ${alert.variantId}` : ''}`,
        `  E-mail: ${alert.email}`,
        `  Created: ${alert.createdAt}; last changed: ${alert.updatedAt}`,
      ].join('\n'),
    ),
    '',
    'Please pass this on to the customer.',
  ];
  await deps.mail.send({
    to: owner,
    subject: `Customer data request for ${shop}`,
    text: lines.join('\n'),
    purpose: 'shopify-data-request',
    storeDomain: shop,
  });
}

export async function processCustomerRedact(deps: WebhookWorkerDeps, shop: string, request: z.infer<typeof customerPayload>): Promise<void> {
  const email = request.customer?.email;
  // Shoppers are known by e-mail only: without one there is nothing of theirs here.
  if (!email) return;
  await deps.alerts.eraseCustomer(shop, email);
  await deps.dispatch.eraseCustomer(shop, email);
  await deps.orders.eraseCustomer(shop, email);
}

/** 48 hours after an uninstall: everything about the store goes, its queued events included. */
export async function processShopRedact(deps: WebhookWorkerDeps, shop: string, eventId: string): Promise<void> {
  await deps.alerts.eraseStore(shop);
  await deps.dispatch.eraseStore(shop);
  await deps.orders.eraseStore(shop);
  await deps.inventory.forgetStore(shop);
  await deps.connections.forget(shop);
  await deps.events.forgetStore(shop, eventId);
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    throw new PermanentFailure('The payload is not JSON');
  }
}

/** A payload's report, worked out from the payload alone: if that fails, no retry will make it work. */
function converted<T>(convert: () => T): T {
  try {
    return convert();
  } catch (err) {
    if (err instanceof PermanentFailure) throw err;
    throw new PermanentFailure(`The payload cannot be read as a report: ${err instanceof Error ? err.message : String(err)}`);
  }
}

function parse<T>(schema: z.ZodType<T>, body: unknown): T {
  const result = schema.safeParse(body);
  if (!result.success) {
    const issue = result.error.issues[0];
    throw new PermanentFailure(`The payload does not match the topic: ${issue ? `${issue.path.join('.') || 'body'}: ${issue.message}` : 'invalid'}`);
  }
  return result.data;
}

/**
 * Shopify signs the body, not the headers. Where the body names the shop, it must be the one the
 * header named, so a signed body replayed under another store's domain does nothing.
 */
function checkSameShop(shop: string, body: unknown): void {
  const named = shopDomainPayload.safeParse(body);
  if (!named.success) return;
  for (const domain of [named.data.shop_domain, named.data.myshopify_domain]) {
    if (domain !== undefined && domain.toLowerCase() !== shop) {
      throw new PermanentFailure(`The payload is about ${domain}, not ${shop}`);
    }
  }
}
