import { z } from 'zod';
import type { ServiceSettings } from '../core/settings-slice.ts';

/** The BigCommerce app, set when BIGCOMMERCE_CLIENT_ID and BIGCOMMERCE_CLIENT_SECRET are (install, webhooks, reconciliation). */
export interface BigCommerceConfig {
  clientId: string;
  clientSecret: string;
}

/** The BigCommerce app's settings: this platform's slice of the environment, which its registry entry brings to src/config.ts. */
export const bigCommerceSettings = {
  BIGCOMMERCE_CLIENT_ID: z.string().optional().describe("The BigCommerce app's client id: set with `BIGCOMMERCE_CLIENT_SECRET` (both or neither) and `RESTOCK_ENCRYPTION_KEY`; see docs/bigcommerce.md"),
  BIGCOMMERCE_CLIENT_SECRET: z.string().optional().describe("The BigCommerce app's client secret (with `BIGCOMMERCE_CLIENT_ID`)"),
};

/** The BigCommerce app, or undefined when it is not configured; throws when it is half configured. */
export function bigCommerceConfig(e: z.infer<z.ZodObject<typeof bigCommerceSettings>>, service: ServiceSettings): BigCommerceConfig | undefined {
  if (!e.BIGCOMMERCE_CLIENT_ID && !e.BIGCOMMERCE_CLIENT_SECRET) return undefined;
  if (!e.BIGCOMMERCE_CLIENT_ID || !e.BIGCOMMERCE_CLIENT_SECRET) {
    throw new Error('BIGCOMMERCE_CLIENT_ID and BIGCOMMERCE_CLIENT_SECRET: set both (the BigCommerce app needs its client id and secret) or neither');
  }
  if (!service.encryptionKey) {
    throw new Error("RESTOCK_ENCRYPTION_KEY: the BigCommerce app keeps stores' access tokens, which are only stored sealed; set 32 random bytes in base64");
  }
  return { clientId: e.BIGCOMMERCE_CLIENT_ID, clientSecret: e.BIGCOMMERCE_CLIENT_SECRET };
}
