import { bigCommercePlatform } from './bigcommerce/platform.ts';
import { readSlices, sliceFields, type NamedSlices, type ServiceSettings } from './core/settings-slice.ts';
import type { Platform } from './platform.ts';
import { shopifyPlatform } from './shopify/platform.ts';
import { vendurePlatform } from './vendure/platform.ts';
import { wooCommercePlatform } from './woocommerce/platform.ts';

/**
 * Every platform Restock connects stores of: the only list. A new platform is a folder whose
 * `platform.ts` exports its `Platform` (src/platform.ts) and one line here; the settings, the
 * assembly, the operations, the store domains and the widget's product forms read this list.
 * Each entry loads its feature only when the assembly opens it, so reading the list (as
 * src/config.ts does) loads no platform's code beyond its entry, settings and declarations.
 */
const LISTED = [shopifyPlatform, wooCommercePlatform, bigCommercePlatform, vendurePlatform] as const satisfies readonly Platform[];
export const PLATFORMS: readonly Platform[] = LISTED;

type Listed = (typeof LISTED)[number];
type Configured = Extract<Listed, { settings: object }>;

/** What each platform with settings makes of them, by platform: `Config.platforms`. */
export type PlatformConfigs = { [P in Configured as P['name']]: ReturnType<P['settings']['read']> };

/** Where platforms forward their stores' storefront requests to the service (Shopify's app proxy). */
export const STOREFRONT_PROXIES: readonly string[] = PLATFORMS.flatMap((platform) => platform.storefrontProxy ?? []);

/** Store domains that tell their platform by themselves, with the platform each tells. */
export const STORE_DOMAINS: ReadonlyArray<readonly [RegExp, string]> = PLATFORMS.flatMap((platform) => (platform.storeDomains ? [[platform.storeDomains, platform.name] as const] : []));

const PLATFORM_SLICES: NamedSlices = PLATFORMS.map((platform) => [platform.name, platform.settings]);

/** Every platform's slice of the environment, in the registry's order: src/config.ts reads them with the rest. */
export const PLATFORM_SETTINGS = sliceFields(PLATFORM_SLICES);

/** Each platform's reading of its slice (`values`: the parsed environment). */
export function readPlatformSettings(values: Record<string, unknown>, service: ServiceSettings): PlatformConfigs {
  return readSlices(PLATFORM_SLICES, values, service) as PlatformConfigs;
}
