// Longer than most files on purpose: the sign-up form is one script, so that a product page asks
// for one file (its wording in four languages included), and the types it shares with the scripts
// it loads from beside itself are written here, once.
/* Restock back-in-stock widget: the sign-up form shown on a sold-out product page. */

// The types below are what passes between this script and the ones it loads from beside itself
// (widget-channels.ts, widget-platforms.ts), which import them; none of them reaches the browser.

import type { ChannelChoiceHost, Complaint, SignUpFields } from '../core/channel-choice.ts';
import type { PlatformForm, PlatformFormMaker } from '../core/platform-form.ts';

export type { Complaint };

/** A variant's stock, as the service's records or the page tell it. */
export interface VariantStock {
  variantId: string;
  soldOut: boolean;
}

/** What the sign-up form may offer beside e-mail: each channel the service names, offered or not. */
export type OfferedChannels = Record<string, boolean | undefined>;

/** The availability answer (`GET /storefront/v1/availability`), or a widget's merge of it with the page's variants. */
export interface Availability {
  soldOut: boolean | null;
  variants: VariantStock[];
  channels: OfferedChannels;
}

/** Where the widget's calls go: the service itself, or Shopify's app proxy on the store's origin. */
export interface Endpoints {
  availability: (w: Widget) => string;
  subscribe: string;
  /** Whether the sign-up names the store (the proxy names it itself). */
  shop: boolean;
  /** The service as the page's own origin reaches it (the proxy, or the service's own page); false elsewhere. */
  sameOrigin: string | false;
}

/** The sign-up the form posts, with the channels' fields when the shopper chose them. */
export interface SignUp extends SignUpFields {
  shop?: string;
  productId: string;
  variantId: string | null;
  email: string;
  locale: string | null;
  consentText: string;
  country?: string;
  page?: string;
  timeZone?: string;
}

/** The form's hooks into the channels script's choices (described in widget-channels.ts). */
export interface ChannelHooks {
  check(): Complaint | undefined;
  add(body: SignUp): Promise<void>;
  refused(at: (name: string) => boolean, body: SignUp): Complaint | true | undefined;
  done(confirmBy: string[]): string[];
}

/** What the widget hands the channels script, once per form. */
export interface ChannelsOptions {
  root: ShadowRoot;
  locale: string;
  strings: Record<string, unknown>;
  sameOrigin: string | false;
  channels: OfferedChannels;
}

/** One sign-up form on the page, for one product. */
export interface Widget {
  shop: string;
  product: string;
  api: Endpoints;
  /** The chosen variant; null for the whole product. */
  variant: string | null;
  /** The availability answer merged with the page's variants, once in. */
  data: Availability | null;
  /** The availability answer as the service gave it, once in. */
  server?: Availability;
  sending: boolean;
  /** The variants the page knows, which win over the service's. */
  page: VariantStock[] | null;
  /** Whether the page says the whole product is sold out; null when it does not say. */
  all: boolean | null;
  /** The chosen variant's stock, when it is known. */
  known(): VariantStock | '' | null | undefined;
  render(): void;
  reset(): void;
  offer(): Promise<void> | undefined;
  x?: ChannelHooks | undefined;
}

/** What the widget hands the platforms script (described in widget-platforms.ts). */
export interface PlatformApi {
  select(id: string | null | undefined, onlyUnset?: boolean): void;
  gid(kind: 'Product' | 'ProductVariant', id: string | number | null | undefined): string | null;
  merged(server: Availability, page: VariantStock[] | null, all: boolean | null | undefined): Availability;
  widgets: Widget[];
}


/** The one global, `window.Restock`, shared by every copy of the widget and the scripts it loads. */
export interface Restock extends ChannelChoiceHost {
  channels?: (options: ChannelsOptions) => ChannelHooks | undefined;
  platform?: (name: string, api: PlatformApi) => PlatformForm | null;
  /** Each platform's product form, put there by its script in widget-platforms.js. */
  platformForms?: Record<string, PlatformFormMaker>;
  channelsLoading?: Promise<unknown>;
  platformsLoading?: Promise<unknown>;
  selectVariant?: (id: string | null) => void;
}

