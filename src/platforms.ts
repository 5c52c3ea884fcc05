import { bigCommercePlatform } from './bigcommerce/feature.ts';
import type { Platform } from './platform.ts';
import { shopifyPlatform } from './shopify/feature.ts';
import { wooCommercePlatform } from './woocommerce/feature.ts';

/**
 * Every platform Restock connects stores of: the only list. A new platform is a folder that
 * exports its `Platform` (src/platform.ts) and one line here; the assembly, the operations, the
 * store domains and the widget's product forms read this list.
 */
export const PLATFORMS: readonly Platform[] = [shopifyPlatform, wooCommercePlatform, bigCommercePlatform];

/** Where platforms forward their stores' storefront requests to the service (Shopify's app proxy). */
export const STOREFRONT_PROXIES: readonly string[] = PLATFORMS.flatMap((platform) => platform.storefrontProxy ?? []);

/** Store domains that tell their platform by themselves, with the platform each tells. */
export const STORE_DOMAINS: ReadonlyArray<readonly [RegExp, string]> = PLATFORMS.flatMap((platform) => (platform.storeDomains ? [[platform.storeDomains, platform.name] as const] : []));
