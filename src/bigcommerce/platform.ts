import type { Platform } from '../platform.ts';
import { bigCommerceOperations } from './operations.ts';
import { bigCommerceConfig, bigCommerceSettings } from './settings.ts';

/** BigCommerce in the platform registry (src/platforms.ts). */
export const bigCommercePlatform = {
  name: 'bigcommerce',
  storeDomains: /\.mybigcommerce\.com$/,
  operations: bigCommerceOperations,
  widgetForm: new URL('./widget-form.ts', import.meta.url),
  settings: { slice: bigCommerceSettings, read: bigCommerceConfig },
  async open() {
    const { openBigCommerce } = await import('./feature.ts');
    return openBigCommerce();
  },
} as const satisfies Platform;
