import type { SubscriptionService } from '../alerts/service.ts';
import { NotFound } from '../core/problems.ts';
import type { InventoryService } from '../inventory/service.ts';
import type { StoreService } from '../stores/service.ts';
import type { ShopperSubscribeInput } from './schemas.ts';

/** What the storefront widget asks of the service: a product's availability and a shopper's subscription. */
export class StorefrontService {
  constructor(
    private readonly stores: StoreService,
    private readonly inventory: InventoryService,
    private readonly alerts: SubscriptionService,
  ) {}

  /**
   * The same answer for a store that is not a customer as for a product nobody knows, so the
   * endpoint cannot be used to list the service's customers.
   */
  async availability(shop: string, productId: string) {
    const domain = await this.stores.activeStore(shop);
    if (!domain) return { shop: shop.toLowerCase(), productId, soldOut: null, variants: [] };
    const rows = await this.inventory.availabilityOf(domain, productId);
    const variants = rows
      .filter((row) => row.variantId !== null)
      .map((row) => ({ variantId: row.variantId!, soldOut: soldOut(row) }));
    const whole = rows.find((row) => row.variantId === null);
    let productSoldOut: boolean | null = null;
    if (variants.length > 0) productSoldOut = variants.every((variant) => variant.soldOut);
    else if (whole) productSoldOut = soldOut(whole);
    return { shop: domain, productId, soldOut: productSoldOut, variants };
  }

  async subscribeShopper(input: ShopperSubscribeInput): Promise<{ status: 'subscribed' }> {
    const domain = await this.customerStore(input.shop);
    await this.alerts.subscribeShopper({ ...input, shop: domain });
    return { status: 'subscribed' };
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
