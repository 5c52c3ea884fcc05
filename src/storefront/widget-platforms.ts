/*
 * Restock back-in-stock widget, platforms: follows the product form of stores on other platforms
 * than Shopify. widget.js loads it from beside itself (widget-platforms.js on the service) when the
 * tag names another platform (`data-platform`, or a gid in `data-product`), before it mounts.
 *
 * It registers one function, `window.Restock.platform(name, api)`, which widget.js calls once with
 * the platform's name and its own parts:
 *   api.select(id, onlyUnset)   the shopper's variant choice (a number; null: no complete choice);
 *                               onlyUnset for the form's state at load, which the tag's
 *                               data-variant wins over
 *   api.gid(kind, id)           'Product' or 'ProductVariant' and a number → the platform's gid
 *   api.merged(server, page, all) a widget's `data`: the availability answer, with the variants the
 *                               page knows and whether it says the whole product is sold out
 *   api.widgets                 the widgets; each has `product` (a gid), `page` (variants the page
 *                               knows, [{ variantId, soldOut }]), `all`, `server` (the availability
 *                               answer, once in), `data` and `render()`
 * and gets back, from the platform's own form script (nothing for a platform without one):
 *   product()                   the product the page shows (its number), or null
 *   follow()                    starts following the form of the first widget's product
 * What the page tells of its product's stock wins over Restock's records, as the theme block's
 * data-variants does: Restock only knows the products reported to it.
 *
 * Each platform's form script is its own folder's (`widgetForm` in its registry entry,
 * src/platform.ts), served after this one in the same file; each puts its maker in
 * `Restock.platformForms` under the platform's name. (The types of both sides: PlatformApi in
 * widget.ts, FormTools and PlatformForm in src/core/platform-form.ts.)
 */
import type { FormTools, PageVariant, PlatformForm } from '../core/platform-form.ts';
import type { PlatformApi, VariantStock } from './widget.ts';

(function () {
  'use strict';

  const R = (window.Restock = window.Restock || {});

  // What the page tells of the product's stock: variants [{ id, soldOut }] and, when it says
  // (else null), whether the whole product is sold out. Later news of a variant replaces earlier.
  const learner =
    (api: PlatformApi): FormTools['learn'] =>
    (product, list: PageVariant[], all) => {
      // Those the filter kept have their gid.
      const page = list.map((v) => ({ variantId: api.gid('ProductVariant', v.id), soldOut: !!v.soldOut })).filter((v) => v.variantId) as VariantStock[];
      api.widgets.forEach((w) => {
        if (w.product !== api.gid('Product', product)) return;
        w.page = page.concat((w.page || []).filter((v) => !page.some((n) => n.variantId === v.variantId)));
        if (all != null) w.all = all;
        if (w.server) w.data = api.merged(w.server, w.page, w.all);
        w.render();
      });
    };

  // The scripts after this one have put their makers by then: widget.js calls this once all is loaded.
  R.platform = (name, api): PlatformForm | null => {
    const forms = R.platformForms || {};
    if (!Object.prototype.hasOwnProperty.call(forms, name)) return null;
    return forms[name]!({
      select: api.select,
      learn: learner(api),
      // `follow` is called only when there is a widget.
      followed: () => api.widgets[0]!.product.split('/').pop()!,
    });
  };
})();
