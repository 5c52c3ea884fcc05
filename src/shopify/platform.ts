import type { Platform } from '../platform.ts';
import { shopifyConfig, shopifySettings } from './settings.ts';

/** Where `[app_proxy] url` in shopify.app.toml points: Shopify forwards `https://<store>/apps/restock/<path>` here. */
export const APP_PROXY_PATH = '/shopify/proxy';

/** Shopify in the platform registry (src/platforms.ts). */
export const shopifyPlatform = {
  name: 'shopify',
  storeDomains: /\.myshopify\.com$/,
  storefrontProxy: APP_PROXY_PATH,
  settings: { slice: shopifySettings, read: shopifyConfig },
  async open(needs) {
    const { openShopify } = await import('./feature.ts');
    return openShopify(needs);
  },
} as const satisfies Platform;
