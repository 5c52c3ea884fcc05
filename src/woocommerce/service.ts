import { createHash, createHmac, randomBytes } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import { z } from 'zod';
import { nowIso } from '../core/clock.ts';
import { ConnectedStores, connectionView, newWebhookSecret, type ConnectionView } from '../core/connectors/connected-stores.ts';
import { sameSecret } from '../core/secrets.ts';
import type { StoreConnector } from '../core/connectors/connector.ts';
import { webhookIdsOf, type ConnectionRepository, type ConnectionRow } from '../core/connectors/connections.ts';
import { ownStore, type Caller } from '../core/http/caller.ts';
import { headerOf } from '../core/http/raw-body.ts';
import { jsonOf } from '../core/json.ts';
import type { OutboundPolicy } from '../core/net/outbound-guard.ts';
import { NotFound, Problem, ValidationFailed } from '../core/problems.ts';
import type { SecretBox } from '../core/sealed-secrets.ts';
import type { TokenSigner } from '../core/signed-token.ts';
import type { StockReport } from '../core/connectors/stock-report.ts';
import type { InventoryService } from '../inventory/service.ts';
import type { StoreService } from '../stores/service.ts';
import { productNumber, stockReportOf, wooProductSchema, type WooProduct } from './products.ts';
import { parseSiteUrl, PER_PAGE, WooCommerceApi, WooCommerceError, type WooCommerceKeys } from './rest-api.ts';
import { wooKeysSchema } from './schemas.ts';

/** What WooCommerce tells the inventory: stock reports. */
export type WooCommerceInventory = Pick<InventoryService, 'reportStock'>;

/** What WooCommerce asks of the stores: a store as it is, and marking it connected or not. */
export type WooCommerceStores = Pick<StoreService, 'findStore' | 'markConnected' | 'uninstall'>;

/** The webhooks a connection creates on the site: a product's or a variation's state, after every change. */
export const WEBHOOK_TOPICS = ['product.created', 'product.updated', 'product.restored'] as const;
/** What a signed authorization request is good for, and how long. */
const AUTHORIZATION_PURPOSE = 'woocommerce-keys';
const AUTHORIZATION_TTL_MS = 30 * 60_000;
/** Products with waiting shoppers read per store and reconciliation. */
const PRODUCTS_PER_RECONCILIATION = 250;


/** A connection as its store's owner sees it; the keys are never shown back. */
export interface WooCommerceConnection extends ConnectionView {
  siteUrl: string;
}

/** What WooCommerce posts to the callback of its authorization endpoint. */
export const keysCallbackSchema = z.object({
  key_id: z.union([z.number(), z.string()]).optional(),
  user_id: z.union([z.string(), z.number()]).transform(String),
  consumer_key: z.string(),
  consumer_secret: z.string(),
  key_permissions: z.string(),
});

export interface WooCommerceDeps {
  connections: ConnectionRepository;
  stores: WooCommerceStores;
  inventory: WooCommerceInventory;
  alerts: { waitingProducts(storeDomain: string, limit?: number): Promise<string[]> };
  secrets: SecretBox;
  signer: TokenSigner;
  policy: OutboundPolicy;
  baseUrl: string;
  log: FastifyBaseLogger;
}

/** What one delivery came to. */
export type DeliveryOutcome = { kind: 'ping' } | { kind: 'reported'; reports: number };

/**
 * WooCommerce stores: connected with REST API keys (pasted by the owner, or posted by the site
 * when its owner approves our authorization request), kept up to date by the site's product
 * webhooks (signed with a secret we give each), reconciled through the REST API, and ended by the
 * owner or by the site refusing the keys.
 */
export class WooCommerceService implements StoreConnector {
  readonly platform = 'woocommerce';

  private readonly connected: ConnectedStores;

  constructor(private readonly deps: WooCommerceDeps) {
    this.connected = new ConnectedStores(deps);
  }

  /** The owner (or the store's agent) gives the site's address and keys; returns the connection made. */
  async connectWithKeys(caller: Caller, domain: string, input: { siteUrl: string } & WooCommerceKeys): Promise<WooCommerceConnection> {
    const store = ownStore(caller, domain);
    // Checked here as well as by the operation's schema: the dashboard's form hands them over as typed.
    const keys = wooKeysSchema.safeParse({ consumerKey: input.consumerKey, consumerSecret: input.consumerSecret });
    if (!keys.success) throw new ValidationFailed(keys.error.issues.map((issue) => ({ pointer: `/body/${String(issue.path[0])}`, message: issue.message })));
    return this.connect(store, this.siteOf(input.siteUrl, '/body/siteUrl'), keys.data);
  }

