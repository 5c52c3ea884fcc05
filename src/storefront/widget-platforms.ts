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
 * and gets back, for WooCommerce and BigCommerce (nothing for any other platform):
 *   product()                   the product the page shows (its number), or null
 *   follow()                    starts following the form of the first widget's product
 * What the page tells of its product's stock wins over Restock's records, as the theme block's
 * data-variants does: Restock only knows the products reported to it.
 *
 * WooCommerce (templates/single-product/add-to-cart/variable.php and simple.php, driven by
 * assets/js/frontend/add-to-cart-variation.js): `form.variations_form[data-product_id]` lists its
 * variations in `data-product_variations` (variation_id, is_in_stock); the form triggers the jQuery
 * events `found_variation` (with the variation) and `reset_data` / `hide_variation`, and keeps the
 * choice in `input[name=variation_id]` ('' or '0' for none), set with jQuery's .val(), which
 * fires no DOM event: the input's value attribute is watched as well, which follows any script
 * that fills it, jQuery or not. A simple product has `button[name=add-to-cart][value=<id>]`, or no
 * form at all when it is out of stock; its `#product-<id>` element carries its stock status as a
 * class (instock, outofstock, onbackorder), and the body `single-product postid-<id>`.
 *
 * BigCommerce (Stencil Cornerstone, templates/components/products/product-view.html and
 * assets/js/theme/common/product-details.js): `form[data-cart-item-add]` with
 * `input[name=product_id]` and the option fields `attribute[<option id>]`. A choice is resolved to
 * a variant only by the storefront's own `POST /remote/v1/product-attributes/<product id>` (the
 * form's fields, url-encoded), which the theme calls on every option change. Rather than reach
 * into the theme's copy of that call (bundled, not exposed), this script makes the same call on
 * the same origin when an option changes, the latest answer winning, and reads from its `data`:
 * `v3_variant_id` (the catalog's variant id, as the V3 API and webhooks name it; `variantId` there
 * is the older V2 SKU id), `instock`, and `base` (true while the options name no variant).
 * A product without options is told by `window.BCData.product_attributes.instock`.
 * (The types of both sides: PlatformApi and PlatformForm in widget.ts.)
 */
import type { PlatformApi, PlatformForm, VariantStock } from './widget.ts';

/** A variant's stock as the page tells it, by the platform's own number. */
interface PageVariant {
  id: string | number;
  soldOut: boolean;
}

/** What the page tells of a product's stock: its variants and, when it says, whether all are sold out. */
type Learn = (product: string, list: PageVariant[], all?: boolean | null) => void;

/** A WooCommerce variation, as its form lists it and as `found_variation` hands it. */
interface WooVariation {
  variation_id: number;
  is_in_stock: boolean;
}

/** The little of jQuery that WooCommerce's form events need. */
type JQueryOf = (element: Element) => {
  on(events: string, handler: (event: unknown, variation?: WooVariation) => void): ReturnType<JQueryOf>;
};

/** A BigCommerce option field (`attribute[<option id>]`): an input or a select. */
type OptionField = HTMLInputElement | HTMLSelectElement;

declare global {
  interface Window {
    jQuery?: JQueryOf;
    /** BigCommerce Stencil's page data. */
    BCData?: { product_attributes?: { instock?: unknown }; csrf_token?: string };
  }
}

