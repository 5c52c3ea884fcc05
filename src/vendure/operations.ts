import { z } from 'zod';
import { defineOperation } from '../core/operations.ts';
import { storeInput } from '../stores/schemas.ts';
import { vendureConnectionInput } from './schemas.ts';
import type { VendureService } from './service.ts';

const connectionSchema = z
  .object({
    storeDomain: z.string(),
    adminApiUrl: z.string().describe("The Vendure server's Admin API"),
    productUrl: z.string().describe("The storefront's product address, with {slug} or {id}"),
    status: z.enum(['connected', 'disconnected']),
    webhookIds: z.array(z.number()).describe('Always empty: the plugin on the server delivers, no webhook is made'),
    connectedAt: z.string(),
    disconnectedAt: z.string().nullable(),
    disconnectReason: z.string().nullable(),
    reconciledAt: z.string().nullable(),
  })
  .describe("A store's connection to its Vendure server; its API key is never shown back");

const EXAMPLE_SHOP = 'shop.example.com';

/** A Vendure store's connection, for the agents bound to it (and its owner's dashboard). */
export const vendureOperations = [
  defineOperation({
    id: 'connectVendure',
    method: 'PUT',
    path: '/api/v1/stores/:shop/vendure',
    summary: "Connect a Vendure store with an Admin API key; the answer's signingSecret, shown once, goes into the Restock plugin's settings (agents bound to the store only)",
    tag: 'stores',
    scope: 'inventory:alerts',
    input: storeInput.extend(vendureConnectionInput.shape).strict(),
    output: connectionSchema.extend({ signingSecret: z.string().describe('What the Restock plugin signs its deliveries with (whsec_…): shown this once') }),
    errors: [400, 404, 409, 413, 415, 502, 503],
    tenancy: { refusal: 404 },
    example: { shop: EXAMPLE_SHOP, adminApiUrl: 'https://shop.example.com/admin-api', apiKey: 'vendure-api-key-example-0000', productUrl: 'https://shop.example.com/products/{slug}' },
    run: (vendure: VendureService, { shop, ...input }, { caller }) => vendure.connect(caller, shop, input),
  }),
  defineOperation({
    id: 'getVendureConnection',
    method: 'GET',
    path: '/api/v1/stores/:shop/vendure',
    summary: "A store's Vendure connection (agents bound to the store only)",
    tag: 'stores',
    scope: 'api:read',
    input: storeInput,
    output: connectionSchema,
    errors: [400, 404],
    tenancy: { refusal: 404 },
    example: { shop: EXAMPLE_SHOP },
    run: (vendure: VendureService, { shop }, { caller }) => vendure.connectionFor(caller, shop),
  }),
  defineOperation({
    id: 'disconnectVendure',
    method: 'DELETE',
    path: '/api/v1/stores/:shop/vendure',
    summary: "Disconnect a Vendure store: its API key is forgotten, the plugin's deliveries are refused and no alert is sent (agents bound to the store only)",
    tag: 'stores',
    scope: 'inventory:alerts',
    input: storeInput,
    output: connectionSchema,
    errors: [400, 404, 503],
    tenancy: { refusal: 404 },
    example: { shop: EXAMPLE_SHOP },
    run: (vendure: VendureService, { shop }, { caller }) => vendure.disconnect(caller, shop),
  }),
];
