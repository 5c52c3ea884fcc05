import type { Config } from '../config.ts';
import type { Database } from '../core/db/database.ts';
import type { EventSink } from '../core/events.ts';
import type { Feature } from '../core/feature.ts';
import type { MailTransport } from '../core/mail/transport.ts';
import { NoticeRepository } from './repository.ts';
import { NoticeService, type DigestFiguresSource, type NoticeAlerts, type NoticeStores, type NoticeTiming, type ProductTitles } from './service.ts';

export type { DigestFigures, DigestFiguresSource, ProductTitles } from './service.ts';
export type { NoticeService } from './service.ts';

/** A round over the stores with a threshold at most every minute; the digest's due dates are checked hourly. */
export const DEFAULT_NOTICE_TIMING: NoticeTiming = { waitlistEveryMs: 60_000, digestCheckEveryMs: 3_600_000, storesPerRun: 100 };

export interface NoticesDeps {
  config: Config;
  database: Database;
  mail: MailTransport;
  stores: NoticeStores;
  alerts: NoticeAlerts;
  /** Where `waitlist.threshold` events go (the outgoing webhooks). */
  events: EventSink;
  /** The store's figures for the weekly digest (the conversions feature reports them). */
  figures: DigestFiguresSource;
  /** Names products in notices when known (the inventory feature's `describeProduct`). */
  titles?: ProductTitles;
  /** Overrides of DEFAULT_NOTICE_TIMING (the settings NOTICES_INTERVAL_MS and friends). */
  timing?: Partial<NoticeTiming>;
}

/** Owner notices: the waitlist threshold (mail and event, once per crossing) and the weekly digest, as two worker jobs. */
export function buildNotices({ config, database, mail, stores, alerts, events, figures, titles, timing }: NoticesDeps): Feature<NoticeService> {
  const service = new NoticeService({
    repository: new NoticeRepository(database),
    stores,
    alerts,
    events,
    mail,
    figures,
    ...(titles ? { titles } : {}),
    baseUrl: config.baseUrl,
    timing: { ...DEFAULT_NOTICE_TIMING, ...timing },
  });
  // The jobs pace themselves (a round at most every so often, a page of stores per run), so they run every turn.
  return {
    service,
    jobs: [
      { name: 'waitlist-thresholds', run: () => service.noticeWaitlists() },
      { name: 'weekly-digests', run: () => service.sendDigests() },
    ],
  };
}
