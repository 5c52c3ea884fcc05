import type { Platform } from '../platform.ts';
import { wooCommerceOperations } from './operations.ts';

/** WooCommerce in the platform registry (src/platforms.ts). */
export const wooCommercePlatform = {
  name: 'woocommerce',
  operations: wooCommerceOperations,
  widgetForm: new URL('./widget-form.ts', import.meta.url),
  async open() {
    const { openWooCommerce } = await import('./feature.ts');
    return openWooCommerce();
  },
} as const satisfies Platform;
