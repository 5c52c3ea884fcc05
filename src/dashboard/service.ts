import { allScopes } from '../core/scopes.ts';
import { STOREFRONT_OFFERS } from '../channels.ts';
import type { SubscriptionService } from '../alerts/service.ts';
import { costOfNextAlerts, type BillingService } from '../billing/service.ts';
import type { ExportKind } from '../conversions/service.ts';
import type { ConversionService } from '../conversions/service.ts';
import { storeEventTypes } from '../core/events.ts';
import { createEndpointBody, type CreatedEndpoint, type Endpoint } from '../webhooks/schemas.ts';
import { ForbiddenWebhookDestination, type WebhookService } from '../webhooks/service.ts';
import type { PlanId } from '../billing/service.ts';
import { emailSchema, normaliseEmail } from '../core/email.ts';
import type { Caller } from '../core/http/caller.ts';
import { NotFound, ValidationFailed } from '../core/problems.ts';
import type { DispatchService } from '../dispatch/service.ts';
import type { InventoryService } from '../inventory/service.ts';
import { storeSettingsPatch } from '../stores/schemas.ts';
import type { StoreService } from '../stores/service.ts';

/** What the dashboard's pages ask of the stores: a store for its owner, its settings changed. */
export type DashboardStores = Pick<StoreService, 'storeFor' | 'updateStoreSettings'>;

/**
 * What the dashboard's pages read and change, each through its owner's service (which decides
 * who may): the figures and lists they show, and the few changes an owner makes from them.
 */
export interface DashboardDeps {
  stores: DashboardStores;
  alerts: Pick<SubscriptionService, 'demandOf' | 'recentUnsubscribes' | 'subscriptionCounts' | 'subscriptionOfStore'>;
  inventory: Pick<InventoryService, 'stockStatusOf'>;
  dispatch: Pick<
    DispatchService,
    'ledgerCounts' | 'heldByPlan' | 'listNotifications' | 'auditNotification' | 'listRestocks' | 'listOutbox' | 'outboxMessage' | 'countSuppressions' | 'suppressionsOf' | 'suppressAddress' | 'unsuppressAddress'
  >;
  billing: Pick<BillingService, 'listPlans' | 'planUsageFor' | 'checkoutPlan' | 'setOverageCeiling'>;
  conversions: Pick<ConversionService, 'performance' | 'alertOutcome' | 'exportCsv'>;
  webhooks: WebhookService;
  /** True when mail goes to the local outbox (no SMTP_URL): the dashboard then shows it. */
  embeddedMail: boolean;
}

const CHART_DAYS = 30;
/** The most wanted (product, variant) pairs the demand table shows. */
const DEMAND_ROWS = 500;
const MOST_WANTED_ON_OVERVIEW = 5;

/** Readable product titles by `productKey`. */
export type ProductTitles = Map<string, string>;

export function productKey(productId: string, variantId: string | null): string {
  return `${productId} ${variantId ?? ''}`;
}

/** A product or variant someone waits for, with what the store has of it. */
export interface Demand {
  productId: string;
  variantId: string | null;
  title: string;
  variantTitle: string | null;
  waiting: number;
  available: number | null;
}

/**
 * The store's owner, signed in to the dashboard, as the services see a caller: bound to their
 * store, with every scope. The dashboard reads and changes through the same caller-taking service
 * methods as the API and the MCP tools, so the one tenancy rule answers for all three.
 */
export function ownerCaller(shop: string): Caller {
  return {
    agentId: `dashboard:${shop}`,
    scopes: new Set(allScopes),
    storeDomain: shop,
    // Never the request's caller: the dashboard's pages are counted per address, not per caller.
    rateLimitPerMinute: 0,
    tokenId: `dashboard:${shop}`,
  };
}

/**
 * What the merchant dashboard shows, read through each feature's own service: demand, the
 * alert ledger and its audit, unsubscribes and suppressions, plan and quota, settings, outbox.
 * Every method takes the owner's caller (`ownerCaller`) and the shop it signed in to.
 */
export class DashboardService {
  constructor(private readonly deps: DashboardDeps) {}

  get embeddedMail(): boolean {
    return this.deps.embeddedMail;
  }

