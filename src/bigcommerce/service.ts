import { Webhook, WebhookVerificationError } from 'standardwebhooks';
import type { FastifyBaseLogger } from 'fastify';
import { z } from 'zod';
import type { BigCommerceConfig } from './settings.ts';
import { chunks } from '../core/chunks.ts';
import { nowIso } from '../core/clock.ts';
import { ConnectedStores, connectionView, newWebhookSecret, type ConnectionView } from '../core/connectors/connected-stores.ts';
import type { StoreConnector } from '../core/connectors/connector.ts';
import { webhookIdsOf, type ConnectionRepository, type ConnectionRow } from '../core/connectors/connections.ts';
import { ownStore, type Caller } from '../core/http/caller.ts';
import { headerOf } from '../core/http/raw-body.ts';
import { jsonOf } from '../core/json.ts';
import { NotFound, Problem, ValidationFailed } from '../core/problems.ts';
import type { SecretBox } from '../core/sealed-secrets.ts';
import type { StockReport } from '../core/connectors/stock-report.ts';
import type { InventoryService } from '../inventory/service.ts';
import type { StoreService } from '../stores/service.ts';
import { BigCommerceError, exchangeCode, hashOfContext, StoreApi, storeDomainOf } from './api.ts';
import { bcProductSchema, productNumber, stockReportsOf } from './catalog.ts';
import { InvalidSignedPayload, verifySignedPayload, type SignedPayload } from './signed-payload.ts';

/** What BigCommerce tells the inventory: stock reports. */
export type BigCommerceInventory = Pick<InventoryService, 'reportStock'>;

/** What BigCommerce asks of the stores: making one at install, and marking it connected or not. */
export type BigCommerceStores = Pick<StoreService, 'createStore' | 'markConnected' | 'uninstall'>;

/**
 * The webhooks an install creates: a product's own changes (availability, visibility, tracking)
 * and its stock, counted per product or per variant (SKU), by edits and by orders alike.
 */
export const WEBHOOK_SCOPES = [
  'store/product/updated',
  'store/product/inventory/updated',
  'store/product/inventory/order/updated',
  'store/sku/updated',
  'store/sku/inventory/updated',
  'store/sku/inventory/order/updated',
] as const;
/** The header each webhook carries, holding the secret made for the store at install. */
export const SECRET_HEADER = 'x-restock-webhook-secret';
export const CALLBACK_PATHS = { auth: '/bigcommerce/auth', load: '/bigcommerce/load', uninstall: '/bigcommerce/uninstall', removeUser: '/bigcommerce/remove-user' } as const;
export const WEBHOOK_PATH = '/webhooks/bigcommerce';
/** Products read per Catalog API request (`id:in`), and per store and reconciliation. */
const PRODUCTS_PER_REQUEST = 50;
const PRODUCTS_PER_RECONCILIATION = 250;

/** A connection as its store's agents see it; the token is never shown back. */
export interface BigCommerceConnection extends ConnectionView {
  storeHash: string;
}

/** What BigCommerce puts on the auth callback's query when the merchant installs the app. */
export const authCallbackSchema = z.object({
  code: z.string().min(1).max(512),
  scope: z.string().max(4096),
  context: z.string().max(64),
  account_uuid: z.string().max(64).optional(),
});

/** A webhook's body: what changed, never its new state, which is read back from the Catalog API. */
const webhookSchema = z.object({
  scope: z.string(),
  producer: z.string(),
  data: z.object({
    type: z.string().optional(),
    id: z.number().int().optional(),
    inventory: z.object({ product_id: z.number().int().positive().optional() }).optional(),
    sku: z.object({ product_id: z.number().int().positive().optional() }).optional(),
  }),
});

export interface BigCommerceDeps {
  app: BigCommerceConfig;
  connections: ConnectionRepository;
  stores: BigCommerceStores;
  inventory: BigCommerceInventory;
  alerts: { waitingProducts(storeDomain: string, limit?: number): Promise<string[]> };
  secrets: SecretBox;
  baseUrl: string;
  log: FastifyBaseLogger;
}

/**
 * BigCommerce stores, installed as our app: the install's code traded for an access token, the
 * store's webhooks made with a secret header of ours, each change read back from the Catalog API
 * and reported, reconciliation through the same API, and the app's end by BigCommerce's signed
 * uninstall callback (or by the token being refused).
 */
export class BigCommerceService implements StoreConnector {
  readonly platform = 'bigcommerce';

  private readonly connected: ConnectedStores;

  constructor(private readonly deps: BigCommerceDeps) {
    this.connected = new ConnectedStores(deps);
  }

