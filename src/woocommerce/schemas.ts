import { z } from 'zod';

/** A site's REST API keys, as WooCommerce makes them. */
export const wooKeysSchema = z.object({
  consumerKey: z.string().regex(/^ck_[0-9a-f]{40}$/, 'must be a WooCommerce consumer key (ck_ and 40 hex digits)'),
  consumerSecret: z.string().regex(/^cs_[0-9a-f]{40}$/, 'must be a WooCommerce consumer secret (cs_ and 40 hex digits)'),
});
