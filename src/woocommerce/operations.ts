import { z } from 'zod';
import { defineOperation } from '../core/operations.ts';
import { storeInput } from '../stores/schemas.ts';
import { wooKeysSchema } from './schemas.ts';
import type { WooCommerceService } from './service.ts';

const connectionSchema = z
  .object({
    storeDomain: z.string(),
    siteUrl: z.string().describe('The WooCommerce site, where /wp-json/wc/v3 is'),
    status: z.enum(['connected', 'disconnected']),
    webhookIds: z.array(z.number()).describe('The webhooks the service made on the site (product.created, product.updated, product.restored)'),
    connectedAt: z.string(),
    disconnectedAt: z.string().nullable(),
    disconnectReason: z.string().nullable(),
    reconciledAt: z.string().nullable(),
  })
  .describe("A store's connection to its WooCommerce site; its keys are never shown back");

const siteUrlSchema = z.string().max(2048).describe('The WooCommerce site, e.g. https://shop.example.com');

const EXAMPLE_SHOP = 'shop.example.com';

/** A WooCommerce store's connection, for the agents bound to it (and its owner's dashboard). */
export const wooCommerceOperations = [
  defineOperation({
    id: 'connectWooCommerce',
    method: 'PUT',
    path: '/api/v1/stores/:shop/woocommerce',
    summary: 'Connect a WooCommerce store with REST API keys (read/write) made on its site (agents bound to the store only)',
    tag: 'stores',
    scope: 'inventory:alerts',
    input: storeInput.extend({ siteUrl: siteUrlSchema, ...wooKeysSchema.shape }).strict(),
    output: connectionSchema,
    errors: [400, 404, 409, 413, 415, 502, 503],
    tenancy: { refusal: 404 },
    example: { shop: EXAMPLE_SHOP, siteUrl: 'https://shop.example.com', consumerKey: `ck_${'1'.repeat(40)}`, consumerSecret: `cs_${'1'.repeat(40)}` },
    run: (woocommerce: WooCommerceService, { shop, ...keys }, { caller }) => woocommerce.connectWithKeys(caller, shop, keys),
  }),
  defineOperation({
    id: 'authorizeWooCommerce',
    method: 'POST',
    path: '/api/v1/stores/:shop/woocommerce/authorization',
    summary: "The address of the site's approval page: once its owner approves, the site hands the service its keys (agents bound to the store only)",
    tag: 'stores',
    scope: 'inventory:alerts',
    input: storeInput.extend({ siteUrl: siteUrlSchema }).strict(),
    output: z.object({ authorizeUrl: z.string().describe("WooCommerce's /wc-auth/v1/authorize on the site, for its owner to open") }),
    errors: [400, 404, 409, 413, 415, 503],
    tenancy: { refusal: 404 },
    example: { shop: EXAMPLE_SHOP, siteUrl: 'https://shop.example.com' },
    run: async (woocommerce: WooCommerceService, { shop, siteUrl }, { caller }) => ({ authorizeUrl: await woocommerce.authorizationUrl(caller, shop, siteUrl) }),
  }),
  defineOperation({
    id: 'getWooCommerceConnection',
    method: 'GET',
    path: '/api/v1/stores/:shop/woocommerce',
    summary: "A store's WooCommerce connection (agents bound to the store only)",
    tag: 'stores',
    scope: 'api:read',
    input: storeInput,
    output: connectionSchema,
    errors: [400, 404],
    tenancy: { refusal: 404 },
    example: { shop: EXAMPLE_SHOP },
    run: (woocommerce: WooCommerceService, { shop }, { caller }) => woocommerce.connectionFor(caller, shop),
  }),
  defineOperation({
    id: 'disconnectWooCommerce',
    method: 'DELETE',
    path: '/api/v1/stores/:shop/woocommerce',
    summary: 'Disconnect a WooCommerce store: its webhooks are deleted and no alert is sent (agents bound to the store only)',
    tag: 'stores',
    scope: 'inventory:alerts',
    input: storeInput,
    output: connectionSchema,
    errors: [400, 404, 503],
    tenancy: { refusal: 404 },
    example: { shop: EXAMPLE_SHOP },
    run: (woocommerce: WooCommerceService, { shop }, { caller }) => woocommerce.disconnect(caller, shop),
  }),
];
