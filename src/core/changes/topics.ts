/**
 * Topics more than one feature speaks of: the stores and inventory features announce them, the
 * storefront's availability cache hears them.
 */

/** A store's row changed (installed, uninstalled, settings, sender, removed); the key is its domain. */
export const STORE_CHANGES = 'store';

/** A product's known stock changed; the key is `stockKey(domain, productId)`. */
export const STOCK_CHANGES = 'stock';

export function stockKey(domain: string, productId: string): string {
  return `${domain} ${productId}`;
}
