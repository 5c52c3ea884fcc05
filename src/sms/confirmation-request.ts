import type { PendingContactPoint } from '../core/channels.ts';
import type { SubscriptionService } from '../alerts/service.ts';
import type { InventoryService } from '../inventory/service.ts';
import type { StoreService } from '../stores/service.ts';
import { localeSchema } from '../stores/schemas.ts';
import type { SmsService } from './service.ts';
import { composeConfirmationText } from './text.ts';

/**
 * The "reply YES" text a new SMS number gets (SMS is always double opt-in), from the store's
 * sender, in the shopper's language. A store with no sender (its own or the service's) cannot
 * text: the number stays pending and expires.
 */
export function confirmationTexter(deps: { sms: SmsService; stores: Pick<StoreService, 'sendingProfile'>; inventory: Pick<InventoryService, 'describeProduct'>; alerts: Pick<SubscriptionService, 'subscriptionForWork'> }) {
  return async (point: PendingContactPoint): Promise<void> => {
    if (!point.store_domain) return;
    const { settings, smsAccount } = await deps.stores.sendingProfile(point.store_domain);
    const account = deps.sms.accountFor(smsAccount);
    if (!account) throw new Error(`${point.store_domain} has no SMS sender`);
    const subscription = await deps.alerts.subscriptionForWork(point.subscription_id);
    const product = subscription ? await deps.inventory.describeProduct(point.store_domain, subscription.product_id, subscription.variant_id) : undefined;
    const locale = localeSchema.safeParse(subscription?.locale);
    const text = composeConfirmationText({ shop: settings.senderName ?? point.store_domain, productTitle: product?.productTitle ?? null, locale: locale.success ? locale.data : settings.locale });
    await deps.sms.requestConfirmation(account, point.address, text);
  };
}
