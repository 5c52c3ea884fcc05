import { z } from 'zod';
import { defineOperation } from '../core/operations.ts';
import { storeInput } from '../stores/schemas.ts';
import type { PaymentService } from './service.ts';

const paymentSchema = z
  .object({
    paymentId: z.string(),
    protocol: z.enum(['x402', 'mpp']),
    method: z.string().describe('x402: `exact:<network>`; MPP: stripe, tempo or card'),
    intent: z.string().describe('charge or session'),
    operation: z.string().describe('The operation paid for'),
    amount: z.string().describe('In base units of `currency`'),
    currency: z.string().describe('`usd`, or the token contract paid in'),
    payer: z.string().nullable(),
    reference: z.string().nullable().describe('Transaction hash (x402) or processor reference (MPP)'),
    status: z.enum(['verifying', 'verified', 'settled', 'pending', 'failed', 'cancelled', 'refunded']),
    error: z.string().nullable(),
    request: z.object({ method: z.string(), path: z.string(), requestId: z.string() }),
    result: z.string().nullable().describe('What the payment bought: a subscription or checkout session id'),
    createdAt: z.string(),
    updatedAt: z.string(),
  })
  .describe('One attempt to pay for a request');

/** The payment ledger, for the store a payment concerns. */
export const paymentOperations = [
  defineOperation({
    id: 'listPayments',
    method: 'GET',
    path: '/api/v1/stores/:shop/payments',
    summary: "Read the payment ledger of a store's paid requests",
    description: 'Every attempt to pay for a request that named this store, newest first: protocol, method, amount, payer, reference, status and the request paid for.',
    tag: 'payments',
    scope: 'api:read',
    input: storeInput.extend({ limit: z.coerce.number().int().min(1).max(500).default(100) }),
    output: z.object({ payments: z.array(paymentSchema) }),
    errors: [400, 404, 503],
    tenancy: { refusal: 404 },
    example: { shop: 'my-store.myshopify.com' },
    run: async (payments: PaymentService, { shop, limit }, { caller }) => ({ payments: (await payments.listPayments(caller, shop, limit)) as never }),
  }),
];
