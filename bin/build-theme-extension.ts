// Writes the minified storefront scripts into the theme app extension (extensions/restock-notify/assets),
// from which Shopify serves them to stores: run it after changing src/storefront/widget.ts or
// src/storefront/widget-channels.ts, then deploy.
import { mkdir, writeFile } from 'node:fs/promises';
import { loadWidgetAsset, THEME_EXTENSION_ASSETS, WIDGET_FILES } from '../src/storefront/widget-asset.ts';

for (const file of WIDGET_FILES) {
  const target = THEME_EXTENSION_ASSETS[file];
  const { body } = await loadWidgetAsset(file);
  await mkdir(new URL('.', target), { recursive: true });
  await writeFile(target, body);
  console.log(`Wrote ${target.pathname} (${body.length} bytes)`);
}
