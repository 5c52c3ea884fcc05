import type { FastifyBaseLogger } from 'fastify';
import type { Config } from '../config.ts';
import type { ChangeBus } from '../core/changes/bus.ts';
import type { Database } from '../core/db/database.ts';
import type { Feature } from '../core/feature.ts';
import { bindOperations } from '../core/operations.ts';
import { SecretBox } from '../core/sealed-secrets.ts';
import { KlaviyoApi } from './api.ts';
import { klaviyoDeliveryJob } from './delivery.ts';
import { klaviyoOperations } from './operations.ts';
import { KlaviyoRepository } from './repository.ts';
import { KlaviyoService } from './service.ts';

export type { KlaviyoService } from './service.ts';

export interface KlaviyoDeps {
  config: Config;
  database: Database;
  /** Where each process hears that a store's connection changed. */
  changes: ChangeBus;
  log: FastifyBaseLogger;
}

/** Klaviyo: a store's connection, the sink of its events, and the job that sends them. */
export function buildKlaviyo({ config, database, changes, log }: KlaviyoDeps): Feature<KlaviyoService> {
  const repository = new KlaviyoRepository(database, changes);
  const secrets = SecretBox.fromKey(config.encryptionKey);
  const api = new KlaviyoApi(config.klaviyo.apiUrl, config.tenantOutbound);
  const service = new KlaviyoService({ repository, secrets, api });
  return {
    service,
    operations: bindOperations(klaviyoOperations, service),
    jobs: [klaviyoDeliveryJob({ repository, secrets, api, log })],
  };
}