  /**
   * The address of WooCommerce's authorization endpoint on the owner's site: the owner approves
   * there, and the site posts the keys to our callback with `user_id`, which carries the store,
   * the site and the store's owner of the moment, signed, for one use within 30 minutes.
   */
  async authorizationUrl(caller: Caller, domain: string, siteUrl: string): Promise<string> {
    const store = ownStore(caller, domain);
    const { owner_email: owner } = await this.requireWooCommerceStore(store);
    const site = this.siteOf(siteUrl, '/body/siteUrl');
    const id = randomBytes(16).toString('base64url');
    const request: Authorization = { id, store, site: site.href, owner: ownerDigest(id, owner), until: Date.now() + AUTHORIZATION_TTL_MS };
    const url = new URL(`${site.href.replace(/\/$/, '')}/wc-auth/v1/authorize`);
    url.searchParams.set('app_name', 'Restock');
    url.searchParams.set('scope', 'read_write');
    url.searchParams.set('user_id', this.deps.signer.sign(AUTHORIZATION_PURPOSE, Buffer.from(JSON.stringify(request)).toString('base64url')));
    // `store` is for whoever reads the address; the page believes only the signed user_id WooCommerce adds.
    url.searchParams.set('return_url', `${this.deps.baseUrl}/woocommerce/connected?store=${encodeURIComponent(store)}`);
    url.searchParams.set('callback_url', `${this.deps.baseUrl}/woocommerce/keys`);
    return url.href;
  }

  /**
   * The site posts the keys its owner approved; the store named by the signed `user_id` is
   * connected, once: a `user_id` already used, expired, or issued before the store changed hands
   * connects nothing.
   */
  async acceptKeys(body: z.infer<typeof keysCallbackSchema>): Promise<WooCommerceConnection> {
    const request = await this.authorizationOf(body.user_id);
    if (!request) throw new Problem('invalid-webhook', 'user_id is not an authorization request of this service, it has expired, or the store has changed hands since. Nothing was stored.');
    if (body.key_permissions !== 'read_write') throw new ValidationFailed([{ pointer: '/body/key_permissions', message: 'must be read_write: the service reads products and creates webhooks' }]);
    const keys = wooKeysSchema.safeParse({ consumerKey: body.consumer_key, consumerSecret: body.consumer_secret });
    if (!keys.success) throw new ValidationFailed(keys.error.issues.map((issue) => ({ pointer: `/body/${issue.path[0] === 'consumerKey' ? 'consumer_key' : 'consumer_secret'}`, message: issue.message })));
    // Used up before the site is called, so two posts of one user_id never both connect.
    if (!(await this.deps.connections.spendAuthorization(request.id, new Date(request.until).toISOString()))) {
      throw new Problem('invalid-webhook', 'This user_id was already used: an authorization request connects a store once. Nothing was stored.');
    }
    return this.connect(request.store, new URL(request.site), keys.data);
  }

  /**
   * What the page the site sends its owner back to may say: for a `user_id` of this service
   * still in force, its store and whether that store is connected now; nothing otherwise.
   */
  async authorizationOutcome(userId: string): Promise<{ store: string; connected: boolean } | undefined> {
    const request = await this.authorizationOf(userId);
    if (!request) return undefined;
    const row = await this.deps.connections.find(request.store);
    return { store: request.store, connected: row?.status === 'connected' };
  }

  async connectionFor(caller: Caller, domain: string): Promise<WooCommerceConnection> {
    const store = ownStore(caller, domain);
    const row = await this.deps.connections.find(store);
    if (!row) throw new NotFound(`${store} has never been connected to WooCommerce.`);
    return present(row);
  }

  /** The owner ends the connection: the site's webhooks are deleted where the keys still work, and nothing more is sent. */
  async disconnect(caller: Caller, domain: string): Promise<WooCommerceConnection> {
    const store = ownStore(caller, domain);
    const row = await this.deps.connections.find(store);
    if (!row) throw new NotFound(`${store} has never been connected to WooCommerce.`);
    if (row.status === 'connected' && row.credentials_sealed) {
      const api = await this.apiOf(row);
      for (const id of webhookIdsOf(row)) await api.delete(`/webhooks/${id}`, { force: 'true' }).catch(() => undefined);
    }
    await this.connected.end(store, 'disconnected by the store');
    return present((await this.deps.connections.find(store))!);
  }