  async overview(caller: Caller, shop: string, now = new Date()) {
    const { alerts, dispatch, billing, conversions } = this.deps;
    const [store, plan, ledger, heldByPlan, subscriptions, demand, recent, restocks, suppressions, performance] = await Promise.all([
      this.deps.stores.storeFor(caller, shop),
      billing.planUsageFor(caller, shop, now),
      dispatch.ledgerCounts(caller, shop),
      dispatch.heldByPlan(caller, shop),
      alerts.subscriptionCounts(caller, shop),
      this.demand(caller, shop, MOST_WANTED_ON_OVERVIEW),
      dispatch.listNotifications(caller, shop, { limit: 10 }),
      dispatch.listRestocks(caller, shop, 5),
      dispatch.countSuppressions(caller, shop),
      conversions.performance(caller, shop, CHART_DAYS, now),
    ]);
    // What the plan makes of a restock of the most wanted product: its waiting list, alerted at once.
    const nextRestock = demand[0] ? { product: demand[0], ...costOfNextAlerts(plan, demand[0].waiting) } : undefined;
    return {
      titles: await this.titlesOf(caller, shop, [...recent, ...restocks]),
      store,
      plan,
      nextRestock,
      ledger: { queued: 0, sending: 0, sent: 0, skipped: 0, failed: 0, ...ledger },
      heldByPlan,
      waiting: subscriptions.active ?? 0,
      unsubscribed: subscriptions.unsubscribed ?? 0,
      suppressed: suppressions,
      demand,
      recent,
      restocks,
      performance,
    };
  }

  /** The most the store's alerts beyond its allowance may cost a period, in cents. */
  setOverageCeiling(caller: Caller, shop: string, ceilingCents: number) {
    return this.deps.billing.setOverageCeiling(caller, shop, ceilingCents);
  }

  /** What alerts did over the last 30 days, per product (the performance page). */
  performance(caller: Caller, shop: string, now = new Date()) {
    return this.deps.conversions.performance(caller, shop, CHART_DAYS, now);
  }

  exportCsv(caller: Caller, shop: string, kind: ExportKind) {
    return this.deps.conversions.exportCsv(caller, shop, kind);
  }

  /** Waiting subscribers per product and variant, most wanted first, with titles and stock. */
  async demand(caller: Caller, shop: string, limit = DEMAND_ROWS): Promise<Demand[]> {
    const counts = await this.deps.alerts.demandOf(caller, shop, limit, 'most-wanted');
    const known = await this.knownProducts(caller, shop, counts.map((entry) => entry.productId));
    return counts.map((entry) => {
      const stock = known.variants.get(productKey(entry.productId, entry.variantId));
      return {
        productId: entry.productId,
        variantId: entry.variantId,
        title: stock?.productTitle ?? known.titles.get(entry.productId) ?? entry.productId,
        variantTitle: entry.variantId === null ? null : (stock?.variantTitle ?? entry.variantId),
        waiting: entry.waiting,
        available: stock?.available ?? null,
      };
    });
  }

  /** What the store reported of these products: each variant's stock and titles, and a title per product. */
  private async knownProducts(caller: Caller, shop: string, productIds: string[]) {
    const rows = await this.deps.inventory.stockStatusOf(caller, shop, [...new Set(productIds)]);
    const variants = new Map(rows.map((row) => [productKey(row.productId, row.variantId), row]));
    const titles = new Map<string, string>();
    for (const row of rows) if (row.productTitle && !titles.has(row.productId)) titles.set(row.productId, row.productTitle);
    return { variants, titles };
  }

  async alerts(caller: Caller, shop: string, status: string | undefined) {
    const rows = await this.deps.dispatch.listNotifications(caller, shop, { status, limit: 200 });
    return { rows, titles: await this.titlesOf(caller, shop, rows) };
  }

  /** Product titles ("Linen shirt — Small") for ledger rows, as the store last reported them. */
  private async titlesOf(caller: Caller, shop: string, rows: Array<{ product_id: string; variant_id: string | null }>): Promise<ProductTitles> {
    const known = await this.knownProducts(caller, shop, rows.map((row) => row.product_id));
    const titles: ProductTitles = new Map();
    for (const row of rows) {
      const title = known.titles.get(row.product_id) ?? row.product_id;
      const variant = row.variant_id && (known.variants.get(productKey(row.product_id, row.variant_id))?.variantTitle ?? row.variant_id);
      titles.set(productKey(row.product_id, row.variant_id), variant ? `${title} — ${variant}` : title);
    }
    return titles;
  }

