import { localeSchema, type EffectiveSettings } from '../stores/schemas.ts';
import { channelNamed } from '../channels.ts';
import type { StoreClaim } from './context.ts';
import { productKey } from './rules.ts';
import type { NotificationRow } from './repository.ts';
import { notificationTitle, renderNotification, stopLabel } from './templates.ts';
import type { HoldKeeper } from './holds.ts';

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
export interface NotificationLinks {
  /** Our redirect, which records the click and lands on the product page. */
  click(row: NotificationRow): string;
  /** The e-mail's one-click unsubscribe and the shopper's page. */
  mail(row: NotificationRow): { unsubscribeUrl: string; manageUrl: string };
  /** Stops alerts to the row's own contact point (phone or browser), nothing more. */
  stop(row: NotificationRow): string;
}

/** The alert as its channel carries it: an e-mail, or handed to its contact channel (a text, a browser notification). */
export function composeNotification(row: NotificationRow, claim: StoreClaim, links: NotificationLinks, quotaPeriod: string, holds?: Pick<HoldKeeper, 'holdFor'>): Outgoing {
  const common = { row, quotaPeriod, reminderDelayHours: row.kind === 'alert' ? claim.settings.reminderDelayHours : null };
  // The unit the batch planned for this shopper is held only now, once the alert may go out.
  // Only a first batch of a store that holds units can have one: every other alert is sent
  // without a lookup before it, so the sends of a group start in queue order.
  const mayHold = row.kind === 'alert' && row.batch === 1 && claim.settings.reserveUnitsMinutes > 0 && holds !== undefined;
  const held = async () => (mayHold ? holds!.holdFor(row) : undefined);
  return { ...common, deliver: row.channel === 'email' ? mailDelivery(row, claim, links, held) : contactDelivery(row, claim, links, held) };
}

type HeldUnit = () => Promise<{ checkoutUrl: string; until: string } | undefined>;

/** The mail: the store's template or locale, its sender name, one-click unsubscribe and the shopper's page. */
function mailDelivery(row: NotificationRow, claim: StoreClaim, links: NotificationLinks, held: HeldUnit): Outgoing['deliver'] {
  const product = claim.products.get(productKey(row))!;
  const { unsubscribeUrl, manageUrl } = links.mail(row);
  const locale = notificationLocale(row.locale, claim.settings.locale);
  const message = (reservedUntil: string | null) => {
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
        // The link above lands on the held unit's checkout while the hold lasts (the click redirect asks).
        reservedUntil,
      },
      { template: claim.settings.template, locale },
      row.kind,
    );
    return {
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
  };
  return async () => {
    const unit = await held();
    await claim.transport.send(message(unit ? reservedTime(unit.until, locale, claim.settings.timeZone) : null));
    return {};
  };
}

/** When the hold ends, in the alert's language and the store's time zone, with the zone named. */
export function reservedTime(until: string, locale: EffectiveSettings['locale'], timeZone: string): string {
  return new Intl.DateTimeFormat(locale, { day: 'numeric', month: 'long', hour: '2-digit', minute: '2-digit', hourCycle: 'h23', timeZone, timeZoneName: 'short' }).format(new Date(until));
}

/**
 * A phone's or a browser's alert, handed to its channel with the words and links it may carry:
 * the product, our redirect, and the way to stop that contact point alone (a link is a
 * capability, and a phone or browser proves only itself).
 */
function contactDelivery(row: NotificationRow, claim: StoreClaim, links: NotificationLinks, held: HeldUnit): Outgoing['deliver'] {
  const contact = row.contact_point_id ? claim.contacts.get(row.contact_point_id) : undefined;
  const sending = contact ? claim.sending.get(contact.channel) : undefined;
  const product = claim.products.get(productKey(row))!;
  const locale = notificationLocale(row.locale, claim.settings.locale);
  return async () => {
    // The rules checked the channel before the plan was charged; a change in between fails the send, which is retried.
    if (!contact || !sending || contact.channel !== row.channel) throw new Error(`${channelNamed(row.channel).words}: no longer set up for this store or contact point`);
    // A shopper reached by phone or browser alone still gets the held unit: the link lands on its checkout.
    await held();
    return sending.deliver({
      id: row.id,
      restockId: row.restock_id,
      storeDomain: claim.storeDomain,
      kind: row.kind,
      locale,
      sender: claim.settings.senderName ?? claim.storeDomain,
      product: { title: product.title, variantTitle: product.variantTitle, imageUrl: product.imageUrl },
      headline: notificationTitle({ shop: claim.storeDomain, productTitle: product.title, variantTitle: product.variantTitle }, locale, row.kind),
      clickUrl: links.click(row),
      stop: { url: links.stop(row), label: stopLabel(locale) },
      contact: { address: contact.address, details: contact.details },
    });
  };
}

/** The shopper's language when they subscribed in one we write alerts in, else the store's. */
function notificationLocale(shopper: string | null, store: EffectiveSettings['locale']): EffectiveSettings['locale'] {
  const parsed = localeSchema.safeParse(shopper);
  return parsed.success ? parsed.data : store;
}