  /**
   * The merchant installed the app: the code is traded for the store's token, the store is made
   * (or made anew) for the store's owner, and its webhooks are created. Returns the store's domain.
   */
  async install(callback: z.infer<typeof authCallbackSchema>): Promise<string> {
    const hash = hashOfContext(callback.context);
    if (hash === undefined) throw new ValidationFailed([{ pointer: '/query/context', message: 'must be stores/{store hash}' }]);
    let grant;
    try {
      grant = await exchangeCode(this.deps.app, { ...callback, redirectUri: `${this.deps.baseUrl}${CALLBACK_PATHS.auth}` });
    } catch (err) {
      if (!(err instanceof BigCommerceError)) throw err;
      if (err.status !== null && err.status < 500) throw new ValidationFailed([{ pointer: '/query/code', message: `was refused by BigCommerce (${err.message}): start the install again from the store's control panel` }]);
      throw new Problem('upstream-failed', `${err.message}. Nothing was stored.`);
    }
    if (hashOfContext(grant.context) !== hash) throw new Problem('upstream-failed', 'BigCommerce granted a token for another store than the install named. Nothing was stored.');
    const store = storeDomainOf(hash);
    const api = new StoreApi(hash, grant.access_token, this.deps.app.clientId);
    const secret = newWebhookSecret();
    const previous = await this.deps.connections.find(store);
    for (const id of previous ? webhookIdsOf(previous) : []) await api.delete(`/v3/hooks/${id}`).catch(() => undefined);
    const webhookIds = await this.createWebhooks(api, store, secret);
    try {
      await this.deps.stores.createStore(store, grant.owner?.email ?? grant.user.email, this.platform);
      await this.connected.connect(store, { site: hash, credentials: { accessToken: grant.access_token }, webhookSecret: secret, webhookIds });
    } catch (err) {
      // Webhooks nobody would take: gone with the install that failed.
      for (const id of webhookIds) await api.delete(`/v3/hooks/${id}`).catch(() => undefined);
      throw err;
    }
    return store;
  }

  /** A user opens the app in the control panel: the store it is for, when it is installed. */
  async load(signedPayload: string): Promise<{ store: string; connected: boolean; user: string }> {
    const payload = await this.verified(signedPayload);
    const row = await this.deps.connections.find(storeDomainOf(payload.hash));
    return { store: storeDomainOf(payload.hash), connected: row?.status === 'connected', user: payload.user.email };
  }

  /** The merchant uninstalled the app: BigCommerce has revoked the token and deleted the webhooks; nothing more is sent. */
  async uninstall(signedPayload: string): Promise<string> {
    const payload = await this.verified(signedPayload);
    const store = storeDomainOf(payload.hash);
    await this.connected.end(store, 'uninstalled from BigCommerce');
    return store;
  }

  /**
   * A user's access to the app was removed. The service keeps no record of a store's users (the
   * owner signs in to the dashboard by e-mail), so there is nothing to forget; the payload is
   * still verified, so a forged call is told so.
   */
  async removeUser(signedPayload: string): Promise<void> {
    await this.verified(signedPayload);
  }

  async connectionFor(caller: Caller, domain: string): Promise<BigCommerceConnection> {
    const store = ownStore(caller, domain);
    const row = await this.deps.connections.find(store);
    if (!row) throw new NotFound(`${store} has never been installed from BigCommerce.`);
    return present(row);
  }

  /**
   * A webhook for the store: it must carry the store's secret header and come from the store
   * (`producer`). Its product is read back from the Catalog API and reported as it is.
   */
  async receiveWebhook(domain: string, headers: Record<string, string | string[] | undefined>, raw: Buffer): Promise<{ reports: number }> {
    const row = await this.deps.connections.find(domain.toLowerCase());
    const given = headerOf(headers, SECRET_HEADER);
    if (!row || given === undefined || !(await this.connected.webhookSecretIs(row, given))) {
      throw new Problem('invalid-webhook', `The ${SECRET_HEADER} header is missing or is not this store's. Nothing was recorded.`);
    }
    if (!signatureHolds(this.deps.app.clientSecret, headers, raw)) {
      throw new Problem('invalid-webhook', 'The webhook-signature header does not match the body, or webhook-timestamp is too far from now. Nothing was recorded.');
    }
    if (row.status !== 'connected') throw new NotFound(`${row.store_domain} is no longer installed; its webhooks are not taken.`);
    const event = webhookSchema.safeParse(jsonOf(raw));
    if (!event.success) throw new Problem('malformed-request', `The webhook is not BigCommerce's: ${event.error.issues[0]!.path.join('.')} ${event.error.issues[0]!.message}.`);
    if (event.data.producer !== `stores/${row.site}`) throw new Problem('invalid-webhook', `The webhook's producer is not ${row.store_domain}'s store. Nothing was recorded.`);
    const productId = productOfEvent(event.data);
    if (productId === undefined) return { reports: 0 };
    let reports: StockReport[];
    try {
      reports = await this.readReports(row, [productId]);
    } catch (err) {
      // Not taken: BigCommerce delivers again after a refusal, and reconciliation reads the product anyway.
      if (err instanceof BigCommerceError) throw new Problem('upstream-failed', `The product could not be read back from BigCommerce (${err.message}); the webhook was not taken.`);
      throw err;
    }
    if (reports.length > 0) await this.deps.inventory.reportStock(row.store_domain, reports, { kind: 'bigcommerce-webhook', ref: `${event.data.scope} product ${productId}`.slice(0, 96), verified: true });
    return { reports: reports.length };
  }