  /** Why one alert was sent (or not): the alert, its restock and the subscription behind it. */
  async auditNotification(caller: Caller, shop: string, id: string) {
    const found = await this.deps.dispatch.auditNotification(caller, shop, id);
    if (!found) throw new NotFound(`No alert ${id} for ${shop}.`);
    const subscription = await this.deps.alerts.subscriptionOfStore(caller, shop, found.notification.subscription_id);
    const titles = await this.titlesOf(caller, shop, [found.notification]);
    const outcome = await this.deps.conversions.alertOutcome(caller, shop, id);
    return { ...found, subscription, outcome, product: titles.get(productKey(found.notification.product_id, found.notification.variant_id))! };
  }

  async audience(caller: Caller, shop: string) {
    const [unsubscribes, suppressions] = await Promise.all([
      this.deps.alerts.recentUnsubscribes(caller, shop, 100),
      this.deps.dispatch.suppressionsOf(caller, shop, 500),
    ]);
    return { unsubscribes, suppressions };
  }

  async suppress(caller: Caller, shop: string, email: string): Promise<void> {
    const parsed = storeEmail(email);
    await this.deps.dispatch.suppressAddress(caller, shop, parsed, 'manual', 'added in the dashboard');
  }

  async unsuppress(caller: Caller, shop: string, email: string): Promise<void> {
    await this.deps.dispatch.unsuppressAddress(caller, shop, email);
  }

  webhookEndpoints(caller: Caller, shop: string): Promise<Endpoint[]> {
    return this.deps.webhooks.listEndpoints(caller, shop);
  }

  /**
   * An endpoint from the dashboard's form: its URL and a checkbox per event type. The same checks
   * as the API's (createEndpointBody, then the service's destination rules); a refusal names `/url`.
   */
  async addWebhookEndpoint(caller: Caller, shop: string, fields: Record<string, string>): Promise<CreatedEndpoint> {
    const input = createEndpointBody.safeParse({ url: fields.url ?? '', eventTypes: storeEventTypes.filter((type) => fields[`type:${type}`] !== undefined) });
    if (!input.success) throw new ValidationFailed(input.error.issues.map((issue) => ({ pointer: `/${issue.path[0] === 'eventTypes' ? 'eventTypes' : 'url'}`, message: issue.message })));
    try {
      return await this.deps.webhooks.createEndpoint(caller, shop, input.data);
    } catch (err) {
      if (err instanceof ForbiddenWebhookDestination) throw new ValidationFailed([{ pointer: '/url', message: err.detail }]);
      throw err;
    }
  }

  deleteWebhookEndpoint(caller: Caller, shop: string, id: string): Promise<void> {
    return this.deps.webhooks.deleteEndpoint(caller, shop, id);
  }

  async enableWebhookEndpoint(caller: Caller, shop: string, id: string): Promise<void> {
    await this.deps.webhooks.updateEndpoint(caller, shop, id, { enabled: true });
  }

  /** One endpoint and its newest deliveries, each with its attempts: the delivery log. */
  async webhookDeliveries(caller: Caller, shop: string, id: string) {
    const [endpoint, deliveries] = await Promise.all([this.deps.webhooks.getEndpoint(caller, shop, id), this.deps.webhooks.listDeliveries(caller, shop, id, 100)]);
    return { endpoint, deliveries };
  }

  store(caller: Caller, shop: string) {
    return this.deps.stores.storeFor(caller, shop);
  }

  plans() {
    return this.deps.billing.listPlans();
  }

  planUsage(caller: Caller, shop: string) {
    return this.deps.billing.planUsageFor(caller, shop);
  }

  /** Starts a checkout for the owner; the page then sends them to it. */
  checkout(caller: Caller, shop: string, plan: PlanId) {
    return this.deps.billing.checkoutPlan({ plan, shop }, caller);
  }

