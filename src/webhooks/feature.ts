import { bindOperations } from '../core/operations.ts';
import type { FastifyBaseLogger } from 'fastify';
import type { Config } from '../config.ts';
import type { Database } from '../core/db/database.ts';
import type { ChangeBus } from '../core/changes/bus.ts';
import type { Feature } from '../core/feature.ts';
import type { MailTransport } from '../core/mail/transport.ts';
import { SecretBox } from '../core/sealed-secrets.ts';
import type { StoreService } from '../stores/service.ts';
import { CallbackRepository } from './callback-repository.ts';
import { AgentCallbacks } from './callbacks.ts';
import { webhookDeliveryJob } from './delivery.ts';
import { MessageSigner } from './message-signatures.ts';
import { signatureDirectoryRoutes } from './directory-routes.ts';
import { WebhookRepository } from './repository.ts';
import { webhookOperations } from './operations.ts';
import { WebhookService } from './service.ts';

export type { WebhookService } from './service.ts';

export interface WebhooksDeps {
  config: Config;
  database: Database;
  /** Where each process hears that a store's endpoints changed. */
  changes: ChangeBus;
  mail: MailTransport;
  log: FastifyBaseLogger;
  /** The store's owner, who is told when an endpoint is disabled. */
  stores: Pick<StoreService, 'findStore'>;
}

/** Outgoing webhooks: stores' endpoints, agents' callbacks, the event sink, the job that signs and delivers, and the key directory. */
export function buildWebhooks({ config, database, changes, mail, log, stores }: WebhooksDeps): Feature<WebhookService> {
  const repository = new WebhookRepository(database, changes);
  const secrets = SecretBox.fromKey(config.encryptionKey);
  const policy = config.tenantOutbound;
  const callbacks = new AgentCallbacks({ repository, callbacks: new CallbackRepository(database), secrets, policy });
  const service = new WebhookService({ repository, secrets, policy, callbacks });
  const signer = new MessageSigner(database, config.baseUrl);
  const tellOwner = async (shop: string, subject: string, text: string) => {
    const owner = (await stores.findStore(shop))?.owner_email;
    if (owner) await mail.send({ to: owner, subject, text, purpose: 'webhook-disabled', storeDomain: shop });
  };
  return {
    service,
    operations: bindOperations(webhookOperations, service),
    routes: [signatureDirectoryRoutes(signer, config.baseUrl)],
    jobs: [webhookDeliveryJob({ repository, secrets, policy, signer, config: config.webhooks, log, tellOwner })],
  };
}

/** `restock keys rotate --http-signatures`: a new key for the signatures on outgoing deliveries. */
export function rotateMessageSigningKey(config: Config, database: Database): Promise<string> {
  return new MessageSigner(database, config.baseUrl).rotate();
}
