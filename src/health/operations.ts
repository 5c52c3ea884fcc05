import { z } from 'zod';
import type { Database } from '../core/db/database.ts';
import { defineOperation } from '../core/operations.ts';
import { ServiceUnavailable } from '../core/problems.ts';

const healthResponse = z
  .object({
    status: z.literal('ok').describe('`ok` when healthy'),
    service: z.string().describe('Human-readable service name'),
  })
  .describe('The service is healthy and ready');

/** A readiness probe cannot wait long: a slow database counts as a down one. */
const PING_TIMEOUT_MS = 2500;

/** What the probe runs on: the database it pings, and the name it answers with. */
export interface HealthPort {
  database: Database;
  serviceName: string;
}

/** getHealth: the readiness probe. */
export const healthOperations = [
  defineOperation({
    id: 'getHealth',
    method: 'GET',
    path: '/api/health',
    summary: 'Report the service health',
    description: 'Answers 200 when the service and its database are ready, 503 problem+json when the database cannot be reached.',
    tag: 'service',
    input: z.object({}),
    output: healthResponse,
    errors: [503],
    headers: { 'cache-control': 'no-store' },
    tenancy: { none: 'service health' },
    example: {},
    tool: { title: 'Service health', description: 'Whether the service is up and its database answers.' },
    run: async ({ database, serviceName }: HealthPort) => {
      await pingWithin(database, PING_TIMEOUT_MS);
      return { status: 'ok' as const, service: serviceName };
    },
  }),
];

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
