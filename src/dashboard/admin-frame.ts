// The dashboard's script inside the Shopify admin, run after App Bridge. There the dashboard is a
// third-party frame, where browsers keep no cookies, so each request proves who sends it with a
// fresh session token from App Bridge (tokens live one minute): our own links and forms fetch one
// as they are used and carry it as `id_token`, together with the admin's `embedded`, `shop` and
// `host`, so that the next page is known to be the admin's too.

/** App Bridge's global, which the page loads before this script. */
declare const shopify: { idToken(): Promise<string> };

(() => {
  'use strict';
  const ADMIN_PARAMETERS = ['embedded', 'shop', 'host'];
  const opened = new URLSearchParams(location.search);

  /** One of our own URLs, carrying the admin's parameters this page was opened with; undefined for another site's. */
  function inAdmin(address: string): URL | undefined {
    const url = new URL(address, location.href);
    if (url.origin !== location.origin) return undefined;
    for (const name of ADMIN_PARAMETERS) {
      const value = opened.get(name);
      if (value !== null && !url.searchParams.has(name)) url.searchParams.set(name, value);
    }
    return url;
  }

  function plainClick(event: MouseEvent): boolean {
    return event.button === 0 && !event.metaKey && !event.ctrlKey && !event.shiftKey && !event.altKey;
  }

  document.addEventListener('click', async (event) => {
    const link = event.target instanceof Element ? event.target.closest<HTMLAnchorElement>('a[href]') : null;
    if (!link || link.target || event.defaultPrevented || !plainClick(event)) return;
    const url = inAdmin(link.href);
    if (!url) return;
    event.preventDefault();
    url.searchParams.set('id_token', await shopify.idToken());
    location.assign(url);
  });

  // The dashboard's forms all post; the token goes in the body, out of the address bar and logs.
  document.addEventListener('submit', async (event) => {
    const form = event.target;
    if (!(form instanceof HTMLFormElement) || form.method !== 'post') return;
    if (form.dataset.signed === 'yes') {
      delete form.dataset.signed;
      return;
    }
    const url = inAdmin(form.action);
    if (!url || event.defaultPrevented) return;
    event.preventDefault();
    let field = form.querySelector<HTMLInputElement>('input[name="id_token"]');
    if (!field) {
      field = Object.assign(document.createElement('input'), { type: 'hidden', name: 'id_token' });
      form.append(field);
    }
    field.value = await shopify.idToken();
    form.action = url.toString();
    form.dataset.signed = 'yes';
    form.requestSubmit(event.submitter);
  });

  // A page that leads out of the admin's frame (Shopify's charge approval): App Bridge opens it in
  // the admin's own window, as Shopify's app templates do.
  const leave = document.querySelector<HTMLAnchorElement>('a[data-leave-admin-frame]');
  if (leave) window.open(leave.href, '_top');
})();
