import { randomBytes } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import { Webhook, WebhookVerificationError } from 'standardwebhooks';
import { nowIso } from '../core/clock.ts';
import { ConnectedStores, connectionView, type ConnectionView } from '../core/connectors/connected-stores.ts';
import type { StoreConnector } from '../core/connectors/connector.ts';
import type { ConnectionRepository, ConnectionRow } from '../core/connectors/connections.ts';
import type { StockReport } from '../core/connectors/stock-report.ts';
import { ownStore, type Caller } from '../core/http/caller.ts';
import { headerOf } from '../core/http/raw-body.ts';
import { jsonOf } from '../core/json.ts';
import type { OutboundPolicy } from '../core/net/outbound-guard.ts';
import { NotFound, Problem, ValidationFailed } from '../core/problems.ts';
import type { SecretBox } from '../core/sealed-secrets.ts';
import type { OrderSink } from '../conversions/service.ts';
import type { InventoryService } from '../inventory/service.ts';
import type { StoreService } from '../stores/service.ts';
import { parseAdminApiUrl, VendureAdminApi, VendureError } from './admin-api.ts';
import { productGid, readSettings, readVariants, readVariantsOfProducts, stockReportOf, vendureNumber, type VariantsRead } from './catalog.ts';
import { vendureMessageSchema, type OrderMessage, type VendureMessage } from './messages.ts';
import { vendureConnectionInput, type VendureConnectionInput } from './schemas.ts';

export type VendureInventory = Pick<InventoryService, 'reportStock'>;
export type VendureStores = Pick<StoreService, 'findStore' | 'markConnected' | 'uninstall'>;
export type VendureOrders = Pick<OrderSink, 'recordOrder' | 'recordRefund' | 'recordCancellation'>;

/** Products with waiting shoppers read per store and reconciliation. */
const PRODUCTS_PER_RECONCILIATION = 250;
/** Where the product's slug or id goes in the storefront's product address. */
const PLACEHOLDERS = /\{(slug|id)\}/g;

/** A connection as its store's owner sees it; the API key is never shown back. */
export interface VendureConnection extends ConnectionView {
  adminApiUrl: string;
  productUrl: string;
}

/** Connecting answers once with the secret the plugin signs with: it is never shown again. */
export interface NewVendureConnection extends VendureConnection {
  signingSecret: string;
}

/** What a connection keeps sealed. */
interface Credentials {
  apiKey: string;
  productUrl: string;
}

export interface VendureDeps {
  connections: ConnectionRepository;
  stores: VendureStores;
  inventory: VendureInventory;
  orders: VendureOrders;
  alerts: { waitingProducts(storeDomain: string, limit?: number): Promise<string[]> };
  secrets: SecretBox;
  policy: OutboundPolicy;
  log: FastifyBaseLogger;
}

/** What one delivery came to. */
export type DeliveryOutcome = { kind: VendureMessage['type']; reports?: number };

/**
 * Vendure stores: connected with an Admin API key, told of changes by the Restock plugin on the
 * merchant's server (signed deliveries, Standard Webhooks), read back through the Admin API with
 * Vendure's own stock rules, reconciled, and ended by the owner, by the plugin's uninstall, or by
 * the server refusing the key (docs/vendure.md).
 */
export class VendureService implements StoreConnector {
  readonly platform = 'vendure';

  private readonly connected: ConnectedStores;

  constructor(private readonly deps: VendureDeps) {
    this.connected = new ConnectedStores(deps);
  }

  /**
   * The owner (or the store's agent) gives the Admin API's address, an API key and the
   * storefront's product address. The key must read the catalogue before anything is stored;
   * the answer carries the plugin's signing secret, once.
   */
  async connect(caller: Caller, domain: string, given: VendureConnectionInput): Promise<NewVendureConnection> {
    const store = ownStore(caller, domain);
    // Checked here as well as by the operation's schema: the dashboard's form hands them over as typed.
    const input = vendureConnectionInput.safeParse(given);
    if (!input.success) throw new ValidationFailed(input.error.issues.map((issue) => ({ pointer: `/body/${String(issue.path[0])}`, message: issue.message })));
    await this.requireVendureStore(store);
    const endpoint = parseAdminApiUrl(input.data.adminApiUrl, this.deps.policy);
    if (typeof endpoint === 'string') throw new ValidationFailed([{ pointer: '/body/adminApiUrl', message: endpoint }]);
    const productUrl = checkProductUrl(input.data.productUrl);
    if (productUrl === undefined) throw new ValidationFailed([{ pointer: '/body/productUrl', message: 'must be an http(s) address with {slug} or {id} where the product’s goes' }]);
    try {
      await readSettings(new VendureAdminApi(endpoint, input.data.apiKey, this.deps.policy));
    } catch (err) {
      if (!(err instanceof VendureError)) throw err;
      if (err.keyRefused) throw new ValidationFailed([{ pointer: '/body/apiKey', message: `was refused by the server (${err.code ?? err.status}): the key’s role must allow ReadCatalog and ReadSettings` }]);
      throw new Problem('upstream-failed', `The Vendure Admin API at ${endpoint.href}: ${err.message}. Nothing was stored.`);
    }
    const signingSecret = `whsec_${randomBytes(32).toString('base64')}`;
    const credentials: Credentials = { apiKey: input.data.apiKey, productUrl };
    const row = await this.connected.connect(store, { site: endpoint.href, credentials, webhookSecret: signingSecret, webhookIds: [] });
    return { ...present(row, productUrl), signingSecret };
  }