  /**
   * A delivery to the store's webhook address: the ping WooCommerce sends when a webhook is made
   * (`webhook_id=N`, unsigned), or a product or variation as it is now, signed with the store's
   * secret over the raw body. Nothing of an unsigned or forged delivery is used.
   */
  async receiveDelivery(domain: string, headers: Record<string, string | string[] | undefined>, raw: Buffer): Promise<DeliveryOutcome> {
    const row = await this.deps.connections.find(domain.toLowerCase());
    const signature = headerOf(headers, 'x-wc-webhook-signature');
    if (signature === undefined && /^webhook_id=[0-9]{1,20}$/.test(raw.toString('latin1'))) return { kind: 'ping' };
    if (!row || signature === undefined || !(await this.signedBy(row, raw, signature))) {
      throw new Problem('invalid-webhook', 'X-WC-Webhook-Signature is missing or does not match the body for this store. Nothing was recorded.');
    }
    if (row.status !== 'connected') throw new NotFound(`${row.store_domain} is no longer connected to WooCommerce; its deliveries are not taken.`);
    const topic = headerOf(headers, 'x-wc-webhook-topic') ?? '';
    if (!(WEBHOOK_TOPICS as readonly string[]).includes(topic)) return { kind: 'reported', reports: 0 };
    const product = wooProductSchema.safeParse(jsonOf(raw));
    if (!product.success) throw new Problem('malformed-request', `The ${topic} delivery is not a WooCommerce product: ${product.error.issues[0]!.path.join('.')} ${product.error.issues[0]!.message}.`);
    let reports: StockReport[];
    try {
      reports = await this.reportsOf(row, product.data, nowIso());
    } catch (err) {
      // The site does not deliver again; the next reconciliation reads the product.
      if (err instanceof WooCommerceError) throw new Problem('upstream-failed', `The product's variations could not be read from the site (${err.message}); the delivery was not taken.`);
      throw err;
    }
    if (reports.length > 0) {
      const ref = headerOf(headers, 'x-wc-webhook-delivery-id') ?? `product ${product.data.id}`;
      await this.deps.inventory.reportStock(row.store_domain, reports, { kind: 'woocommerce-webhook', ref: `delivery ${ref.slice(0, 64)}`, verified: true });
    }
    return { kind: 'reported', reports: reports.length };
  }

  /**
   * Reads the products shoppers wait for from the site and reports them as they are: what a
   * missed or late webhook left behind. A site that refuses the keys ends the connection.
   */
  reconcileStore(domain: string): Promise<number> {
    return this.connected.reconcile(
      domain,
      (row) => this.readWaitingProducts(row),
      (err) => (err instanceof WooCommerceError && err.keysRefused ? `the site refused the API keys (${err.code ?? err.status})` : undefined),
    );
  }

  /** Connected stores due a reconciliation. */
  storesToReconcile(intervalMs: number, limit: number): Promise<string[]> {
    return this.connected.storesToReconcile(intervalMs, limit);
  }

  private async readWaitingProducts(row: ConnectionRow): Promise<StockReport[]> {
    const api = await this.apiOf(row);
    const reports: StockReport[] = [];
    for (const gid of await this.deps.alerts.waitingProducts(row.store_domain, PRODUCTS_PER_RECONCILIATION)) {
      const id = productNumber(gid);
      if (id === undefined) continue;
      let product: WooProduct;
      try {
        product = wooProductSchema.parse(await api.get(`/products/${id}`));
      } catch (err) {
        // A product deleted on the site is simply not reported.
        if (err instanceof WooCommerceError && err.status === 404) continue;
        throw err;
      }
      reports.push(...(await this.reportsOf(row, product, nowIso(), api)));
    }
    return reports;
  }

