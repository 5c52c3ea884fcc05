/*
 * Restock back-in-stock widget, BigCommerce's product form: served in /widget-platforms.js, after
 * the widget's part that calls it (src/storefront/widget-platforms.ts), for stores whose tag names
 * BigCommerce. What it is handed and gives back: src/core/platform-form.ts.
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
 */
import type { PlatformFormHost, PlatformFormMaker } from '../core/platform-form.ts';

/** A BigCommerce option field (`attribute[<option id>]`): an input or a select. */
type OptionField = HTMLInputElement | HTMLSelectElement;

declare global {
  interface Window {
    /** BigCommerce Stencil's page data. */
    BCData?: { product_attributes?: { instock?: unknown }; csrf_token?: string };
  }
}

(function () {
  'use strict';

  const bigcommerce: PlatformFormMaker = (tools) => {
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
        const id = tools.followed();
        const form = formOf(id);
        if (!form) return;
        const data = window.BCData || {};
        const option = (el: OptionField) => /^attribute\[/.test(el.name) && el.type !== 'file';
        const options = ([] as OptionField[]).filter.call(form.elements, option);
        if (!options.length) {
          const known = data.product_attributes;
          if (known && typeof known.instock === 'boolean') tools.learn(id, [], !known.instock);
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
              if (variant) tools.learn(id, [{ id: variant, soldOut: !d.instock }]);
              tools.select(variant ? String(variant) : null, initial);
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

  const w = window as Window & { Restock?: PlatformFormHost };
  const R = (w.Restock = w.Restock || {});
  (R.platformForms = R.platformForms || {}).bigcommerce = bigcommerce;
})();
