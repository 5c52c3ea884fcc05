import { z } from 'zod';
import type { ServiceSettings } from '../core/settings-slice.ts';

/** The Shopify app, set when SHOPIFY_API_KEY and SHOPIFY_API_SECRET are (install, webhooks, reconciliation). */
export interface ShopifyConfig {
  apiKey: string;
  apiSecret: string;
  apiVersion: string;
  scopes: string[];
  /** Every Shopify Billing charge is a test charge, whatever the store (SHOPIFY_BILLING_TEST=true). */
  alwaysTestCharges: boolean;
}

/** The Shopify app's settings: this platform's slice of the environment, which its registry entry brings to src/config.ts. */
export const shopifySettings = {
  SHOPIFY_API_KEY: z.string().optional().describe("The Shopify app's API key: set with `SHOPIFY_API_SECRET` (both or neither) and `RESTOCK_ENCRYPTION_KEY`; see docs/shopify.md"),
  SHOPIFY_API_SECRET: z.string().optional().describe("The Shopify app's API secret (with `SHOPIFY_API_KEY`)"),
  SHOPIFY_API_VERSION: z.string().default('2026-07').describe('Shopify Admin API version the app calls'),
  SHOPIFY_SCOPES: z.string().default('read_products,read_inventory,read_publications,write_app_proxy,read_orders,write_draft_orders').describe('Access scopes the Shopify app asks for, comma-separated'),
  SHOPIFY_BILLING_TEST: z.enum(['true', 'false']).default('false').describe("`true`: every Shopify Billing charge is a test charge, no money moves (staging, review); otherwise only development stores' charges are, as Shopify reports the store"),
};

/** The Shopify app, or undefined when it is not configured; throws when it is half configured. */
export function shopifyConfig(e: z.infer<z.ZodObject<typeof shopifySettings>>, service: ServiceSettings): ShopifyConfig | undefined {
  if (!e.SHOPIFY_API_KEY && !e.SHOPIFY_API_SECRET) return undefined;
  if (!e.SHOPIFY_API_KEY || !e.SHOPIFY_API_SECRET) {
    throw new Error('SHOPIFY_API_KEY and SHOPIFY_API_SECRET: set both (the Shopify app needs its key and secret) or neither');
  }
  if (!service.encryptionKey) {
    throw new Error("RESTOCK_ENCRYPTION_KEY: the Shopify app keeps stores' Admin API tokens, which are only stored sealed; set 32 random bytes in base64");
  }
  return {
    apiKey: e.SHOPIFY_API_KEY,
    apiSecret: e.SHOPIFY_API_SECRET,
    apiVersion: e.SHOPIFY_API_VERSION,
    scopes: e.SHOPIFY_SCOPES.split(',').map((scope) => scope.trim()).filter(Boolean),
    alwaysTestCharges: e.SHOPIFY_BILLING_TEST === 'true',
  };
}
