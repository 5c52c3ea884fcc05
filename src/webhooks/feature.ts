import { bindOperations } from '../core/operations.ts';
import type { FastifyBaseLogger } from 'fastify';
import type { Config } from '../config.ts';
import type { Database } from '../core/db/database.ts';
import type { Feature } from '../core/feature.ts';
import type { MailTransport } from '../core/mail/transport.ts';
import { SecretBox } from '../core/sealed-secrets.ts';
import type { StoreService } from '../stores/service.ts';
import { webhookDeliveryJob } from './delivery.ts';
import { WebhookRepository } from './repository.ts';
import { webhookOperations } from './operations.ts';
import { WebhookService } from './service.ts';

export type { WebhookService } from './service.ts';

export interface WebhooksDeps {
  config: Config;
  database: Database;
  mail: MailTransport;
  log: FastifyBaseLogger;
  /** The store's owner, who is told when an endpoint is disabled. */
  stores: Pick<StoreService, 'findStore'>;
}

/** Outgoing webhooks: stores' endpoints, the event sink, and the job that signs and delivers. */
export function buildWebhooks({ config, database, mail, log, stores }: WebhooksDeps): Feature<WebhookService> {
  const repository = new WebhookRepository(database);
  const secrets = SecretBox.fromKey(config.encryptionKey);
  const policy = config.tenantOutbound;
  const service = new WebhookService({ repository, secrets, policy });
  const tellOwner = async (shop: string, subject: string, text: string) => {
    const owner = (await stores.findStore(shop))?.owner_email;
    if (owner) await mail.send({ to: owner, subject, text, purpose: 'webhook-disabled', storeDomain: shop });
  };
  return {
    service,
    operations: bindOperations(webhookOperations, service),
    jobs: [webhookDeliveryJob({ repository, secrets, policy, config: config.webhooks, log, tellOwner })],
  };
}
