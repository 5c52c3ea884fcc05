/*
 * Restock back-in-stock widget, push's choice on the sign-up form: "also notify me in this
 * browser". Served in /widget-channels.js, after the widget's part that asks for it
 * (src/storefront/widget-channels.ts), when the store offers push. What it is handed and gives
 * back: src/core/channel-choice.ts.
 */
import type { ChannelChoiceHost, ChannelChoiceMaker } from '../core/channel-choice.ts';

/** The choice's wording; a page's `data-strings` may override any of it. */
type Wording = {
  push: string;
  pushFailed: string;
};

(function () {
  'use strict';

  const STRINGS: Record<string, Wording> = {
    en: { push: 'Also notify me in this browser', pushFailed: 'Notifications could not be turned on in this browser.' },
    fr: { push: 'Me prévenir aussi dans ce navigateur', pushFailed: 'Les notifications n’ont pas pu être activées dans ce navigateur.' },
    de: { push: 'Auch in diesem Browser benachrichtigen', pushFailed: 'Benachrichtigungen konnten in diesem Browser nicht aktiviert werden.' },
    es: { push: 'Avisarme también en este navegador', pushFailed: 'No se pudieron activar las notificaciones en este navegador.' },
  };

  const activated = (registration: ServiceWorkerRegistration) =>
    registration.active ||
    new Promise<void>((resolve, reject) => {
      // Not active yet: installing, or installed and waiting.
      const worker = (registration.installing || registration.waiting)!;
      worker.addEventListener('statechange', () => {
        if (worker.state === 'activated') resolve();
        if (worker.state === 'redundant') reject();
      });
    });

  // The worker's own registration (its scope, under /push/, is not the product page's, so
  // `serviceWorker.ready` would never resolve), activated, then subscribed with the service's
  // VAPID key. Permission is asked first, while the click still counts as the shopper's gesture
  // (Safari asks for nothing otherwise).
  const subscribe = (root: string) =>
    Notification.requestPermission()
      .then((permission) => {
        if (permission !== 'granted') throw permission;
        return Promise.all([
          navigator.serviceWorker.register(root + '/push/sw.js').then((registration) => Promise.resolve(activated(registration)).then(() => registration)),
          fetch(root + '/push/v1/key', { credentials: 'omit' }).then((res): Promise<{ publicKey: string }> => res.json()),
        ]);
      })
      .then(([registration, key]) =>
        registration.pushManager.subscribe({
          userVisibleOnly: true,
          applicationServerKey: Uint8Array.from(atob(key.publicKey.replace(/-/g, '+').replace(/_/g, '/')), (c) => c.charCodeAt(0)),
        }),
      )
      .then((subscription) => subscription.toJSON());

  const push: ChannelChoiceMaker = (options) => {
    const root = options.sameOrigin;
    // A service worker must come from the page's own origin. Not offered where it cannot work,
    // nor once the shopper has blocked notifications for the site.
    if (!root || !window.isSecureContext || !window.PushManager || !window.Notification || Notification.permission == 'denied' || !navigator.serviceWorker) return;
    const s = options.words(STRINGS);
    const element = document.createElement('label');
    element.className = 'c';
    element.innerHTML = '<input id="w" type="checkbox"><span></span>';
    element.lastChild!.textContent = s.push;
    const box = element.firstChild as HTMLInputElement;
    let failed = false;

    return {
      element,
      check: () => undefined,
      // Whatever goes wrong with notifications (refused, unsupported, no network), the rest of the
      // sign-up is still sent, and the shopper is told.
      add: (body) => {
        failed = false;
        if (!box.checked) return;
        return subscribe(root).then(
          (subscription) => {
            body.push = subscription;
          },
          () => {
            failed = true;
          },
        );
      },
      // A browser's subscription the service will not take must not cost the rest of the sign-up.
      refused: (at, body) => {
        if (!body.push || !at('push')) return;
        delete body.push;
        return (failed = true);
      },
      done: () => (failed ? s.pushFailed : ''),
    };
  };

  const w = window as Window & { Restock?: ChannelChoiceHost };
  const R = (w.Restock = w.Restock || {});
  (R.channelChoices = R.channelChoices || {}).push = push;
})();
