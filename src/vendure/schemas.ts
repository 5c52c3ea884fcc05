import { z } from 'zod';

/** What connecting a Vendure server takes, as the API and the dashboard's form both read it. */
export const vendureConnectionInput = z.object({
  adminApiUrl: z.string().max(2048).describe("The Vendure server's Admin API, e.g. https://shop.example.com/admin-api"),
  apiKey: z.string().min(16).max(512).regex(/^[\x21-\x7e]+$/, 'must be the API key Vendure showed when it was made').describe('An Admin API key (Vendure 3.6 or later) whose role may read the catalogue and settings'),
  productUrl: z
    .string()
    .max(2048)
    .describe("The storefront's product page, with {slug} (or {id}) where the product's goes, e.g. https://shop.example.com/products/{slug}: where alerts send shoppers"),
});
export type VendureConnectionInput = z.infer<typeof vendureConnectionInput>;
