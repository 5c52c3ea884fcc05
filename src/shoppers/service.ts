import { nowIso } from '../core/clock.ts';
import type { Channel } from '../channels.ts';
import { NotFound } from '../core/problems.ts';
import type { ContactPointRow } from '../alerts/service.ts';
import type { SubscriptionRow } from '../alerts/service.ts';
import type { Shopper, SubscriptionService } from '../alerts/service.ts';
import type { ConversionService } from '../conversions/service.ts';
import type { DispatchService } from '../dispatch/service.ts';
import type { InventoryService } from '../inventory/service.ts';
import type { StoreService } from '../stores/service.ts';
import { parseStoredSettings } from '../stores/schemas.ts';
import type { Language } from '../core/languages.ts';
import { languageOf } from './strings.ts';

/** What the shopper's pages ask of the inventory: a product's title and link. */
export type ShopperInventory = Pick<InventoryService, 'describeProduct'>;

/** What erasing a shopper asks of the conversions. */
export type ShopperConversions = Pick<ConversionService, 'eraseCustomer'>;

/** What the shopper's pages ask of the ledger: what was sent to an address, and erasing a customer. */
export type ShopperLedger = Pick<DispatchService, 'sentToAddressFor' | 'eraseCustomer'>;

/** What the shopper's pages ask of the subscriptions. */
export type ShopperSubscriptions = Pick<SubscriptionService, 'shopperForToken' | 'shopperSubscriptions' | 'shopperCancel' | 'shopperSetChannel' | 'eraseCustomer'>;

/** What the shopper's pages ask of the stores: a store as it is. */
export type ShopperStores = Pick<StoreService, 'findStore'>;

export interface ShopperPageDeps {
  alerts: ShopperSubscriptions;
  dispatch: ShopperLedger;
  conversions: ShopperConversions;
  inventory: ShopperInventory;
  stores: ShopperStores;
}

/** One subscription as the page shows it: the row, its channels, and what the store calls the product. */
export interface ListedSubscription {
  row: SubscriptionRow;
  contactPoints: ContactPointRow[];
  title: string | null;
  /** Only an http(s) address the inventory holds; anything else is shown as text, never as a link. */
  productUrl: string | null;
}

export interface ShopperPage {
  shopper: Shopper;
  subscriptions: ListedSubscription[];
  /** The language the shopper chose (a subscription's) or the store did; undefined: let the browser say. */
  language: Language | undefined;
}

/** Tokens are `<id>.<mac>` in base64url; anything else cannot be genuine and is not worth a lookup. */
const TOKEN_SHAPE = /^[A-Za-z0-9_.-]{1,256}$/;

/**
 * Every failure to open a page reads the same (forged, malformed, erased), so the answer tells
 * nothing about which links once worked.
 */
export const DEAD_LINK = 'This link does not open any alerts. Use the link from your most recent alert message.';

/**
 * The shopper's page: what one address waits for at one store, and what they may do about it.
 * The signed link is the only authority; which rows it reaches is the alerts service's decision.
 */
export class ShopperPageService {
  constructor(private readonly deps: ShopperPageDeps) {}

  /** Whose page this token opens; NotFound for any token that opens none. */
  async shopperOf(token: string): Promise<Shopper> {
    const shopper = TOKEN_SHAPE.test(token) ? await this.deps.alerts.shopperForToken(token) : undefined;
    if (!shopper) throw new NotFound(DEAD_LINK);
    return shopper;
  }

  async page(shopper: Shopper): Promise<ShopperPage> {
    const listed = await this.deps.alerts.shopperSubscriptions(shopper);
    const subscriptions = await Promise.all(listed.map((entry) => this.withProduct(shopper.storeDomain, entry)));
    return { shopper, subscriptions, language: await this.chosenLanguage(shopper.storeDomain, listed.map((entry) => entry.row)) };
  }

  async cancel(shopper: Shopper, subscriptionId: string | undefined): Promise<void> {
    await this.deps.alerts.shopperCancel(shopper, subscriptionId);
  }

  async setChannel(shopper: Shopper, channel: Channel, on: boolean, subscriptionId: string | undefined): Promise<void> {
    await this.deps.alerts.shopperSetChannel(shopper, channel, on, subscriptionId);
  }

