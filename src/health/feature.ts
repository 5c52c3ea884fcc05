import type { Config } from '../config.ts';
import type { Database } from '../core/db/database.ts';
import type { Feature } from '../core/feature.ts';
import { healthRoutes } from './routes.ts';

/** getHealth: the readiness probe. It has no service of its own; it pings the database. */
export function buildHealth({ config, database }: { config: Config; database: Database }): Feature<undefined> {
  return { service: undefined, routes: [healthRoutes(database, config.serviceName)] };
}
