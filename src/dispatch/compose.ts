import type { MailTransport } from '../core/mail/transport.ts';
import { localeSchema, type EffectiveSettings } from '../stores/settings.ts';
import type { StoreClaim } from './context.ts';
import { productKey } from './rules.ts';
import type { NotificationRow } from './repository.ts';
import { renderNotification } from './templates.ts';

/** A leased alert, checked, counted against the plan and written: ready for the transport. */
export interface Outgoing {
  row: NotificationRow;
  transport: MailTransport;
  message: Parameters<MailTransport['send']>[0];
  /** The billing period whose allowance this alert was counted against. */
  quotaPeriod: string;
  /** The store's reminder delay when this alert was composed (null: no reminder). */
  reminderDelayHours: number | null;
}

/** The alert's mail: the store's template or locale, its sender name, and one-click unsubscribe. */
export function composeAlert(row: NotificationRow, claim: StoreClaim, links: { unsubscribeUrl: string; clickUrl: string }, quotaPeriod: string): Outgoing {
  const product = claim.products.get(productKey(row))!;
  const { unsubscribeUrl } = links;
  const content = renderNotification(
    {
      shop: claim.storeDomain,
      productTitle: product.title,
      variantTitle: product.variantTitle,
      // Our redirect, which records the click and lands on the product page with the store's UTM parameters.
      productUrl: links.clickUrl,
      imageUrl: product.imageUrl,
      unsubscribeUrl,
      email: row.email,
    },
    { template: claim.settings.template, locale: alertLocale(row.locale, claim.settings.locale) },
    row.kind,
  );
  return {
    row,
    transport: claim.transport,
    quotaPeriod,
    reminderDelayHours: row.kind === 'alert' ? claim.settings.reminderDelayHours : null,
    message: {
      to: row.email,
      ...content,
      ...(claim.from && { from: claim.from }),
      // RFC 8058: mail clients offer one-click unsubscribe, POSTing to the link without cookies.
      headers: {
        'List-Unsubscribe': `<${unsubscribeUrl}>`,
        'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click',
        'X-Restock-Alert': row.id,
      },
      purpose: 'restock-alert',
      storeDomain: claim.storeDomain,
    },
  };
}

/** The shopper's language when they subscribed in one we write alerts in, else the store's. */
function alertLocale(shopper: string | null, store: EffectiveSettings['locale']): EffectiveSettings['locale'] {
  const parsed = localeSchema.safeParse(shopper);
  return parsed.success ? parsed.data : store;
}