  async connectionFor(caller: Caller, domain: string): Promise<VendureConnection> {
    const store = ownStore(caller, domain);
    const row = await this.deps.connections.find(store);
    if (!row) throw new NotFound(`${store} has never been connected to Vendure.`);
    return this.presentRow(row);
  }

  /** The owner ends the connection: the key is forgotten and the plugin's deliveries are refused. */
  async disconnect(caller: Caller, domain: string): Promise<VendureConnection> {
    const store = ownStore(caller, domain);
    const row = await this.deps.connections.find(store);
    if (!row) throw new NotFound(`${store} has never been connected to Vendure.`);
    const view = await this.presentRow(row);
    await this.connected.end(store, 'disconnected by the store');
    return { ...view, ...connectionView((await this.deps.connections.find(store))!) };
  }

  /**
   * A delivery of the plugin: signed over the raw body with the store's secret (Standard
   * Webhooks, five minutes either way). Nothing of an unsigned, forged or stale delivery is used.
   */
  async receiveDelivery(domain: string, headers: Record<string, string | string[] | undefined>, raw: Buffer): Promise<DeliveryOutcome> {
    const row = await this.deps.connections.find(domain.toLowerCase());
    if (!row || row.webhook_secret_sealed === null || !signatureHolds(await this.connected.webhookSecretOf(row), headers, raw)) {
      throw new Problem('invalid-webhook', 'webhook-signature is missing, does not match the body for this store, or webhook-timestamp is more than five minutes from now. Nothing was recorded.');
    }
    if (row.status !== 'connected') throw new NotFound(`${row.store_domain} is no longer connected to Vendure; its deliveries are not taken.`);
    const parsed = vendureMessageSchema.safeParse(jsonOf(raw));
    if (!parsed.success) {
      const issue = parsed.error.issues[0]!;
      throw new Problem('malformed-request', `The delivery is not a message of the Restock plugin: ${issue.path.join('.') || 'body'} ${issue.message}.`);
    }
    try {
      return await this.take(row, parsed.data, headerOf(headers, 'webhook-id') ?? 'delivery');
    } catch (err) {
      // The plugin tries again; the next reconciliation reads the products in any case.
      if (err instanceof VendureError) throw new Problem('upstream-failed', `The variants could not be read back from the Admin API (${err.message}); the delivery was not taken.`);
      throw err;
    }
  }

  /** Reads the products shoppers wait for and reports them as they are: what a missed delivery left behind. */
  reconcileStore(domain: string): Promise<number> {
    return this.connected.reconcile(
      domain,
      (row) => this.waitingReports(row),
      (err) => (err instanceof VendureError && err.keyRefused ? `the server refused the API key (${err.code ?? err.status})` : undefined),
    );
  }

  storesToReconcile(intervalMs: number, limit: number): Promise<string[]> {
    return this.connected.storesToReconcile(intervalMs, limit);
  }

  private async take(row: ConnectionRow, message: VendureMessage, deliveryId: string): Promise<DeliveryOutcome> {
    const store = row.store_domain;
    switch (message.type) {
      case 'variants.changed': {
        const { api, credentials } = await this.apiOf(row);
        return this.reported(store, deliveryId, this.reportsOf(await readVariants(api, message.variantIds), credentials), message.type);
      }
      case 'products.changed':
        return this.reported(store, deliveryId, await this.productReports(row, message.productIds), message.type);
      case 'catalog.changed':
        // Every product may have changed (the shop's threshold or tracking): the waiting ones are read now.
        return { kind: message.type, reports: await this.connected.reconcile(store, (current) => this.waitingReports(current), () => undefined) };
      case 'order.placed':
      case 'order.paid':
        await this.deps.orders.recordOrder(orderReport(store, message.order));
        return { kind: message.type };
      case 'order.cancelled':
        await this.deps.orders.recordCancellation({ storeDomain: store, orderId: message.code, cancelledAt: message.cancelledAt });
        return { kind: message.type };
      case 'order.refunded':
        await this.deps.orders.recordRefund({
          storeDomain: store,
          orderId: message.code,
          refundId: message.refundId,
          refundedAt: message.refundedAt,
          lines: message.lines.map((line) => ({ lineId: line.lineId, quantity: line.quantity, amount: { minor: line.amount, currency: message.currency }, shopAmount: { minor: line.amount, currency: message.currency } })),
        });
        return { kind: message.type };
      case 'app.uninstalled':
        await this.connected.end(store, 'the Restock plugin was uninstalled from the Vendure server');
        return { kind: message.type };
    }
  }

