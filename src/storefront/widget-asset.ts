import { createHash } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import { STOREFRONT_OFFERS } from '../channels.ts';
import { browserScript } from '../core/browser-scripts.ts';

export interface WidgetAsset {
  /** Minified script. */
  body: Buffer;
  gzipped: Buffer;
  /** Strong tags, one per representation (the two are served from one URL, by Accept-Encoding). */
  etag: string;
  gzippedEtag: string;
}

/**
 * The storefront's scripts shipped in the Shopify theme app extension too, each a readable
 * TypeScript source in src/storefront served minified at `/{file}` (see `widgetSource`): the
 * widget, and the choices of the channels offered beside e-mail, which the widget loads from
 * beside itself only when the service offers one.
 */
export const WIDGET_FILES = ['widget.js', 'widget-channels.js'] as const;
export type WidgetFile = (typeof WIDGET_FILES)[number];

/**
 * Every storefront script the service serves: those above, and the product forms of the platforms
 * that have one (`widgetForm` in the platform registry), which the pasted tag loads from beside
 * itself only on those platforms. Shopify's theme block never needs it, so the extension does not
 * ship it.
 */
export const SERVED_WIDGET_FILES = [...WIDGET_FILES, 'widget-platforms.js'] as const;
export type ServedWidgetFile = (typeof SERVED_WIDGET_FILES)[number];

/**
 * The same minified scripts shipped in the theme app extension, which Shopify serves to stores
 * from its CDN. The widget finds the channels script by its name beside its own
 * (restock-widget.js → restock-channels.js). Written by `node --import tsx bin/build-theme-extension.ts`;
 * a test fails when one differs from what `loadWidgetAsset` makes.
 */
export const THEME_EXTENSION_ASSETS: Record<WidgetFile, URL> = {
  'widget.js': new URL('../../extensions/restock-notify/assets/restock-widget.js', import.meta.url),
  'widget-channels.js': new URL('../../extensions/restock-notify/assets/restock-channels.js', import.meta.url),
};

/** The source a served script is made from: `/widget.js` from src/storefront/widget.ts, and so on. */
export function widgetSource(file: ServedWidgetFile): URL {
  return new URL(`./${file.replace(/\.js$/, '.ts')}`, import.meta.url);
}

/**
 * A storefront script, minified once at start-up: the readable source is what we keep in the
 * repository, the small one is what every product page downloads. Each source is transformed on
 * its own, not bundled: what one imports from another is types only, which esbuild drops.
 * `/widget-channels.js` is its own source followed by the choice of each channel the storefront
 * offers (read from the channel registry, which loads no feature); `/widget-platforms.js` is its
 * own source followed by each platform's form (`platformForms`, handed in by the assembly, since
 * only the assembly may load the platform registry).
 */
export async function loadWidgetAsset(file: ServedWidgetFile = 'widget.js', platformForms: readonly URL[] = []): Promise<WidgetAsset> {
  const sources = [widgetSource(file), ...appendedTo(file, platformForms)];
  const parts = await Promise.all(sources.map((source) => browserScript(source, 'minified')));
  const body = Buffer.from(parts.join(''));
  const tag = createHash('sha256').update(body).digest('base64url').slice(0, 27);
  return { body, gzipped: gzipSync(body, { level: 9 }), etag: `"${tag}"`, gzippedEtag: `"${tag}-gz"` };
}

/** The scripts served after a file's own source, in their registry's order. */
export function appendedTo(file: ServedWidgetFile, platformForms: readonly URL[]): readonly URL[] {
  if (file === 'widget-channels.js') return STOREFRONT_OFFERS.map(([, offer]) => offer.choice);
  return file === 'widget-platforms.js' ? platformForms : [];
}

/** Every storefront script the service serves, by file name. */
export async function loadWidgetAssets(platformForms: readonly URL[] = []): Promise<Record<ServedWidgetFile, WidgetAsset>> {
  const entries = await Promise.all(SERVED_WIDGET_FILES.map(async (file) => [file, await loadWidgetAsset(file, platformForms)] as const));
  return Object.fromEntries(entries) as Record<ServedWidgetFile, WidgetAsset>;
}
