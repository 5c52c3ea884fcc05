import { readFile } from 'node:fs/promises';
import type { FastifyBaseLogger } from 'fastify';
import type { Config } from '../config.ts';
import type { Database } from '../core/db/database.ts';
import type { Feature } from '../core/feature.ts';
import { pushRoutes } from './routes.ts';
import { PushService } from './service.ts';
import { loadVapidKeys } from './vapid.ts';

export type { PushService } from './service.ts';

export interface PushDeps {
  config: Config;
  database: Database;
  log: FastifyBaseLogger;
}

/** Web push: the VAPID keys (made on the first start), the channel dispatch sends through, the service worker and the key route. */
export async function buildPush({ config, database, log }: PushDeps): Promise<Feature<PushService>> {
  const keys = await loadVapidKeys(database);
  if (keys.made) log.info('web push: made the service’s VAPID key pair; browsers’ subscriptions are bound to it from now on');
  const service = new PushService({ keys, config: config.push, policy: config.tenantOutbound });
  const serviceWorker = await readFile(new URL('./service-worker.js', import.meta.url));
  return { service, routes: [pushRoutes(service, serviceWorker)] };
}