declare global {
  interface Window {
    Restock?: Restock;
  }
  interface DocumentEventMap {
    /** A theme's (or `Restock.selectVariant`'s) news of the shopper's variant. */
    'restock:variant-change': CustomEvent<{ variantId: string | null } | null>;
  }
}

/** The form's wording; a page's `data-strings` may override any of it. */
type Wording = {
  title: string;
  prompt: string;
  label: string;
  placeholder: string;
  button: string;
  sending: string;
  success: string;
  invalid: string;
  tooMany: string;
  error: string;
  confirmEmail: string;
};

/** The widget's mount points beside its own tag: each is taken only once. */
interface MountPoint extends HTMLElement {
  restockMounted?: boolean;
}

/** The theme's variant field in its cart form (an input or a select named "id"). */
type VariantField = HTMLInputElement | HTMLSelectElement;

(function () {
  'use strict';

  // Only readable while this script first runs; afterwards it is null. Everything below but the
  // last lines runs only once it is known to be there (hence `script!`).
  const script = document.currentScript as HTMLScriptElement | null;

  const STRINGS: Record<string, Wording> = {
    en: {
      title: 'Sold out',
      prompt: 'Get an e-mail when it’s back in stock.',
      label: 'E-mail address',
      placeholder: 'you@example.com',
      button: 'Notify me when available',
      sending: 'Sending…',
      success: 'Thank you! We’ll e-mail you when it’s back in stock.',
      invalid: 'Please enter a valid e-mail address.',
      tooMany: 'Too many attempts. Please try again in a moment.',
      error: 'Something went wrong. Please try again.',
      confirmEmail: 'Check your inbox to confirm.',
    },
    fr: {
      title: 'Épuisé',
      prompt: 'Recevez un e-mail dès son retour en stock.',
      label: 'Adresse e-mail',
      placeholder: 'vous@exemple.fr',
      button: 'Me prévenir quand disponible',
      sending: 'Envoi…',
      success: 'Merci\u00a0! Nous vous enverrons un e-mail dès son retour en stock.',
      invalid: 'Veuillez saisir une adresse e-mail valide.',
      tooMany: 'Trop de tentatives. Réessayez dans un instant.',
      error: 'Une erreur est survenue. Veuillez réessayer.',
      confirmEmail: 'Consultez votre boîte de réception pour confirmer.',
    },
    de: {
      title: 'Ausverkauft',
      prompt: 'Erhalten Sie eine E-Mail, sobald der Artikel wieder verfügbar ist.',
      label: 'E-Mail-Adresse',
      placeholder: 'name@beispiel.de',
      button: 'Benachrichtigen, wenn verfügbar',
      sending: 'Wird gesendet…',
      success: 'Danke! Wir benachrichtigen Sie per E-Mail, sobald der Artikel wieder verfügbar ist.',
      invalid: 'Bitte geben Sie eine gültige E-Mail-Adresse ein.',
      tooMany: 'Zu viele Versuche. Bitte versuchen Sie es gleich noch einmal.',
      error: 'Etwas ist schiefgelaufen. Bitte versuchen Sie es erneut.',
      confirmEmail: 'Bitte bestätigen Sie über den Link in Ihrem Posteingang.',
    },
    es: {
      title: 'Agotado',
      prompt: 'Recibe un correo cuando vuelva a estar disponible.',
      label: 'Correo electrónico',
      placeholder: 'tu@ejemplo.com',
      button: 'Avísame cuando esté disponible',
      sending: 'Enviando…',
      success: '¡Gracias! Te enviaremos un correo cuando vuelva a estar disponible.',
      invalid: 'Introduce un correo electrónico válido.',
      tooMany: 'Demasiados intentos. Inténtalo de nuevo en un momento.',
      error: 'Algo salió mal. Inténtalo de nuevo.',
      confirmEmail: 'Revisa tu bandeja de entrada para confirmar.',
    },
  };

  // The widget brings its own text and background colours, so contrast never depends on the page.
  // It takes only the page's font family, which changes neither: that keeps it looking like part of
  // the store. Sizes are in px so a page's font-size (even on `*`) cannot blow the layout up.
  // Host rules are !important because, on the host element itself, the page's !important rules
  // would otherwise win; inside the shadow tree the page's selectors do not reach.
  const CSS =
    ':host{all:initial!important;display:block!important;font-family:inherit!important}' +
    ':host([hidden]),[hidden]{display:none!important}' +
    '*{box-sizing:border-box}' +
    '.r{margin:16px 0;padding:16px;border:1px solid #8a8a8a;border-radius:8px;background:#fff;color:#1a1a1a;' +
    'font-size:15px;line-height:1.4;font-weight:400;text-align:start}' +
    'p{margin:0}' +
    '.t{font-size:17px;font-weight:700}' +
    'label{display:block;margin:12px 0 4px;font-weight:600}' +
    '.f{display:flex;flex-wrap:wrap;gap:8px}' +
    'input,button{font:inherit;margin:0;border-radius:4px;padding:10px 14px;border:1px solid #1a1a1a}' +
    'input{flex:1 1 14em;min-width:0;color:#1a1a1a;background:#fff;border-color:#6e6e6e}' +
    'input::placeholder{color:#6e6e6e;opacity:1}' +
    '[aria-invalid=true]{border-color:#b3261e}' +
    'button{flex:0 0 auto;color:#fff;background:#1a1a1a;font-weight:600;cursor:pointer}' +
    'button:disabled{cursor:progress;opacity:.75}' +
    ':focus-visible{outline:3px solid #1a5fd0;outline-offset:2px}' +
    '#m{color:#b3261e}#m:not(:empty){margin-top:8px}' +
    // Focus is moved to the confirmation only so screen readers read it; it is not a control.
    '#s{font-weight:600}#s:focus{outline:none}';

  const widgets: Widget[] = [];
  // The one global, shared by every copy of this script on the page and the channels script.
  const R = (window.Restock = window.Restock || {});
  // Set once the shopper (or the theme) picked a variant: the page's initial one no longer applies.
  let touched = false;
  let origin: string;
  // The store's platform, as the tag names it (data-platform, or the gid in data-product): ids are
  // gid://<platform>/…. Shopify unless told otherwise.
  let P = 'shopify';

  // The theme block names Shopify's app proxy on the store's own origin, which signs each call
  // with the store; the pasted tag calls the service it was loaded from, naming the store.
  // What must come from the page's own origin (a service worker) does through the proxy; the
  // pasted tag has it only on pages of the service's own origin.
  const endpoints = (data: DOMStringMap): Endpoints => {
    if (!data.proxy) {
      return {
        availability: (w) => origin + '/storefront/v1/availability?' + new URLSearchParams({ shop: w.shop, productId: w.product }),
        subscribe: origin + '/storefront/v1/subscribe',
        shop: true,
        sameOrigin: location.origin === origin && origin,
      };
    }
    const base = new URL(data.proxy, location.href).href.replace(/\/$/, '');
    return {
      availability: (w) => base + '/availability?' + new URLSearchParams({ productId: w.product }),
      subscribe: base + '/subscriptions',
      shop: false,
      sameOrigin: base,
    };
  };

  const gid: PlatformApi['gid'] = (kind, id) => {
    id = id == null ? '' : String(id).trim();
    const prefix = 'gid://' + P + '/' + kind + '/';
    if (/^\d+$/.test(id)) return prefix + id;
    return id.indexOf(prefix) === 0 ? id : null;
  };

  const urlVariant = () => new URLSearchParams(location.search).get('variant');

  const formVariant = () => {
    const field = document.querySelector<VariantField>('form[action*="/cart/add"] [name="id"]');
    return field && field.value;
  };

  const isIdField = (el: VariantField | null) => {
    const form = el && el.name === 'id' && (el.form || el.closest('form'));
    return !!form && /\/cart\/add/.test(form.getAttribute('action') || '');
  };

  // A page can hold widgets for several products: a variant goes to the widgets whose product
  // lists it, or to all of them when none does (a variant the service has not heard of yet).
  const select: PlatformApi['select'] = (id, onlyUnset) => {
    touched = true;
    const none = id == null || id === '';
    const variant = none ? null : gid('ProductVariant', id);
    if (!none && !variant) return;
    const owners = widgets.filter((w) => variant && w.data && w.data.variants.some((v) => v.variantId === variant));
    (owners.length ? owners : widgets).forEach((w) => {
      if (onlyUnset && w.variant) return;
      if (w.variant !== variant) {
        w.variant = variant;
        w.reset();
      }
      w.render();
    });
  };

  // What the page itself knows (a theme renders `data-variants` from its own stock; on other
  // platforms, widget-platforms.js reads the product form): it wins over Restock's records, which
  // only know products reported to them. A variant sold by a selling plan (a pre-order) can be
  // bought, so it is not sold out.
  const pageVariants = (json: string | undefined): VariantStock[] | null => {
    try {
      const list = JSON.parse(json || 'null');
      if (!Array.isArray(list)) return null;
      const variants = list
        .map((v) => ({ variantId: gid('ProductVariant', v && v.id), soldOut: !(v && (v.available || v.sellingPlan)) }))
        .filter((v) => v.variantId);
      // Those the filter kept have their gid.
      return variants.length ? (variants as VariantStock[]) : null;
    } catch (e) {
      return null;
    }
  };

  // A second script beside this one, once per page, whichever copy of this script asks first:
  // widget.js → widget-<file> on the service, restock-widget.js → restock-<file> in the theme app
  // extension (Shopify's CDN). The channels' choices beside e-mail (`channels.js`, fetched only
  // when the service offers a channel, registering `Restock.channels`) and the product forms of
  // other platforms than Shopify (`platforms.js`, registering `Restock.platform`). If it cannot be
  // had within a few seconds, the widget goes on without it: never waits longer.
  const load = (key: 'channelsLoading' | 'platformsLoading', file: string) =>
    R[key] ||
    (R[key] = new Promise((resolve) => {
      const el = document.createElement('script');
      el.src = script!.src.replace(/[^/?#]*(?=[?#]|$)/, (name) => (/^restock-/.test(name) ? 'restock-' : 'widget-') + file);
      el.onload = el.onerror = resolve;
      setTimeout(resolve, 3000);
      document.head.appendChild(el);
    }));

  // `all`: whether the whole product is sold out as the page says; null when it does not say.
  const merged: PlatformApi['merged'] = (server, page, all) => {
    const ids = (page || []).map((v) => v.variantId);
    return {
      channels: server.channels || {},
      soldOut: all != null ? all : server.soldOut,
      variants: (page || []).concat((server.variants || []).filter((v) => ids.indexOf(v.variantId) < 0)),
    };
  };

  const mount = (el: HTMLElement, place: (host: HTMLElement) => HTMLElement, platform: PlatformForm | null | undefined) => {
    const data = el.dataset;
    const shop = data.shop;
    // On other platforms the page names its product when the tag does not.
    const product = gid('Product', data.product || (platform && platform.product()));
    if (!shop || !product) return;
    const host = place(document.createElement('restock-widget'));

    const api = endpoints(data);
    // The shopper's country as the store knows it, so the alert waits until the variant sells there.
    const country = /^[A-Z]{2}$/.test(data.country || '') ? data.country : null;
    const lang = (data.locale || document.documentElement.lang || '').split('-')[0]!.toLowerCase();
    // Sent only when the page told us: otherwise the store's own alert language applies.
    const pageLocale = STRINGS[lang] ? lang : null;
    const locale = pageLocale || 'en';
    const s = Object.assign({}, STRINGS[locale]);
    let overrides: Record<string, unknown> = {};
    try {
      overrides = JSON.parse(data.strings || '{}') || {};
      Object.keys(overrides).forEach((key) => {
        if (typeof overrides[key] === 'string' && key in s) (s as Record<string, string>)[key] = overrides[key] as string;
      });
    } catch (e) {
      // A malformed override keeps the built-in wording rather than breaking the form.
      overrides = {};
    }

    host.hidden = true;
    const root = host.attachShadow({ mode: 'open' });
    root.innerHTML =
      '<style>' + CSS + '</style>' +
      '<div class="r" part="widget"><form novalidate>' +
      '<p class="t"></p><p class="p"></p>' +
      '<label for="e"></label>' +
      '<div class="f"><input id="e" type="email" name="email" autocomplete="email" required aria-describedby="m">' +
      '<button type="submit"></button></div>' +
      '<p id="m" role="alert"></p>' +
      '</form><p id="s" role="status" tabindex="-1"></p></div>';
    // The form's own elements, there since the line above.
    const $ = <E extends HTMLElement>(selector: string) => root.querySelector<E>(selector)!;
    const form = $<HTMLFormElement>('form');
    const input = $<HTMLInputElement>('input');
    const button = $<HTMLButtonElement>('button');
    const message = $('#m');
    const status = $('#s');
    $('.r').lang = locale;
    $('.t').textContent = s.title;
    $('.p').textContent = s.prompt;
    $('label').textContent = s.label;
    input.placeholder = s.placeholder;
    button.textContent = s.button;

    const page = pageVariants(data.variants);
    const w: Widget = {
      shop,
      product,
      api,
      variant: gid('ProductVariant', data.variant),
      data: null,
      sending: false,
      page,
      all: page && page.every((v) => v.soldOut),
      known: () => w.data && w.variant && w.data.variants.filter((v) => v.variantId === w.variant)[0],
      render: () => {
        const known = w.known();
        host.hidden = !(known ? known.soldOut : w.data && w.data.soldOut === true);
      },
      reset: () => {
        message.textContent = status.textContent = '';
        valid();
        form.hidden = false;
      },
      // What the service offers beside e-mail (a phone number, this browser's notifications), added
      // by the channels script once the answer is in; `w.x` is then the form's hooks into it.
      offer: () => {
        // Called once the answer is in.
        const channels = w.data!.channels;
        if (Object.keys(channels).some((name) => channels[name])) {
          return load('channelsLoading', 'channels.js').then(() => {
            w.x = R.channels && R.channels({ root, locale, strings: overrides, sameOrigin: api.sameOrigin, channels });
          });
        }
      },
    };

    const valid = () => root.querySelectorAll('[aria-invalid]').forEach((el) => el.removeAttribute('aria-invalid'));

    // The field at fault is marked and focused; otherwise focus goes back to the e-mail field.
    const fail = (text: string, field?: HTMLElement | null) => {
      message.textContent = text;
      valid();
      if (field) field.setAttribute('aria-invalid', 'true');
      (field || input).focus();
    };

    const busy = (on: boolean) => {
      w.sending = button.disabled = on;
      if (on) button.setAttribute('aria-busy', 'true');
      else button.removeAttribute('aria-busy');
      button.textContent = on ? s.sending : s.button;
    };

    form.addEventListener('submit', (event) => {
      event.preventDefault();
      if (w.sending) return;
      // The channels' part of the form, as it was when the shopper sent it.
      const x = w.x;
      const email = input.value.trim();
      if (email.length > 254 || !/^[^\s@]+@[^\s@]+\.[^\s@]+$/.test(email)) return fail(s.invalid, input);
      const wrong = x && x.check();
      if (wrong) return fail(...wrong);
      const known = w.known();
      message.textContent = '';
      busy(true);
      const body: SignUp = {
        productId: product,
        variantId: known ? w.variant : null,
        email,
        locale: pageLocale,
        consentText: (s.prompt + ' ' + s.button).slice(0, 1000),
      };
      if (api.shop) body.shop = shop;
      if (country) body.country = country;
      if (location.href.length <= 2048) body.page = location.href;
      try {
        const zone = Intl.DateTimeFormat().resolvedOptions().timeZone;
        if (/^[A-Za-z][\w+/-]{0,63}$/.test(zone)) body.timeZone = zone;
      } catch (e) {
        // Without a time zone the store's own applies to quiet hours.
      }
      const post = (): Promise<{ confirmBy?: string[] }> =>
        fetch(api.subscribe, {
          method: 'POST',
          credentials: 'omit',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(body),
        }).then((res) => {
          if (res.ok) return res.json();
          if (res.status === 429) throw [s.tooMany];
          if (res.status >= 500) throw [s.error];
          // The service words its refusals in English; the shopper reads the widget's language.
          return res.json().then(
            // A problem document, its `errors` pointing at the fields refused.
            (problem: { errors?: { pointer: string }[] }) => {
              const at = (name: string) => (problem.errors || []).some((error) => RegExp('/' + name + '(/|$)').test(error.pointer));
              if (at('email')) throw [s.invalid, input];
              // A channel's field for the shopper to fix, or a channel dropped and the rest sent again.
              const again = x && x.refused(at, body);
              if (again === true) return post();
              throw again || [s.error];
            },
            () => {
              throw [s.error];
            },
          );
        });
      Promise.resolve()
        .then(() => x && x.add(body))
        .then(post)
        .then(
          (answer) => {
            const confirmBy = (answer && answer.confirmBy) || [];
            busy(false);
            form.hidden = true;
            status.textContent = [s.success, confirmBy.indexOf('email') < 0 ? '' : s.confirmEmail]
              .concat(x ? x.done(confirmBy) : [])
              .filter(Boolean)
              .join(' ');
            status.focus();
          },
          (reason) => {
            busy(false);
            // A network failure rejects with an Error, not with one of the messages above.
            fail(...((Array.isArray(reason) ? reason : [s.error]) as Complaint));
          },
        );
    });

    widgets.push(w);
  };

  // `make`: widget-platforms.js's `Restock.platform`, on other platforms than Shopify.
  const start = (make?: Restock['platform']) => {
    try {
      origin = new URL(script!.src).origin;
      const shopify = P === 'shopify';
      // What follows the platform's product form: the page's product, its variants' stock and the
      // shopper's choices (what it is handed is described in widget-platforms.ts).
      const platform = make && make(P, { select, gid, merged, widgets });
      mount(
        script!,
        (host) => {
          const target = script!.dataset.target && document.querySelector(script!.dataset.target);
          return target ? target.appendChild(host) : script!.parentNode!.insertBefore(host, script!.nextSibling);
        },
        platform,
      );
      document.querySelectorAll<MountPoint>('[data-restock-widget]').forEach((el) => {
        // The same script may be on the page more than once; each mount is taken only once.
        if (el.restockMounted) return;
        el.restockMounted = true;
        mount(el, (host) => el.appendChild(host), platform);
      });
      if (!widgets.length) return;
      if (platform) platform.follow();

      const requests: Record<string, Promise<Availability>> = {};
      const loads = widgets.map((w) => {
        const key = w.api.availability(w);
        requests[key] =
          requests[key] ||
          fetch(key, { credentials: 'omit' }).then((res) => {
            if (!res.ok) throw new Error('availability answered ' + res.status);
            return res.json();
          });
        return requests[key]!
          .then((data) => {
            w.server = data;
            w.data = merged(data, w.page, w.all);
            // The form shows with its channels.
            return w.offer();
          })
          .catch((error) => console.warn('Restock widget:', error.message));
      });
      Promise.all(loads).then(() => {
        const initial = shopify && urlVariant();
        if (!touched && initial) select(initial);
        else if (!touched && shopify && formVariant()) select(formVariant(), true);
        widgets.forEach((w) => w.render());
      });

      // Shopify's product form and ?variant=; other platforms' forms are followed by `platform`.
      if (shopify) {
        // Any element's events: only the variant field's count, and only its value is read.
        const onField = (event: Event) => {
          if (isIdField(event.target as VariantField | null)) select((event.target as VariantField).value);
        };
        // Capture, so a theme that stops these events on its own form does not hide them from us.
        document.addEventListener('change', onField, true);
        document.addEventListener('input', onField, true);
        addEventListener('popstate', () => {
          if (urlVariant()) select(urlVariant());
        });
      }
      document.addEventListener('restock:variant-change', (event) => {
        if (event.detail) select(event.detail.variantId);
      });
      // Every copy of the script listens to the event, so whichever copy defined this drives all.
      R.selectVariant = (id) => {
        document.dispatchEvent(new CustomEvent('restock:variant-change', { detail: { variantId: id } }));
      };
    } catch (error) {
      console.warn('Restock widget not started:', error);
    }
  };

  // The platform, from the tag or else the first mount element; another platform's product form
  // is followed by widget-platforms.js, loaded first.
  const begin = () => {
    // gid://<platform>/Product/<n>: its third part.
    const named = (el: HTMLElement | null) => el && (el.dataset.platform || String(el.dataset.product).split('/')[2]);
    P = (named(script) || named(document.querySelector<HTMLElement>('[data-restock-widget]')) || P).toLowerCase();
    if (P === 'shopify') start();
    else load('platformsLoading', 'platforms.js').then(() => start(R.platform));
  };

  if (!script) return console.warn('Restock widget: load it with a plain <script src> tag');
  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', begin);
  else begin();
})();
