import { localeSchema, type EffectiveSettings } from '../stores/settings.ts';
import type { PushChannel, SmsSending } from './channels.ts';
import type { StoreClaim } from './context.ts';
import { productKey } from './rules.ts';
import type { NotificationRow } from './repository.ts';
import { notificationTitle, renderNotification, stopLabel } from './templates.ts';

/** A leased alert, checked, counted against the plan and written: ready to go by its channel. */
export interface Outgoing {
  row: NotificationRow;
  /** Hands the message to its channel; resolves once accepted, with the provider's id of it (SMS). */
  deliver(): Promise<{ providerRef?: string }>;
  /** The billing period whose allowance this alert was counted against. */
  quotaPeriod: string;
  /** The store's reminder delay when this alert was composed (null: no reminder). */
  reminderDelayHours: number | null;
}

/**
 * The links an alert carries, made by the features that answer them, each asked for only by the
 * channel allowed to carry it. A link is a capability, and a message may carry only what its own
 * channel proved: a mail to the address proves the e-mail, so the e-mail's unsubscribe and the
 * shopper's page (every alert of the address at the store) go by mail only. A phone or browser
 * added by a sign-up proves only itself: its alerts carry the product and its own way to stop.
 */
export interface AlertLinks {
  /** Our redirect, which records the click and lands on the product page. */
  click(row: NotificationRow): string;
  /** The e-mail's one-click unsubscribe and the shopper's page. */
  mail(row: NotificationRow): { unsubscribeUrl: string; manageUrl: string };
  /** Stops alerts to the row's own contact point (phone or browser), nothing more. */
  stop(row: NotificationRow): string;
}

export interface Channels {
  sms: SmsSending | undefined;
  push: PushChannel | undefined;
  pushTtlSeconds: number;
}

/** The alert as its channel carries it: an e-mail, a text or a browser notification. */
export function composeAlert(row: NotificationRow, claim: StoreClaim, links: AlertLinks, quotaPeriod: string, channels: Channels): Outgoing {
  const common = { row, quotaPeriod, reminderDelayHours: row.kind === 'alert' ? claim.settings.reminderDelayHours : null };
  switch (row.channel) {
    case 'sms':
      return { ...common, deliver: smsDelivery(row, claim, links, channels.sms) };
    case 'push':
      return { ...common, deliver: pushDelivery(row, claim, links, channels) };
    default:
      return { ...common, deliver: mailDelivery(row, claim, links) };
  }
}

/** The mail: the store's template or locale, its sender name, one-click unsubscribe and the shopper's page. */
function mailDelivery(row: NotificationRow, claim: StoreClaim, links: AlertLinks): Outgoing['deliver'] {
  const product = claim.products.get(productKey(row))!;
  const { unsubscribeUrl, manageUrl } = links.mail(row);
  const content = renderNotification(
    {
      shop: claim.storeDomain,
      productTitle: product.title,
      variantTitle: product.variantTitle,
      // Our redirect, which records the click and lands on the product page with the store's UTM parameters.
      productUrl: links.click(row),
      imageUrl: product.imageUrl,
      unsubscribeUrl,
      manageUrl,
      email: row.email,
    },
    { template: claim.settings.template, locale: alertLocale(row.locale, claim.settings.locale) },
    row.kind,
  );
  const message = {
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
  };
  return async () => {
    await claim.transport.send(message);
    return {};
  };
}

/** One segment where the language allows: the product, our short redirect, and how to stop. */
function smsDelivery(row: NotificationRow, claim: StoreClaim, links: AlertLinks, sms: SmsSending | undefined): Outgoing['deliver'] {
  const contact = row.contact_point_id ? claim.contacts.get(row.contact_point_id) : undefined;
  const product = claim.products.get(productKey(row))!;
  return async () => {
    // The rules checked both before the plan was charged; a change in between fails the send, which is retried.
    if (!sms || !claim.smsAccount || !contact) throw new Error('SMS is no longer set up for this store or number');
    const body = sms.alertText({
      shop: claim.settings.senderName ?? claim.storeDomain,
      productTitle: product.title,
      variantTitle: product.variantTitle,
      link: links.click(row),
      locale: alertLocale(row.locale, claim.settings.locale),
      kind: row.kind,
    });
    const { providerRef } = await sms.send(claim.smsAccount, { to: contact.address, body, statusCallback: sms.statusCallbackUrl(claim.storeDomain, claim.ownSmsAccount, row.id) });
    return { providerRef };
  };
}

/** A notification in the shopper's browser that opens the product through our redirect, and can stop that browser's alerts. */
function pushDelivery(row: NotificationRow, claim: StoreClaim, links: AlertLinks, channels: Channels): Outgoing['deliver'] {
  const contact = row.contact_point_id ? claim.contacts.get(row.contact_point_id) : undefined;
  const product = claim.products.get(productKey(row))!;
  const locale = alertLocale(row.locale, claim.settings.locale);
  return async () => {
    if (!channels.push || contact?.channel !== 'push') throw new Error('browser push is no longer set up for this browser');
    const clickUrl = links.click(row);
    const stopUrl = links.stop(row);
    await channels.push.send({
      endpoint: contact.address,
      keys: contact.details,
      payload: { title: notificationTitle({ shop: claim.storeDomain, productTitle: product.title, variantTitle: product.variantTitle }, locale, row.kind), body: claim.settings.senderName ?? claim.storeDomain, url: clickUrl, icon: product.imageUrl, tag: `restock-${row.restock_id}`, stop: { url: stopUrl, label: stopLabel(locale) } },
      ttlSeconds: channels.pushTtlSeconds,
    });
    return {};
  };
}

/** The shopper's language when they subscribed in one we write alerts in, else the store's. */
function alertLocale(shopper: string | null, store: EffectiveSettings['locale']): EffectiveSettings['locale'] {
  const parsed = localeSchema.safeParse(shopper);
  return parsed.success ? parsed.data : store;
}
