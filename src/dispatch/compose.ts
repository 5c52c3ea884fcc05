import { localeSchema, type EffectiveSettings } from '../stores/schemas.ts';
import { channelNamed } from '../channels.ts';
import type { StoreClaim } from './context.ts';
import { productKey } from './rules.ts';
import type { ClaimedNotification } from './repository.ts';
import { notificationRenderer, notificationTitle, stopLabel, type NotificationRenderer } from './templates.ts';
import type { HoldKeeper } from './holds.ts';

/** A leased alert, checked, counted against the plan and written: ready to go by its channel. */
export interface Outgoing {
  row: ClaimedNotification;
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
  click(row: ClaimedNotification): string;
  /** The e-mail's one-click unsubscribe and the shopper's page. */
  mail(row: ClaimedNotification): { unsubscribeUrl: string; manageUrl: string };
  /** Stops alerts to the row's own contact point (phone or browser), nothing more. */
  stop(row: ClaimedNotification): string;
}

/**
 * The alert as its channel carries it: an e-mail, or handed to its contact channel (a text, a
 * browser notification). Nothing is written yet: a claim's alerts wait for the transport for
 * hundreds of sends, so what is made for one (its links, its words) is made as it goes out and
 * dropped once answered, instead of being kept, long enough to reach the old generation of the
 * heap, for every alert of the claim.
 */
export function composeNotification(row: ClaimedNotification, claim: StoreClaim, links: NotificationLinks, quotaPeriod: string, holds?: Pick<HoldKeeper, 'holdFor'>): Outgoing {
  return new ComposedAlert(row, claim, links, quotaPeriod, holds);
}

class ComposedAlert implements Outgoing {
  readonly reminderDelayHours: number | null;

  constructor(
    readonly row: ClaimedNotification,
    private readonly claim: StoreClaim,
    private readonly links: NotificationLinks,
    readonly quotaPeriod: string,
    private readonly holds: Pick<HoldKeeper, 'holdFor'> | undefined,
  ) {
    this.reminderDelayHours = row.kind === 'alert' ? claim.settings.reminderDelayHours : null;
  }

  deliver(): Promise<{ providerRef?: string }> {
    return this.row.channel === 'email' ? this.mail() : this.contact();
  }

  /**
   * The unit the batch planned for this shopper is held only now, once the alert may go out.
   * Only a first batch of a store that holds units can have one: every other alert is sent
   * without a lookup before it, so the sends of a group start in queue order.
   */
  private async held(): Promise<{ checkoutUrl: string; until: string } | undefined> {
    const { row, claim, holds } = this;
    const mayHold = row.kind === 'alert' && row.batch === 1 && claim.settings.reserveUnitsMinutes > 0 && holds !== undefined;
    return mayHold ? holds.holdFor(row) : undefined;
  }

  /** The mail: the store's template or locale, its sender name, one-click unsubscribe and the shopper's page. */
  private async mail(): Promise<{ providerRef?: string }> {
    const { row, claim, links } = this;
    const unit = await this.held();
    const locale = localeOf(claim, row.locale);
    // The link lands on the held unit's checkout while the hold lasts (the click redirect asks).
    const reservedUntil = unit ? reservedTime(unit.until, locale, claim.settings.timeZone) : null;
    const { unsubscribeUrl, manageUrl } = links.mail(row);
    const content = rendererOf(claim, row, locale, Boolean(reservedUntil))({
      // Our redirect, which records the click and lands on the product page with the store's UTM parameters.
      productUrl: links.click(row),
      unsubscribeUrl,
      manageUrl,
      email: row.email,
      reservedUntil,
    });
    await claim.transport.send({
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
    });
    return {};
  }

  /**
   * A phone's or a browser's alert, handed to its channel with the words and links it may carry:
   * the product, our redirect, and the way to stop that contact point alone (a link is a
   * capability, and a phone or browser proves only itself).
   */
  private async contact(): Promise<{ providerRef?: string }> {
    const { row, claim, links } = this;
    const contact = row.contact_point_id ? claim.contacts.get(row.contact_point_id) : undefined;
    const sending = contact ? claim.sending.get(contact.channel) : undefined;
    // The rules checked the channel before the plan was charged; a change in between fails the send, which is retried.
    if (!contact || !sending || contact.channel !== row.channel) throw new Error(`${channelNamed(row.channel).words}: no longer set up for this store or contact point`);
    const product = claim.products.get(productKey(row))!;
    const locale = localeOf(claim, row.locale);
    // A shopper reached by phone or browser alone still gets the held unit: the link lands on its checkout.
    await this.held();
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
  }
}

/** When the hold ends, in the alert's language and the store's time zone, with the zone named. */
export function reservedTime(until: string, locale: EffectiveSettings['locale'], timeZone: string): string {
  return new Intl.DateTimeFormat(locale, { day: 'numeric', month: 'long', hour: '2-digit', minute: '2-digit', hourCycle: 'h23', timeZone, timeZoneName: 'short' }).format(new Date(until));
}

/**
 * What one claim has compiled for its messages: each product's template per language, kind and
 * hold, and each shopper language's alert language. A claim's alerts are mostly one restock in
 * one language, so its hundreds of messages share a handful of compiled templates; the cache
 * goes with the claim, so a store's changed template applies from its next claim on.
 */
interface ClaimCache {
  renderers: Map<string, NotificationRenderer>;
  locales: Map<string | null, EffectiveSettings['locale']>;
}

const claimCaches = new WeakMap<StoreClaim, ClaimCache>();

function cacheOf(claim: StoreClaim): ClaimCache {
  let cache = claimCaches.get(claim);
  if (!cache) claimCaches.set(claim, (cache = { renderers: new Map(), locales: new Map() }));
  return cache;
}

function rendererOf(claim: StoreClaim, row: ClaimedNotification, locale: EffectiveSettings['locale'], reserved: boolean): NotificationRenderer {
  const { renderers } = cacheOf(claim);
  const key = `${productKey(row)}\n${row.kind}\n${locale}\n${reserved ? 1 : 0}`;
  let renderer = renderers.get(key);
  if (!renderer) {
    const product = claim.products.get(productKey(row))!;
    renderer = notificationRenderer(
      { shop: claim.storeDomain, productTitle: product.title, variantTitle: product.variantTitle, imageUrl: product.imageUrl },
      { template: claim.settings.template, locale },
      row.kind,
      reserved,
    );
    renderers.set(key, renderer);
  }
  return renderer;
}

/** The shopper's language when they subscribed in one we write alerts in, else the store's. */
function localeOf(claim: StoreClaim, shopper: string | null): EffectiveSettings['locale'] {
  const { locales } = cacheOf(claim);
  let locale = locales.get(shopper);
  if (locale === undefined) {
    const parsed = localeSchema.safeParse(shopper);
    locale = parsed.success ? parsed.data : claim.settings.locale;
    locales.set(shopper, locale);
  }
  return locale;
}
