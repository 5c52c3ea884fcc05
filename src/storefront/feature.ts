import type { SubscriptionService } from '../alerts/service.ts';
import type { ChangeBus } from '../core/changes/bus.ts';
import type { Feature } from '../core/feature.ts';
import { AvailabilityCache } from './availability-cache.ts';
import { STRICT_OUTBOUND, type OutboundPolicy } from '../core/net/outbound-guard.ts';
import type { InventoryService } from '../inventory/service.ts';
import type { StoreService } from '../stores/service.ts';
import { storefrontRoutes } from './routes.ts';
import { StorefrontService, type ServiceChannels } from './service.ts';
import { loadWidgetAssets } from './widget-asset.ts';

export interface StorefrontDeps {
  stores: StoreService;
  inventory: InventoryService;
  alerts: SubscriptionService;
  /** What the service can send beside e-mail (an SMS sender of its own, web push). */
  offers?: ServiceChannels;
  /** Where stock and store changes are heard: availability answers are kept between them. */
  changes?: ChangeBus;
}

export interface StorefrontRoutesDeps {
  /** The storefront's service, built once with the domain's features (Shopify's app proxy answers through it too). */
  service: StorefrontService;
  /** Which push endpoints a browser may hand over (the operator's outbound policy). */
  policy?: OutboundPolicy;
  /** Each platform's product-form script (the registry's `widgetForm`), served in /widget-platforms.js. */
  platformForms?: readonly URL[];
}

/** What the widget's calls answer, also through Shopify's app proxy (the Shopify feature's routes). */
export function storefrontService({ stores, inventory, alerts, offers, changes }: StorefrontDeps): StorefrontService {
  return new StorefrontService(stores, inventory, alerts, offers, changes ? new AvailabilityCache(changes) : undefined);
}

/** The widget's scripts and the public calls they make (minified once, at start), over the domain's storefront service. */
export async function buildStorefront({ service, policy, platformForms }: StorefrontRoutesDeps): Promise<Feature<StorefrontService>> {
  return { service, routes: [storefrontRoutes(service, await loadWidgetAssets(platformForms), policy ?? STRICT_OUTBOUND)] };
}
