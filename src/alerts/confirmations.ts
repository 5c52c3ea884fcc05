import type { FastifyBaseLogger } from 'fastify';
import { html } from '../core/html.ts';
import type { MailTransport } from '../core/mail/transport.ts';
import { PENDING_CHANNELS, type ContactChannel } from '../channels.ts';
import type { WorkerJob } from '../core/jobs.ts';
import { localeSchema } from '../stores/schemas.ts';
import { CONFIRMATION_STRINGS } from './consent.ts';
import type { ContactPointRow } from './contact-points.ts';
import type { SubscriptionRow } from './repository.ts';
import type { SubscriptionService } from './service.ts';

/** Requests sent per turn, so one flood of signups never starves the worker's other work. */
const REQUESTS_PER_TURN = 100;

export interface ConfirmationDeps {
  alerts: SubscriptionService;
  mail: MailTransport;
  log: FastifyBaseLogger;
  expiryHours: number;
  /** The product's title, for the mail (the inventory feature). */
  titleOf(storeDomain: string, productId: string, variantId: string | null): Promise<string | undefined>;
  /** The store's language, when the shopper's is unknown. */
  localeOf(storeDomain: string): Promise<string>;
  /** Each channel's confirmation request to a pending contact point (SMS: the "reply YES" text), by channel; a channel without one is never asked. */
  confirmations: Partial<Record<ContactChannel, (point: ContactPointRow) => Promise<void>>>;
}

/**
 * Double opt-in's worker side: mails each pending subscription its confirmation link once (from
 * the ledger of pending rows, so a request accepted is never lost to a failed send: it is tried
 * again next turn), and expires what stays unconfirmed.
 */
export function confirmationJobs(deps: ConfirmationDeps): WorkerJob[] {
  return [
    { name: 'subscription-confirmations', run: () => sendConfirmationRequests(deps) },
    ...PENDING_CHANNELS.map((channel) => ({ name: `${channel}-confirmations`, run: () => sendContactPointConfirmationRequests(deps, channel) })),
    { name: 'expire-unconfirmed', everyMs: 60_000, run: (now) => deps.alerts.expireUnconfirmed(deps.expiryHours, now) },
  ];
}

async function sendConfirmationRequests(deps: ConfirmationDeps): Promise<number> {
  let sent = 0;
  for (const row of await deps.alerts.awaitingConfirmationRequest(REQUESTS_PER_TURN)) {
    try {
      await deps.mail.send(await confirmationMail(deps, row));
      await deps.alerts.markConfirmationSent(row.id);
      sent++;
    } catch (err) {
      deps.log.warn({ err, subscription: row.id }, 'a confirmation request could not be sent; it is tried again');
      break;
    }
  }
  return sent;
}

async function sendContactPointConfirmationRequests(deps: ConfirmationDeps, channel: ContactChannel): Promise<number> {
  const ask = deps.confirmations[channel];
  if (!ask) return 0;
  let sent = 0;
  for (const point of await deps.alerts.contactPointsAwaitingConfirmationRequest(channel, REQUESTS_PER_TURN)) {
    try {
      await ask(point);
      sent++;
    } catch (err) {
      deps.log.warn({ err, contactPoint: point.id, channel }, 'a confirmation request could not be sent');
    }
    // Once, whatever came of it: a number that cannot be texted is not retried every turn; it expires unconfirmed.
    await deps.alerts.markContactPointConfirmationSent(point.id);
  }
  return sent;
}

async function confirmationMail(deps: ConfirmationDeps, row: SubscriptionRow) {
  const shop = row.store_domain ?? 'the store';
  const parsed = localeSchema.safeParse(row.locale ?? (row.store_domain ? await deps.localeOf(row.store_domain) : 'en'));
  const words = CONFIRMATION_STRINGS[parsed.success ? parsed.data : 'en'];
  const product = (row.store_domain && (await deps.titleOf(row.store_domain, row.product_id, row.variant_id))) || row.product_id;
  const confirmUrl = deps.alerts.confirmUrl(row.id);
  const pageUrl = deps.alerts.shopperPageUrl(row.id);
  return {
    to: row.email,
    subject: words.subject(shop),
    text: `${words.intro(shop, product)}\n\n${confirmUrl}\n\n${words.ignore}\n\n${words.manage} ${pageUrl}\n`,
    html: String(html`<p>${words.intro(shop, product)}</p><p><a href="${confirmUrl}">${confirmUrl}</a></p><p>${words.ignore}</p><p>${words.manage} <a href="${pageUrl}">${pageUrl}</a></p>`),
    purpose: 'subscription-confirmation',
    ...(row.store_domain ? { storeDomain: row.store_domain } : {}),
  };
}
