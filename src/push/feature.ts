import type { FastifyBaseLogger } from 'fastify';
import type { Config } from '../config.ts';
import { browserScript } from '../core/browser-scripts.ts';
import type { Database } from '../core/db/database.ts';
import type { Feature } from '../core/feature.ts';
import { pushChannelSending } from './channel.ts';
import { pushRoutes } from './routes.ts';
import { PushService } from './service.ts';
import { loadVapidKeys } from './vapid.ts';

export type { PushService } from './service.ts';

export interface PushDeps {
  config: Config;
  database: Database;
  log: FastifyBaseLogger;
  /** Where platforms forward their stores' storefront requests (Shopify's app proxy): the worker and the key are served there too. */
  storefrontProxies: readonly string[];
}

/** Web push: the VAPID keys (made on the first start), the channel dispatch sends through, the service worker and the key route. */
export async function buildPush({ config, database, log, storefrontProxies }: PushDeps): Promise<Feature<PushService>> {
  const keys = await loadVapidKeys(database);
  if (keys.made) log.info('web push: made the service’s VAPID key pair; browsers’ subscriptions are bound to it from now on');
  const service = new PushService({ keys, config: config.channels.push, policy: config.tenantOutbound });
  return { service, channel: { name: 'push', sending: pushChannelSending(service, config.channels.push.ttlSeconds), offered: true }, routes: [pushRoutes(service, await loadServiceWorker(), storefrontProxies)] };
}

/** The service worker as browsers get it: its TypeScript source with the types stripped, not minified. */
export async function loadServiceWorker(): Promise<Buffer> {
  return Buffer.from(await browserScript(new URL('./service-worker.ts', import.meta.url), 'readable'));
}
