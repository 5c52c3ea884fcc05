import { z } from 'zod';
import { productIdSchema, variantIdSchema } from '../alerts/schemas.ts';

const webUrl = z
  .url({ protocol: /^https?$/ })
  .max(2048)
  .describe('An http(s) URL');

/** A price as the purchasing view reads it: whole minor units, so sums stay exact. */
export const priceSchema = z
  .object({
    minor: z.int().min(0).max(1_000_000_000_000).describe("Amount in the currency's minor unit (cents; yen have none)"),
    currency: z.string().regex(/^[A-Z]{3}$/, 'must be an ISO 4217 code such as EUR').describe('ISO 4217 currency code'),
  })
  .strict();

export const stockReportSchema = z
  .object({
    productId: productIdSchema,
    variantId: variantIdSchema.nullish().describe('The variant; omit or null when the platform counts stock per product'),
    available: z.int().min(-1_000_000_000).max(1_000_000_000).describe('Sellable units across locations (negative when oversold)'),
    published: z.boolean().optional().describe('Whether the product is on sale; alerts wait while it is not. Default: as last reported (new: true)'),
    productTitle: z.string().min(1).max(255).optional().describe('Shown in the alert e-mail'),
    variantTitle: z.string().min(1).max(255).nullish(),
    imageUrl: webUrl.nullish().describe('Product image for the alert e-mail'),
    productUrl: webUrl.nullish().describe('Where the alert e-mail links to'),
    price: priceSchema.nullish().describe("The current price, for the purchasing view's revenue; null: not known. Default: as last reported"),
    updatedAt: z.iso.datetime({ offset: true }).optional().describe('Time of this state at the source; reports older than the last one taken are ignored'),
  })
  .strict();

export const reportInventoryBody = z
  .object({ items: z.array(stockReportSchema).min(1).max(100) })
  .strict()
  .describe('Stock of up to 100 variants or products');

export const stockOutcomeSchema = z.object({
  productId: z.string(),
  variantId: z.string().nullable(),
  available: z.number().nullable(),
  published: z.boolean(),
  ignored: z.enum(['stale']).optional().describe('stale: older than the state already known; nothing changed'),
  restockId: z.string().optional().describe('Present when this report made the item sellable again: its waiting subscribers are being alerted'),
});

export const reportInventoryResponse = z.object({ items: z.array(stockOutcomeSchema) }).describe('What each report did, in order');

export const stockStatusSchema = z.object({
  productId: z.string(),
  variantId: z.string().nullable(),
  available: z.number().nullable().describe('Last known sellable units; null while unknown'),
  published: z.boolean(),
  productTitle: z.string().nullable(),
  variantTitle: z.string().nullable(),
  imageUrl: z.string().nullable(),
  productUrl: z.string().nullable(),
  updatedAt: z.string(),
});

export const stockQuery = z.object({ productId: productIdSchema.optional() }).strict();
export const stockResponse = z.object({ items: z.array(stockStatusSchema) }).describe("The store's known stock");
