import { deliveryRoute } from '../core/connectors/delivery-route.ts';
import { storeInput } from '../stores/schemas.ts';
import type { VendureService } from './service.ts';

/** An order of a thousand lines fits well within this. */
export const DELIVERY_BODY_LIMIT = 512 * 1024;

/** `POST /webhooks/vendure/{store}`: the Restock plugin's deliveries; a 503 makes it try again. */
export function deliveryRoutes(service: VendureService, baseUrl: string) {
  return deliveryRoute({
    path: '/webhooks/vendure',
    bodyLimit: DELIVERY_BODY_LIMIT,
    baseUrl,
    sender: 'The Restock plugin',
    params: storeInput,
    receive: (shop, headers, raw) => service.receiveDelivery(shop, headers, raw),
  });
}
