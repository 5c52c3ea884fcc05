/**
 * Topics more than one feature speaks of: the stores and inventory features announce them, the
 * storefront's availability cache hears them; the features that announce a subscription's news
 * announce SUBSCRIPTION_NEWS, and the MCP sessions following it hear it.
 */

/** A store's row changed (installed, uninstalled, settings, sender, removed); the key is its domain. */
export const STORE_CHANGES = 'store';

/** A product's known stock changed; the key is `stockKey(domain, productId)`. */
export const STOCK_CHANGES = 'stock';

export function stockKey(domain: string, productId: string): string {
  return `${domain} ${productId}`;
}

/**
 * A subscription has news (docs/agents.md#callbacks). The key is `subscriptionNewsKey(id)` when
 * the news names the subscription (an alert sent for it), `alertNewsKey(id)` when it names only
 * the alert it is about (a click, an order credited to it): the announcer does not know the
 * subscription, a listener that cares looks it up.
 */
export const SUBSCRIPTION_NEWS = 'subscription-news';

export function subscriptionNewsKey(subscriptionId: string): string {
  return `subscription ${subscriptionId}`;
}

export function alertNewsKey(alertId: string): string {
  return `alert ${alertId}`;
}
