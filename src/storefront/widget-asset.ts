import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { gzipSync } from 'node:zlib';
import { transform } from 'esbuild';

export interface WidgetAsset {
  /** Minified script. */
  body: Buffer;
  gzipped: Buffer;
  /** Strong tags, one per representation (the two are served from one URL, by Accept-Encoding). */
  etag: string;
  gzippedEtag: string;
}

/**
 * The same minified script shipped in the theme app extension, which Shopify serves to stores from
 * its CDN. Written by `node --import tsx bin/build-theme-extension.ts`; a test fails when it differs
 * from what `loadWidgetAsset` makes.
 */
export const THEME_EXTENSION_WIDGET = new URL('../../extensions/restock-notify/assets/restock-widget.js', import.meta.url);

/**
 * The storefront script, minified once at start-up: the readable source is what we keep in the
 * repository, the small one is what every product page downloads.
 */
export async function loadWidgetAsset(): Promise<WidgetAsset> {
  const source = await readFile(new URL('./widget.js', import.meta.url), 'utf8');
  const { code } = await transform(source, { minify: true, target: 'es2019', loader: 'js', legalComments: 'none' });
  const body = Buffer.from(code);
  const tag = createHash('sha256').update(body).digest('base64url').slice(0, 27);
  return { body, gzipped: gzipSync(body, { level: 9 }), etag: `"${tag}"`, gzippedEtag: `"${tag}-gz"` };
}
