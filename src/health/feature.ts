import type { Config } from '../config.ts';
import type { Database } from '../core/db/database.ts';
import type { Feature } from '../core/feature.ts';
import { bindOperations } from '../core/operations.ts';
import { healthOperations } from './operations.ts';

/** getHealth: the readiness probe. It has no service of its own; it pings the database. */
export function buildHealth({ config, database }: { config: Config; database: Database }): Feature<undefined> {
  return { service: undefined, operations: bindOperations(healthOperations, { database, serviceName: config.serviceName }) };
}