(function () {
  'use strict';

  const R = (window.Restock = window.Restock || {});
  const chosen = (value: string | null | undefined) => (value && value !== '0' ? value : null);

  // What the page tells of the product's stock: variants [{ id, soldOut }] and, when it says
  // (else null), whether the whole product is sold out. Later news of a variant replaces earlier.
  const learner =
    (api: PlatformApi): Learn =>
    (product, list, all) => {
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
  // The number of the first widget's product: the one whose form is followed (`follow` is called
  // only when there is a widget).
  const first = (api: PlatformApi) => api.widgets[0]!.product.split('/').pop()!;

  const woocommerce = (api: PlatformApi, learn: Learn): PlatformForm => ({
    product: () => {
      const form = document.querySelector('form.variations_form[data-product_id]');
      const button = document.querySelector<HTMLButtonElement>('form.cart [name="add-to-cart"]');
      const post = document.body.classList.contains('single-product') && /(?:^|\s)postid-(\d+)(?:\s|$)/.exec(document.body.className);
      return (form && form.getAttribute('data-product_id')) || (button && button.value) || (post && post[1]) || null;
    },
    follow: () => {
      const id = first(api);
      const form = document.querySelector('form.variations_form[data-product_id="' + id + '"]');
      const item = document.getElementById('product-' + id);
      const status = item && /(?:^|\s)(instock|outofstock|onbackorder)(?:\s|$)/.exec(item.className);
      let variations: WooVariation[] | false = [];
      try {
        // `false` when the product has more variations than are listed (they are then asked for).
        // No attribute parses as null (JSON.parse reads it as 'null').
        variations = (form && JSON.parse(form.getAttribute('data-product_variations') as string)) || [];
      } catch (e) {
        // Unreadable: each found variation still tells its stock.
      }
      const list = (Array.isArray(variations) ? variations : []).map((v) => ({ id: v.variation_id, soldOut: !v.is_in_stock }));
      learn(id, list, status ? status[1] === 'outofstock' : list.length ? list.every((v) => v.soldOut) : null);
      if (!form) return;

      const $ = window.jQuery;
      if ($) {
        $(form)
          .on('found_variation', (event, variation) => {
            if (!variation) return;
            learn(id, [{ id: variation.variation_id, soldOut: !variation.is_in_stock }]);
            api.select(chosen(String(variation.variation_id)));
          })
          .on('reset_data hide_variation', () => api.select(null));
      }
      const input = form.querySelector<HTMLInputElement>('input[name="variation_id"]');
      if (!input) return;
      // Read when told, not from the record: the last value is the choice.
      const read = () => api.select(chosen(input.value));
      new MutationObserver(read).observe(input, { attributes: true, attributeFilter: ['value'] });
      input.addEventListener('change', read);
      if (chosen(input.value)) api.select(input.value, true);
    },
  });

  const bigcommerce = (api: PlatformApi, learn: Learn): PlatformForm => {
    const formOf = (id?: string): HTMLFormElement | undefined =>
      ([] as HTMLFormElement[]).filter.call(document.querySelectorAll<HTMLFormElement>('form[data-cart-item-add]'), (form) => {
        const field = form.querySelector<HTMLInputElement>('[name="product_id"]');
        return field && (!id || field.value === id);
      })[0];
    return {
      product: () => {
        const form = formOf();
        // The form was found by this field.
        return form ? form.querySelector<HTMLInputElement>('[name="product_id"]')!.value : null;
      },
      follow: () => {
        const id = first(api);
        const form = formOf(id);
        if (!form) return;
        const data = window.BCData || {};
        const option = (el: OptionField) => /^attribute\[/.test(el.name) && el.type !== 'file';
        const options = ([] as OptionField[]).filter.call(form.elements, option);
        if (!options.length) {
          const known = data.product_attributes;
          if (known && typeof known.instock === 'boolean') learn(id, [], !known.instock);
          return;
        }
        let asked = 0;
        const ask = (initial: boolean) => {
          const n = ++asked;
          const body = new URLSearchParams();
          new FormData(form).forEach((value, key) => {
            if (typeof value === 'string') body.append(key, value);
          });
          // As the theme's own call (stencil-utils): same origin, the store's cookies and token.
          fetch('/remote/v1/product-attributes/' + encodeURIComponent(id), {
            method: 'POST',
            credentials: 'same-origin',
            headers: {
              'content-type': 'application/x-www-form-urlencoded; charset=UTF-8',
              'stencil-config': '{}',
              'stencil-options': '{}',
              'x-xsrf-token': data.csrf_token || '',
              'x-requested-with': 'stencil-utils',
            },
            body,
          })
            .then((res) => {
              if (!res.ok) throw new Error('product attributes answered ' + res.status);
              return res.json();
            })
            .then((answer) => {
              if (n !== asked) return;
              const d = (answer && answer.data) || {};
              const variant = !d.base && d.v3_variant_id;
              if (variant) learn(id, [{ id: variant, soldOut: !d.instock }]);
              api.select(variant ? String(variant) : null, initial);
            })
            .catch((error) => console.warn('Restock widget:', error.message));
        };
        // Capture, so a theme that stops these events on its own form does not hide them from us.
        document.addEventListener(
          'change',
          (event) => {
            // Any element's events: only the form's option fields count.
            if ((event.target as OptionField).form === form && option(event.target as OptionField)) ask(false);
          },
          true,
        );
        // Options chosen as the page loads (defaults): the theme asks then too.
        if (options.some((el) => (/^(radio|checkbox)$/.test(el.type) ? (el as HTMLInputElement).checked : el.value))) ask(true);
      },
    };
  };

  const PLATFORMS = { woocommerce, bigcommerce };
  R.platform = (name, api) =>
    Object.prototype.hasOwnProperty.call(PLATFORMS, name) ? PLATFORMS[name as keyof typeof PLATFORMS](api, learner(api)) : null;
})();
