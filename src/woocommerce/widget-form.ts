/*
 * Restock back-in-stock widget, WooCommerce's product form: served in /widget-platforms.js, after
 * the widget's part that calls it (src/storefront/widget-platforms.ts), for stores whose tag names
 * WooCommerce. What it is handed and gives back: src/core/platform-form.ts.
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
 */
import type { PlatformFormHost, PlatformFormMaker } from '../core/platform-form.ts';

/** A WooCommerce variation, as its form lists it and as `found_variation` hands it. */
interface WooVariation {
  variation_id: number;
  is_in_stock: boolean;
}

/** The little of jQuery that WooCommerce's form events need. */
type JQueryOf = (element: Element) => {
  on(events: string, handler: (event: unknown, variation?: WooVariation) => void): ReturnType<JQueryOf>;
};

declare global {
  interface Window {
    jQuery?: JQueryOf;
  }
}

(function () {
  'use strict';

  // WooCommerce keeps '' or '0' in variation_id while no variation is chosen.
  const chosen = (value: string | null | undefined) => (value && value !== '0' ? value : null);

  const woocommerce: PlatformFormMaker = (tools) => ({
    product: () => {
      const form = document.querySelector('form.variations_form[data-product_id]');
      const button = document.querySelector<HTMLButtonElement>('form.cart [name="add-to-cart"]');
      const post = document.body.classList.contains('single-product') && /(?:^|\s)postid-(\d+)(?:\s|$)/.exec(document.body.className);
      return (form && form.getAttribute('data-product_id')) || (button && button.value) || (post && post[1]) || null;
    },
    follow: () => {
      const id = tools.followed();
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
      tools.learn(id, list, status ? status[1] === 'outofstock' : list.length ? list.every((v) => v.soldOut) : null);
      if (!form) return;

      const $ = window.jQuery;
      if ($) {
        $(form)
          .on('found_variation', (event, variation) => {
            if (!variation) return;
            tools.learn(id, [{ id: variation.variation_id, soldOut: !variation.is_in_stock }]);
            tools.select(chosen(String(variation.variation_id)));
          })
          .on('reset_data hide_variation', () => tools.select(null));
      }
      const input = form.querySelector<HTMLInputElement>('input[name="variation_id"]');
      if (!input) return;
      // Read when told, not from the record: the last value is the choice.
      const read = () => tools.select(chosen(input.value));
      new MutationObserver(read).observe(input, { attributes: true, attributeFilter: ['value'] });
      input.addEventListener('change', read);
      if (chosen(input.value)) tools.select(input.value, true);
    },
  });

  const w = window as Window & { Restock?: PlatformFormHost };
  const R = (w.Restock = w.Restock || {});
  (R.platformForms = R.platformForms || {}).woocommerce = woocommerce;
})();
