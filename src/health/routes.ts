import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { Database } from '../core/db/database.ts';
import { problemResponses } from '../core/http/openapi-responses.ts';
import { ServiceUnavailable } from '../core/problems.ts';

const healthResponse = z
  .object({
    status: z.literal('ok').describe('`ok` when healthy'),
    service: z.string().describe('Human-readable service name'),
  })
  .describe('The service is healthy and ready');

/** A readiness probe cannot wait long: a slow database counts as a down one. */
const PING_TIMEOUT_MS = 2500;

export function healthRoutes(database: Database, serviceName: string) {
  return async function (app: FastifyInstance) {
    app.withTypeProvider<ZodTypeProvider>().get('/api/health', {
      schema: {
        operationId: 'getHealth',
        summary: 'Report the service health',
        description: 'Answers 200 when the service and its database are ready, 503 problem+json when the database cannot be reached.',
        tags: ['service'],
        response: { 200: healthResponse, ...problemResponses(503) },
      },
      handler: async (_request, reply) => {
        reply.header('cache-control', 'no-store');
        await pingWithin(database, PING_TIMEOUT_MS);
        return { status: 'ok' as const, service: serviceName };
      },
    });
  };
}

async function pingWithin(database: Database, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new ServiceUnavailable(`The database did not answer within ${ms} ms.`)), ms);
  });
  try {
    await Promise.race([database.ping(), timeout]);
  } catch (err) {
    if (err instanceof ServiceUnavailable) throw err;
    throw new ServiceUnavailable('The database cannot be reached right now.');
  } finally {
    clearTimeout(timer);
  }
}