  /**
   * Saves the settings form, all or nothing: every field is checked before anything is stored.
   * The form posts every field, and an empty one (which the form parser drops) returns the
   * setting to the default; the SMTP URL is kept unless a new one is given or clearing is ticked.
   * Validated by the API's own schema, so both refuse the same values.
   */
  async saveSettings(caller: Caller, shop: string, form: Record<string, string | undefined>): Promise<void> {
    const patch: Record<string, unknown> = {};
    for (const field of ['batchMultiplier', 'batchIntervalSeconds', 'minStock', 'frequencyCapMinutes'] as const) {
      const value = form[field]?.trim();
      patch[field] = value ? Number(value) : null;
    }
    for (const field of ['locale', 'senderName'] as const) {
      const value = form[field]?.trim();
      patch[field] = value ? value : null;
    }
    const smtpUrl = form.clearSmtp === 'on' ? null : form.smtpUrl?.trim() || undefined;
    if (smtpUrl !== undefined) patch.smtpUrl = smtpUrl;
    Object.assign(patch, channelSettings(form));
    const checked = storeSettingsPatch.safeParse(patch);
    if (!checked.success) {
      throw new ValidationFailed(checked.error.issues.map((issue) => ({ pointer: formPointer(`/${issue.path.join('/')}`), message: issue.message })));
    }
    try {
      await this.deps.stores.updateStoreSettings(caller, shop, checked.data);
    } catch (err) {
      // What the stores service refuses after the schema (Twilio not vouching for the account) names the API's body fields.
      if (err instanceof ValidationFailed) throw new ValidationFailed(err.errors.map((error) => ({ ...error, pointer: formPointer(error.pointer.replace(/^\/body(?=\/)/, '')) })));
      throw err;
    }
  }

  outbox(caller: Caller, shop: string) {
    return this.deps.dispatch.listOutbox(caller, shop, 100);
  }

  outboxMessage(caller: Caller, shop: string, id: string) {
    return this.deps.dispatch.outboxMessage(caller, shop, id);
  }
}

/**
 * The consent and channel fields. Selects post '' for the default; the quiet hours are two
 * numbers or none; the Twilio account, like the SMTP URL, is kept unless all three parts are
 * given again or clearing is ticked (the token is never shown back).
 */
function channelSettings(form: Record<string, string | undefined>): Record<string, unknown> {
  const text = (name: string) => form[name]?.trim() || null;
  const toggle = (name: string) => (form[name] === 'on' ? true : form[name] === 'off' ? false : null);
  const start = text('quietStart');
  const end = text('quietEnd');
  const patch: Record<string, unknown> = {
    doubleOptIn: text('doubleOptIn'),
    country: text('country')?.toUpperCase() ?? null,
    timeZone: text('timeZone'),
    smsQuietHours: start === null && end === null ? null : { start: Number(start ?? NaN), end: Number(end ?? NaN) },
    // Each channel's switch on the storefront's form, named after the channel.
    ...Object.fromEntries(STOREFRONT_OFFERS.map(([channel]) => [channel, toggle(channel)])),
  };
  const account = { accountSid: text('twilioAccountSid'), authToken: text('twilioAuthToken'), from: text('twilioFrom') };
  if (form.clearSmsSender === 'on') patch.smsSender = null;
  else if (account.accountSid || account.authToken || account.from) patch.smsSender = account;
  return patch;
}

/** The settings' nested fields as the form names them. */
const FORM_FIELDS: Record<string, string> = {
  '/smsQuietHours': '/quietStart',
  '/smsQuietHours/start': '/quietStart',
  '/smsQuietHours/end': '/quietEnd',
  '/smsSender': '/twilioAccountSid',
  '/smsSender/accountSid': '/twilioAccountSid',
  '/smsSender/authToken': '/twilioAuthToken',
  '/smsSender/from': '/twilioFrom',
};

function formPointer(pointer: string): string {
  return FORM_FIELDS[pointer] ?? pointer;
}

function storeEmail(email: string): string {
  const checked = emailSchema.safeParse(email.trim());
  if (!checked.success) throw new ValidationFailed([{ pointer: '/email', message: checked.error.issues[0]!.message }]);
  return normaliseEmail(checked.data);
}
