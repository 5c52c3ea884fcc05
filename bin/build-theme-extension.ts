// Writes the minified storefront widget into the theme app extension (extensions/restock-notify/assets),
// from which Shopify serves it to stores: run it after changing src/storefront/widget.js, then deploy.
import { mkdir, writeFile } from 'node:fs/promises';
import { loadWidgetAsset, THEME_EXTENSION_WIDGET } from '../src/storefront/widget-asset.ts';

const { body } = await loadWidgetAsset();
await mkdir(new URL('.', THEME_EXTENSION_WIDGET), { recursive: true });
await writeFile(THEME_EXTENSION_WIDGET, body);
console.log(`Wrote ${THEME_EXTENSION_WIDGET.pathname} (${body.length} bytes)`);
