import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { problemResponses } from '../core/http/openapi-responses.ts';
import { storeParams } from '../stores/schemas.ts';
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
export function paymentRoutes(service: PaymentService) {
  return async function (app: FastifyInstance) {
    const api = app.withTypeProvider<ZodTypeProvider>();
    api.get('/api/v1/stores/:domain/payments', {
      config: { scope: 'api:read' },
      schema: {
        operationId: 'listPayments',
        summary: "Read the payment ledger of a store's paid requests",
        description: 'Every attempt to pay for a request that named this store, newest first: protocol, method, amount, payer, reference, status and the request paid for.',
        tags: ['payments'],
        params: storeParams,
        querystring: z.object({ limit: z.coerce.number().int().min(1).max(500).default(100) }),
        response: { 200: z.object({ payments: z.array(paymentSchema) }), ...problemResponses(400, 404, 503) },
      },
      handler: async (request) => ({ payments: (await service.listPayments(request.caller!, request.params.domain, request.query.limit)) as never }),
    });
  };
}