  /** Reads the products shoppers wait for and reports them as they are: what a missed webhook left behind. */
  reconcileStore(domain: string): Promise<number> {
    return this.connected.reconcile(
      domain,
      async (row) => this.readReports(row, (await this.deps.alerts.waitingProducts(row.store_domain, PRODUCTS_PER_RECONCILIATION)).flatMap((gid) => productNumber(gid) ?? [])),
      (err) => (err instanceof BigCommerceError && err.tokenRefused ? `BigCommerce refused the access token (${err.status})` : undefined),
    );
  }

  storesToReconcile(intervalMs: number, limit: number): Promise<string[]> {
    return this.connected.storesToReconcile(intervalMs, limit);
  }

  /**
   * BigCommerce delivers only to https on port 443; a service on another address (the embedded
   * default on localhost) gets no webhooks, and reconciliation alone keeps its stores' stock.
   */
  private async createWebhooks(api: StoreApi, store: string, secret: string): Promise<number[]> {
    const destination = new URL(`${WEBHOOK_PATH}/${store}`, this.deps.baseUrl);
    if (destination.protocol !== 'https:' || destination.port !== '') {
      this.deps.log.warn({ store, destination: destination.href }, 'BigCommerce delivers webhooks only to https on port 443: none were created, and only reconciliation reads this store');
      return [];
    }
    const ids: number[] = [];
    try {
      for (const scope of WEBHOOK_SCOPES) {
        const made = (await api.post('/v3/hooks', { scope, destination: destination.href, is_active: true, headers: { [SECRET_HEADER]: secret } })) as { data?: { id?: unknown } };
        if (typeof made?.data?.id === 'number') ids.push(made.data.id);
      }
    } catch (err) {
      for (const id of ids) await api.delete(`/v3/hooks/${id}`).catch(() => undefined);
      if (err instanceof BigCommerceError) throw new Problem('upstream-failed', `BigCommerce refused to create the store's webhooks (${err.message}). Nothing was stored.`);
      throw err;
    }
    return ids;
  }

  /** The products as the Catalog API has them now, as stock reports stamped with the time of asking. */
  private async readReports(row: ConnectionRow, productIds: number[]): Promise<StockReport[]> {
    const api = await this.apiOf(row);
    const reports: StockReport[] = [];
    for (const ids of chunks(productIds, PRODUCTS_PER_REQUEST)) {
      const asOf = nowIso();
      const page = z.object({ data: z.array(bcProductSchema) }).parse(await api.get('/v3/catalog/products', { 'id:in': ids.join(','), include: 'variants,images', limit: PRODUCTS_PER_REQUEST }));
      for (const product of page.data) reports.push(...stockReportsOf(row.site, product, asOf));
    }
    return reports;
  }

  private async verified(signedPayload: string): Promise<SignedPayload> {
    try {
      return await verifySignedPayload(this.deps.app, signedPayload);
    } catch (err) {
      if (err instanceof InvalidSignedPayload) throw new Problem('invalid-webhook', `${err.message}. Nothing was changed.`);
      throw err;
    }
  }

  private async apiOf(row: ConnectionRow): Promise<StoreApi> {
    const { accessToken } = z.object({ accessToken: z.string() }).parse(await this.connected.credentialsOf(row));
    return new StoreApi(row.site, accessToken, this.deps.app.clientId);
  }

}

/**
 * BigCommerce signs its deliveries as Standard Webhooks do (`webhook-id`, `webhook-timestamp`,
 * `webhook-signature`), keyed with the app's client secret's bytes: checked by the same library
 * that signs our own outgoing webhooks, which also refuses a timestamp over 5 minutes from now. A
 * delivery without the headers rests on the store's secret header alone (BigCommerce has added the
 * signature over time); one that carries them must match.
 */
export function signatureHolds(clientSecret: string, headers: Record<string, string | string[] | undefined>, raw: Buffer): boolean {
  const signed = { id: headerOf(headers, 'webhook-id'), timestamp: headerOf(headers, 'webhook-timestamp'), signature: headerOf(headers, 'webhook-signature') };
  if (signed.id === undefined && signed.timestamp === undefined && signed.signature === undefined) return true;
  try {
    new Webhook(clientSecret, { format: 'raw' }).verify(raw, { 'webhook-id': signed.id ?? '', 'webhook-timestamp': signed.timestamp ?? '', 'webhook-signature': signed.signature ?? '' }, { jsonParse: false });
    return true;
  } catch (err) {
    if (err instanceof WebhookVerificationError) return false;
    throw err;
  }
}

/** The product a webhook is about: its own id for a product's, the product of the SKU for a SKU's. */
function productOfEvent(event: z.infer<typeof webhookSchema>): number | undefined {
  if (event.scope.startsWith('store/product/')) return event.data.type === 'product' || event.data.type === undefined ? event.data.id : undefined;
  if (event.scope.startsWith('store/sku/')) return event.data.inventory?.product_id ?? event.data.sku?.product_id;
  return undefined;
}

function present(row: ConnectionRow): BigCommerceConnection {
  return { ...connectionView(row), storeHash: row.site };
}
