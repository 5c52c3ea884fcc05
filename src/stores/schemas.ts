import { z } from 'zod';

export const shopSchema = z
  .string()
  .max(255)
  .regex(/^[a-zA-Z0-9][a-zA-Z0-9-]{0,62}\.myshopify\.com$/, 'must be a store domain such as my-store.myshopify.com')
  .describe("Identifier of the merchant's store: its myshopify.com domain");

export const storeParams = z.object({ domain: shopSchema });

export const storeSchema = z
  .object({
    domain: z.string().describe('The store domain, e.g. my-store.myshopify.com'),
    ownerEmail: z.string().describe('The person answerable for the store; agents they claim can be bound to it'),
    createdAt: z.string(),
  })
  .describe("A merchant's store");

export type Store = z.infer<typeof storeSchema>;