  private async reported(store: string, deliveryId: string, reports: StockReport[], kind: VendureMessage['type']): Promise<DeliveryOutcome> {
    if (reports.length > 0) await this.deps.inventory.reportStock(store, reports, { kind: 'vendure-webhook', ref: `delivery ${deliveryId.slice(0, 64)}`, verified: true });
    return { kind, reports: reports.length };
  }

  private async waitingReports(row: ConnectionRow): Promise<StockReport[]> {
    const productIds = (await this.deps.alerts.waitingProducts(row.store_domain, PRODUCTS_PER_RECONCILIATION)).flatMap((gid) => vendureNumber(gid, 'Product') ?? []);
    return productIds.length === 0 ? [] : this.productReports(row, productIds);
  }

  /** Every variant of the products, and a product the channel no longer has (deleted, or taken off it) reported as off sale. */
  private async productReports(row: ConnectionRow, productIds: readonly string[]): Promise<StockReport[]> {
    const { api, credentials } = await this.apiOf(row);
    const read = await readVariantsOfProducts(api, productIds);
    const reports = this.reportsOf(read, credentials);
    const found = new Set(read.variants.map((variant) => variant.productId));
    const gone = productIds.filter((id) => !found.has(id)).map((id) => ({ productId: productGid(id), variantId: null, published: false, updatedAt: nowIso() }));
    return [...reports, ...gone];
  }

  private reportsOf(read: VariantsRead, credentials: Credentials): StockReport[] {
    const asOf = nowIso();
    return read.variants.map((variant) => stockReportOf(variant, read.settings, asOf, (slug, id) => productAddress(credentials.productUrl, slug, id)));
  }

  private async apiOf(row: ConnectionRow): Promise<{ api: VendureAdminApi; credentials: Credentials }> {
    const credentials = (await this.connected.credentialsOf(row)) as Credentials;
    return { api: new VendureAdminApi(new URL(row.site), credentials.apiKey, this.deps.policy), credentials };
  }

  private async presentRow(row: ConnectionRow): Promise<VendureConnection> {
    const productUrl = row.credentials_sealed === null ? '' : ((await this.connected.credentialsOf(row)) as Credentials).productUrl;
    return present(row, productUrl);
  }

  private async requireVendureStore(store: string): Promise<void> {
    const found = await this.deps.stores.findStore(store);
    if (!found) throw new NotFound(`No store ${store}.`);
    if (found.platform !== 'vendure') throw new Problem('conflict', `${store} is a ${found.platform ?? 'shopify'} store; only a Vendure store connects to a Vendure server.`);
  }
}

function present(row: ConnectionRow, productUrl: string): VendureConnection {
  return { ...connectionView(row), adminApiUrl: row.site, productUrl };
}

/** The storefront's product address as given: http(s), with a placeholder; the query may carry one too. */
function checkProductUrl(text: string): string | undefined {
  if (!/\{(slug|id)\}/.test(text)) return undefined;
  let url: URL;
  try {
    url = new URL(text.replace(PLACEHOLDERS, 'x'));
  } catch {
    return undefined;
  }
  return (url.protocol === 'https:' || url.protocol === 'http:') && url.username === '' && url.password === '' ? text : undefined;
}

function productAddress(template: string, slug: string, id: string): string {
  return template.replace(PLACEHOLDERS, (_, name: string) => encodeURIComponent(name === 'slug' ? slug : id));
}

function orderReport(storeDomain: string, order: OrderMessage) {
  return {
    storeDomain,
    orderId: order.code,
    email: order.email,
    placedAt: order.placedAt,
    source: 'vendure' as const,
    lines: order.lines.map((line) => ({
      lineId: line.lineId,
      productId: productGid(line.productId),
      variantId: `gid://vendure/ProductVariant/${line.variantId}`,
      quantity: line.quantity,
      amount: { minor: line.amount, currency: order.currency },
      // Vendure prices a channel's orders in the channel's currency: the shop's is the same.
      shopAmount: { minor: line.amount, currency: order.currency },
    })),
  };
}

function signatureHolds(secret: string, headers: Record<string, string | string[] | undefined>, raw: Buffer): boolean {
  try {
    new Webhook(secret).verify(raw, { 'webhook-id': headerOf(headers, 'webhook-id') ?? '', 'webhook-timestamp': headerOf(headers, 'webhook-timestamp') ?? '', 'webhook-signature': headerOf(headers, 'webhook-signature') ?? '' });
    return true;
  } catch (err) {
    if (err instanceof WebhookVerificationError) return false;
    throw err;
  }
}
