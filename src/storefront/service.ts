import { signUpExtraContacts, type SubscriptionService } from '../alerts/service.ts';
import { CONTACT_CHANNELS, isConfirmed, type ConfirmedChannel, type ContactChannel } from '../channels.ts';
import { idsAt } from '../core/platforms.ts';
import { NotFound } from '../core/problems.ts';
import type { InventoryService } from '../inventory/service.ts';
import type { StoreService } from '../stores/service.ts';
import type { ShopperSubscribeInput } from './schemas.ts';
import { availabilityAnswerOf, type AvailabilityAnswer, type AvailabilityCache } from './availability-cache.ts';

/** What the storefront asks of the subscriptions: a shopper's sign-up. */
export type StorefrontSubscriptions = Pick<SubscriptionService, 'subscribeShopper'>;

/** What the storefront asks of the inventory: a product's availability. */
export type StorefrontInventory = Pick<InventoryService, 'availabilityOf'>;

/** What the storefront asks of the stores: whether one is active, its platform, the channels its form offers. */
export type StorefrontStores = Pick<StoreService, 'activeStore' | 'requireStorePlatform' | 'storefrontChannels'>;

export { embedSnippet } from './embed.ts';

/** Whether the service itself can send each channel beside e-mail for any store (its channels' features' word). */
export type ServiceChannels = Partial<Record<ContactChannel, boolean>>;

/** Every channel off: what a page that shows no form, or a store that takes no alerts, is told. */
const NO_CHANNELS = Object.fromEntries(CONTACT_CHANNELS.map((channel) => [channel, false])) as Record<ContactChannel, boolean>;

/** What the storefront widget asks of the service: a product's availability and a shopper's subscription. */
export class StorefrontService {
  constructor(
    private readonly stores: StorefrontStores,
    private readonly inventory: StorefrontInventory,
    private readonly alerts: StorefrontSubscriptions,
    /** What the service itself can send beside e-mail, whatever the store. */
    private readonly offers: ServiceChannels = {},
    /** Answers kept between changes; without it, each is built from the database. */
    private readonly cache?: AvailabilityCache,
  ) {}

  /** The availability answer as sent (JSON and its ETag), kept between changes when there is a cache. */
  async availabilityAnswer(shop: string, productId: string): Promise<AvailabilityAnswer> {
    const key = shop.toLowerCase();
    const build = async () => {
      const { answer, customer } = await this.availabilityOf(shop, productId);
      return { answer, keep: customer && answer.shop === key };
    };
    if (this.cache) return this.cache.answer(key, productId, build);
    return availabilityAnswerOf((await build()).answer);
  }

  /**
   * The same answer for a store that is not a customer as for a product nobody knows, so the
   * endpoint cannot be used to list the service's customers.
   */
  async availability(shop: string, productId: string) {
    return (await this.availabilityOf(shop, productId)).answer;
  }

  /** The answer, and whether the store is a customer (never sent: see `availability`). */
  private async availabilityOf(shop: string, productId: string) {
    const domain = await this.stores.activeStore(shop);
    if (!domain) return { answer: { shop: shop.toLowerCase(), productId, soldOut: null, variants: [], channels: NO_CHANNELS }, customer: false };
    const rows = await this.inventory.availabilityOf(domain, productId);
    const variants = rows
      .filter((row) => row.variantId !== null)
      .map((row) => ({ variantId: row.variantId!, soldOut: soldOut(row) }));
    const whole = rows.find((row) => row.variantId === null);
    let productSoldOut: boolean | null = null;
    if (variants.length > 0) productSoldOut = variants.every((variant) => variant.soldOut);
    else if (whole) productSoldOut = soldOut(whole);
    // Only a page that shows the form needs to know its channels; an in-stock page costs no more.
    const showsForm = productSoldOut === true || variants.some((variant) => variant.soldOut);
    const channels = showsForm ? await this.stores.storefrontChannels(domain, this.offers) : NO_CHANNELS;
    return { answer: { shop: domain, productId, soldOut: productSoldOut, variants, channels }, customer: true };
  }


  async subscribeShopper(input: ShopperSubscribeInput): Promise<{ status: 'subscribed'; confirmBy: ConfirmedChannel[] }> {
    const domain = await this.customerStore(input.shop);
    await this.stores.requireStorePlatform(domain, idsAt('/body', input));
    const page = input.page ?? null;
    const contacts = signUpExtraContacts(input, 'storefront', page, input.timeZone ?? null);
    const { confirmationRequired } = await this.alerts.subscribeShopper({
      shop: domain,
      productId: input.productId,
      variantId: input.variantId ?? null,
      email: input.email,
      locale: input.locale ?? null,
      country: input.country ?? null,
      consent: { method: 'storefront-form', text: input.consentText ?? 'Notify me when available', page },
      contacts,
    });
    // The e-mail when the store asks for its link; each contact point whose channel waits for its own yes (a phone's reply).
    const confirmBy: ConfirmedChannel[] = confirmationRequired ? ['email'] : [];
    for (const { channel } of contacts) if (isConfirmed(channel)) confirmBy.push(channel);
    return { status: 'subscribed', confirmBy };
  }

  /** A store that takes alerts: known to the service and not uninstalled. */
  private async customerStore(shop: string): Promise<string> {
    const domain = await this.stores.activeStore(shop);
    if (!domain) throw new NotFound(`${shop.toLowerCase()} does not take back-in-stock alerts through this service.`);
    return domain;
  }
}

/**
 * Unpublished counts as sold out: the shopper cannot buy it, and dispatch waits for it to return.
 * A variant sold whatever its stock (backorders, pre-order) is never sold out.
 */
function soldOut(row: { available: number | null; published: boolean; purchasableWithoutStock: boolean }): boolean {
  return !row.published || (!row.purchasableWithoutStock && (row.available ?? 0) <= 0);
}