  private async connect(store: string, site: URL, keys: WooCommerceKeys): Promise<WooCommerceConnection> {
    await this.requireWooCommerceStore(store);
    const api = new WooCommerceApi(site, keys, this.deps.policy);
    const secret = newWebhookSecret();
    const webhookIds: number[] = [];
    try {
      // The keys must read products before anything is made with them.
      await api.get('/products', { per_page: 1 });
      const previous = await this.deps.connections.find(store);
      for (const id of previous ? webhookIdsOf(previous) : []) await api.delete(`/webhooks/${id}`, { force: 'true' }).catch(() => undefined);
      for (const topic of WEBHOOK_TOPICS) {
        const made = (await api.post('/webhooks', { name: `Restock ${topic}`, topic, delivery_url: `${this.deps.baseUrl}/webhooks/woocommerce/${store}`, secret })) as { id?: unknown };
        if (typeof made.id === 'number') webhookIds.push(made.id);
      }
    } catch (err) {
      if (!(err instanceof WooCommerceError)) throw err;
      for (const id of webhookIds) await api.delete(`/webhooks/${id}`, { force: 'true' }).catch(() => undefined);
      if (err.keysRefused) throw new ValidationFailed([{ pointer: '/body/consumerKey', message: `was refused by the site (${err.code ?? err.status}): the keys need read/write access` }]);
      throw new Problem('upstream-failed', `The WooCommerce site at ${site.href}: ${err.message}. Nothing was stored.`);
    }
    return present(await this.connected.connect(store, { site: site.href, credentials: keys, webhookSecret: secret, webhookIds }));
  }

  private async requireWooCommerceStore(store: string): Promise<{ owner_email: string }> {
    const found = await this.deps.stores.findStore(store);
    if (!found) throw new NotFound(`No store ${store}.`);
    if (found.platform !== 'woocommerce') throw new Problem('conflict', `${store} is a ${found.platform ?? 'shopify'} store; only a WooCommerce store connects to a WooCommerce site.`);
    return found;
  }

  /** A `user_id` this service signed, not expired, for a store whose owner is still the one it was issued to. */
  private async authorizationOf(userId: string): Promise<Authorization | undefined> {
    const subject = this.deps.signer.verify(AUTHORIZATION_PURPOSE, userId);
    const request = subject === undefined ? undefined : parseAuthorization(subject);
    if (!request || request.until < Date.now()) return undefined;
    const store = await this.deps.stores.findStore(request.store);
    return store && ownerDigest(request.id, store.owner_email) === request.owner ? request : undefined;
  }

  private siteOf(text: string, pointer: string): URL {
    const site = parseSiteUrl(text, this.deps.policy);
    if (typeof site === 'string') throw new ValidationFailed([{ pointer, message: site }]);
    return site;
  }

  private async apiOf(row: ConnectionRow): Promise<WooCommerceApi> {
    const keys = wooKeysSchema.parse(await this.connected.credentialsOf(row));
    return new WooCommerceApi(new URL(row.site), keys, this.deps.policy);
  }

  /**
   * A product's reports: a variation's own, a simple product's own, and for a variable product
   * whose stock the parent counts, each variation's as the site has it now (an order or an edit
   * of the parent changes them all, and WooCommerce then announces only the parent).
   */
  private async reportsOf(row: ConnectionRow, product: WooProduct, asOf: string, api?: WooCommerceApi): Promise<StockReport[]> {
    if (product.type !== 'variable') {
      const report = stockReportOf(product, asOf);
      return report ? [report] : [];
    }
    if (api === undefined && product.manage_stock !== true) return [];
    const site = api ?? (await this.apiOf(row));
    const variations = z.array(wooProductSchema).parse(await site.get(`/products/${product.id}/variations`, { per_page: PER_PAGE }));
    return variations.flatMap((variation) => stockReportOf(variation, asOf, product) ?? []);
  }

  private async signedBy(row: ConnectionRow, raw: Buffer, signature: string): Promise<boolean> {
    const secret = await this.connected.webhookSecretOf(row);
    return sameSecret(signature, createHmac('sha256', secret).update(raw).digest('base64'));
  }
}

function present(row: ConnectionRow): WooCommerceConnection {
  return { ...connectionView(row), siteUrl: row.site };
}

/** What a signed `user_id` says: which request it is (`id`, used once), for which store, site and owner, until when. */
interface Authorization {
  id: string;
  store: string;
  site: string;
  /** The owner's address when it was issued, hashed with `id`: the site sees the user_id, and need not learn the address. */
  owner: string;
  until: number;
}

function ownerDigest(id: string, ownerEmail: string): string {
  return createHash('sha256').update(`${id}\n${ownerEmail}`).digest('base64url');
}

function parseAuthorization(subject: string): Authorization | undefined {
  try {
    const value = JSON.parse(Buffer.from(subject, 'base64url').toString('utf8')) as Partial<Record<keyof Authorization, unknown>>;
    const { id, store, site, owner, until } = value;
    if (typeof id !== 'string' || typeof store !== 'string' || typeof site !== 'string' || typeof owner !== 'string' || typeof until !== 'number') return undefined;
    return { id, store, site, owner, until };
  } catch {
    return undefined;
  }
}
