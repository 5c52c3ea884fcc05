import { bindOperations } from '../core/operations.ts';
import type { FastifyBaseLogger } from 'fastify';
import type { SubscriptionService } from '../alerts/service.ts';
import type { Config } from '../config.ts';
import type { ChangeBus } from '../core/changes/bus.ts';
import type { Database } from '../core/db/database.ts';
import type { EventSink } from '../core/events.ts';
import type { Feature } from '../core/feature.ts';
import { MailOutboxRepository } from '../core/mail/outbox-repository.ts';
import type { MailTransport } from '../core/mail/transport.ts';
import type { Metrics } from '../core/metrics.ts';
import type { InventoryService } from '../inventory/service.ts';
import type { StoreService } from '../stores/service.ts';
import type { ChannelSending } from '../core/channels.ts';
import type { ContactChannel } from '../channels.ts';
import type { WorkerJob } from '../core/jobs.ts';
import { dispatchOperations } from './operations.ts';
import { QueueReadings } from './queue-readings.ts';
import { NotificationSenders } from './senders.ts';
import { DispatchService } from './service.ts';
import { DispatchRepository } from './repository.ts';
import { HoldKeeper, releaseExpiredHoldsJob, UnitHoldRepository, type UnitHolds } from './holds.ts';
import { DispatchWorker, type NotificationFollowUp, type NotificationQuota } from './worker.ts';

export type { QueueReadings } from './queue-readings.ts';

export interface DispatchDeps {
  database: Database;
  alerts: SubscriptionService;
  /** Announces each new restock to the workers of other processes. */
  changes?: ChangeBus;
}

/**
 * Restocks, the notification ledger and suppressions. Built before the features that report
 * restocks (inventory) and that hand it background work, so its worker is built apart, last.
 */
export function buildDispatch({ database, alerts, changes }: DispatchDeps): Feature<DispatchService> & { store: DispatchRepository; holds: UnitHoldRepository } {
  const store = new DispatchRepository(database);
  const holds = new UnitHoldRepository(database);
  const service = new DispatchService(store, { waiting: alerts, outbox: new MailOutboxRepository(database), holds, ...(changes ? { changes } : {}) });
  return { service, store, holds, operations: bindOperations(dispatchOperations, service) };
}

/** The send queue's size, for metrics read when scraped. */
export function queueReadings(database: Database): QueueReadings {
  return new QueueReadings(database);
}

export interface WorkerDeps {
  config: Config;
  log: FastifyBaseLogger;
  /** Where alerts planned and settled are counted. */
  metrics?: Metrics;
  mail: MailTransport;
  dispatch: ReturnType<typeof buildDispatch>;
  alerts: SubscriptionService;
  inventory: InventoryService;
  stores: StoreService;
  /** The plan allowance (the billing feature). */
  quota: NotificationQuota;
  /** Alert links and purchases since an alert (the conversions feature). */
  followUp: NotificationFollowUp;
  events: EventSink;
  /** Every other feature's background work. */
  jobs: WorkerJob[];
  /** Each contact channel's sending, by the channel's name (the SMS and push features'). */
  channels: Partial<Record<ContactChannel, ChannelSending>>;
  /** Each platform's way to hold a unit for a shopper, by the platform's name, where it has one. */
  unitHolds?: Readonly<Record<string, UnitHolds>>;
}

/** The dispatch worker with the stores' own mail transports; `close` stops it after the alerts in flight. */
export function buildDispatchWorker(deps: WorkerDeps): Feature<DispatchWorker> {
  const senders = new NotificationSenders(deps.mail, deps.config.mailFrom, deps.config.dispatch.smtpPoolSize, deps.config.tenantOutbound);
  const unitHolds = deps.unitHolds ?? {};
  const worker = new DispatchWorker({
    holds: new HoldKeeper(deps.dispatch.holds, unitHolds, deps.log),
    quota: deps.quota,
    followUp: deps.followUp,
    events: deps.events,
    store: deps.dispatch.store,
    dispatch: deps.dispatch.service,
    alerts: deps.alerts,
    inventory: deps.inventory,
    stores: deps.stores,
    senders,
    config: deps.config.dispatch,
    log: deps.log,
    ...(deps.metrics ? { metrics: deps.metrics } : {}),
    jobs: [...deps.jobs, releaseExpiredHoldsJob(deps.dispatch.holds, unitHolds, deps.log)],
    channels: deps.channels,
  });
  return {
    service: worker,
    async close() {
      await worker.stop();
      await senders.close();
    },
  };
}
