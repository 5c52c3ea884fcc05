/**
 * What the plugin tells Restock, one JSON object per delivery (`type` says which). Stock news
 * carries ids only: Vendure's events give a change, not a level, so Restock reads the variants
 * back through the Admin API and applies Vendure's own rules to what it reads. Orders carry what
 * attribution needs: the buyer's address, the lines' products and amounts, in minor units.
 */
export type RestockMessage =
  | { type: 'variants.changed'; variantIds: string[] }
  | { type: 'products.changed'; productIds: string[] }
  | { type: 'catalog.changed' }
  | { type: 'order.placed' | 'order.paid'; order: OrderMessage }
  | { type: 'order.cancelled'; code: string; cancelledAt: string }
  | { type: 'order.refunded'; code: string; refundId: string; refundedAt: string; currency: string; lines: RefundLineMessage[] }
  | { type: 'app.uninstalled' };

export interface OrderMessage {
  code: string;
  email: string | null;
  placedAt: string;
  currency: string;
  lines: OrderLineMessage[];
}

export interface OrderLineMessage {
  lineId: string;
  productId: string;
  variantId: string;
  quantity: number;
  /** What the buyer pays for the line after its discounts, tax included, in the currency's minor unit. */
  amount: number;
}

export interface RefundLineMessage {
  lineId: string;
  quantity: number;
  amount: number;
}