  /** GDPR access: what alerts and dispatch hold for the address at the store. */
  async exportData(shopper: Shopper): Promise<ShopperData> {
    const { subscriptions } = await this.page(shopper);
    const productIds = [...new Set(subscriptions.map((entry) => entry.row.product_id))];
    const sent = await this.deps.dispatch.sentToAddressFor(shopper.storeDomain, shopper.email, productIds);
    return {
      exportedAt: nowIso(),
      store: shopper.storeDomain,
      email: shopper.email,
      subscriptions: subscriptions.map(exportedSubscription),
      alertsSent: sent.map((alert) => ({ alertId: alert.id, kind: alert.kind, productId: alert.product_id, variantId: alert.variant_id, sentAt: alert.sent_at })),
    };
  }

  /**
   * GDPR erasure, the same three steps as Shopify's customers/redact: alerts (subscriptions and
   * contact points), dispatch (ledger and suppressions), conversions (orders). The alerts go
   * first on purpose: once they are gone the link opens nothing, so a retry after a failure
   * part-way finds a dead link rather than half a page; the other two are keyed by the address
   * and are erased again by any later redaction.
   */
  async erase({ storeDomain, email }: Shopper): Promise<void> {
    await this.deps.alerts.eraseCustomer(storeDomain, email);
    await this.deps.dispatch.eraseCustomer(storeDomain, email);
    await this.deps.conversions.eraseCustomer(storeDomain, email);
  }

  private async withProduct(storeDomain: string, entry: { row: SubscriptionRow; contactPoints: ContactPointRow[] }): Promise<ListedSubscription> {
    const product = await this.deps.inventory.describeProduct(storeDomain, entry.row.product_id, entry.row.variant_id);
    const title = product?.productTitle ? [product.productTitle, product.variantTitle].filter(Boolean).join(' — ') : null;
    return { ...entry, title, productUrl: webAddress(product?.productUrl) };
  }

  /**
   * The shopper's own choice first (the newest subscription that recorded one), then the store's
   * own setting. The store's effective settings always name a language (English by default), so
   * its stored settings are read to tell a choice from the default: without a choice the
   * browser's Accept-Language decides.
   */
  private async chosenLanguage(storeDomain: string, rows: SubscriptionRow[]): Promise<Language | undefined> {
    for (const row of rows) {
      const language = languageOf(row.locale);
      if (language) return language;
    }
    const store = await this.deps.stores.findStore(storeDomain);
    return store ? languageOf(parseStoredSettings(store.settings).locale) : undefined;
  }
}

/** What "Download my data" hands over. */
export interface ShopperData {
  exportedAt: string;
  store: string;
  email: string;
  subscriptions: ReturnType<typeof exportedSubscription>[];
  /** The alerts sent to the address (the ledger's sent rows for the products above). */
  alertsSent: Array<{ alertId: string; kind: string; productId: string; variantId: string | null; sentAt: string }>;
}

function exportedSubscription({ row, contactPoints, title }: ListedSubscription) {
  return {
    subscriptionId: row.id,
    productId: row.product_id,
    variantId: row.variant_id,
    productTitle: title,
    status: row.status,
    email: row.email,
    emailMuted: row.email_muted === 1,
    locale: row.locale,
    country: row.country,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    consent: { method: row.consent_method, text: row.consent_text, page: row.consent_page, givenAt: row.created_at, confirmedAt: row.confirmed_at },
    // The browser's push keys are left out: they are credentials for encrypting to it, not facts about the shopper.
    contactPoints: contactPoints.map((point) => ({
      channel: point.channel,
      address: point.address,
      status: point.status,
      statusReason: point.status_reason,
      timeZone: point.time_zone,
      consent: { method: point.consent_method, text: point.consent_text, page: point.consent_page, givenAt: point.consent_at, confirmedAt: point.confirmed_at },
      createdAt: point.created_at,
      updatedAt: point.updated_at,
    })),
  };
}

/** An http(s) URL as stored by the inventory, or null: a `javascript:` or malformed one never becomes a link. */
export function webAddress(value: string | null | undefined): string | null {
  if (!value) return null;
  try {
    const url = new URL(value);
    return url.protocol === 'https:' || url.protocol === 'http:' ? url.href : null;
  } catch {
    return null;
  }
}
