import { ValidationFailed, type FieldError } from './problems.ts';

/**
 * The seed's platform-neutral ids: `gid://<platform>/Product/<numeric id>` and
 * `gid://<platform>/ProductVariant/<numeric id>`, the platform a short lowercase name (shopify,
 * woocommerce, bigcommerce, ...). A store is on one platform, and what is asked or reported for
 * it names that platform's products.
 */
export const PLATFORM_NAME = '[a-z][a-z0-9-]{0,31}';

const GID_PREFIX = 'gid://';

/** The platform an id of the shape above names (the schemas have checked the shape). */
export function platformOfId(gid: string): string {
  return gid.slice(GID_PREFIX.length, gid.indexOf('/', GID_PREFIX.length));
}

/** Product and variant ids of a request, each with its JSON pointer. */
export type PointedIds = Array<{ pointer: string; id: string | null | undefined }>;

/** A request's product and variant ids at `at` (a JSON pointer such as `/body/items/0`), for requireIdsOfPlatform. */
export function idsAt(at: string, entry: { productId: string; variantId?: string | null }): PointedIds {
  return [
    { pointer: `${at}/productId`, id: entry.productId },
    { pointer: `${at}/variantId`, id: entry.variantId },
  ];
}

/**
 * Refuses ids of another platform than the store's, each named by its pointer in the request:
 * a WooCommerce product cannot be watched or reported on a Shopify store. `platform` is
 * undefined for a store the service does not know on a domain of its own (see
 * `StoreService.requireStorePlatform`), whose ids are then taken as given.
 */
export function requireIdsOfPlatform(store: { domain: string; platform: string | undefined }, ids: PointedIds): void {
  const { domain, platform } = store;
  // A store the service does not know, on a domain of its own: nothing tells its platform.
  if (platform === undefined) return;
  const errors: FieldError[] = [];
  for (const { pointer, id } of ids) {
    if (id && platformOfId(id) !== platform) {
      errors.push({ pointer, message: `names a ${platformOfId(id)} product, but ${domain} is a ${platform} store: its ids look like gid://${platform}/…` });
    }
  }
  if (errors.length > 0) throw new ValidationFailed(errors);
}
