import type { Platform } from '../platform.ts';
import { vendureOperations } from './operations.ts';

/**
 * Vendure in the platform registry (src/platforms.ts). Its storefronts are the merchant's own
 * (headless), so no product form is followed: the page names the product and variant on the tag.
 */
export const vendurePlatform = {
  name: 'vendure',
  operations: vendureOperations,
  async open() {
    const { openVendure } = await import('./feature.ts');
    return openVendure();
  },
} as const satisfies Platform;
