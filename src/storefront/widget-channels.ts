/*
 * Restock back-in-stock widget, channels: the SMS and "notify me in this browser" choices of the
 * sign-up form. widget.js loads it from beside itself (widget-channels.js on the service,
 * restock-channels.js in the theme app extension), once per page and only when the service offers
 * SMS or push; pages that offer e-mail alone never download it.
 *
 * It registers one function, `window.Restock.channels(options)`, which widget.js calls once per
 * form with
 *   root      the form's shadow root (the choices go between the e-mail field and the button),
 *   locale    'en', 'fr', 'de' or 'es', as the form speaks,
 *   strings   the page's `data-strings` overrides (any key of STRINGS below may be overridden),
 *   push      where the service worker and the VAPID key are (false where push cannot work),
 *   channels  the availability answer's `{ sms, push }`.
 * It renders the choices and returns the form's hooks, or nothing when there is nothing to offer:
 *   check()          before sending: [message, field] when the choices are not right
 *   add(body)        fills the sign-up's fields; a promise (asking for notifications takes a while)
 *   refused(at, body) the service refused the sign-up (`at(name)`: a problem points at that field):
 *                    [message, field] for the shopper to fix, or true when `body` is to be sent again
 *   done(confirmBy)  the messages to add to the confirmation
 * (The types of both: ChannelsOptions and ChannelHooks in widget.ts.)
 */
import type { ChannelHooks, ChannelsOptions } from './widget.ts';

/** The choices' wording; a page's `data-strings` may override any of it. */
type Wording = {
  phoneLabel: string;
  phoneHint: string;
  phoneInvalid: string;
  smsConsent: string;
  smsNeeded: string;
  push: string;
  pushFailed: string;
  confirmSms: string;
};

(function () {
  'use strict';

  const STRINGS: Record<string, Wording> = {
    en: {
      phoneLabel: 'Mobile number (optional)',
      phoneHint: 'Start with + and the country code, e.g. +1 555 555 0123.',
      phoneInvalid: 'Please enter a mobile number starting with + and the country code.',
      smsConsent: 'Text me when it’s back in stock. Msg & data rates may apply. Reply STOP to opt out.',
      smsNeeded: 'Tick the box to get a text, or leave the number empty.',
      push: 'Also notify me in this browser',
      pushFailed: 'Notifications could not be turned on in this browser.',
      confirmSms: 'Reply YES to the text we sent to confirm.',
    },
    fr: {
      phoneLabel: 'Numéro de mobile (facultatif)',
      phoneHint: 'Commencez par + et l’indicatif du pays, p. ex. +33 6 12 34 56 78.',
      phoneInvalid: 'Veuillez saisir un numéro de mobile commençant par + et l’indicatif du pays.',
      smsConsent: 'Prévenez-moi par SMS dès son retour en stock. Des frais de messages et de données peuvent s’appliquer. Répondez STOP pour vous désabonner.',
      smsNeeded: 'Cochez la case pour recevoir un SMS, ou laissez le numéro vide.',
      push: 'Me prévenir aussi dans ce navigateur',
      pushFailed: 'Les notifications n’ont pas pu être activées dans ce navigateur.',
      confirmSms: 'Répondez YES au SMS que nous vous avons envoyé pour confirmer.',
    },
    de: {
      phoneLabel: 'Handynummer (optional)',
      phoneHint: 'Mit + und Ländervorwahl, z. B. +49 151 23456789.',
      phoneInvalid: 'Bitte geben Sie eine Handynummer mit + und Ländervorwahl ein.',
      smsConsent: 'Schicken Sie mir eine SMS, sobald der Artikel wieder verfügbar ist. Es können Kosten für Nachrichten und Daten anfallen. Antworten Sie STOP zum Abmelden.',
      smsNeeded: 'Setzen Sie das Häkchen, um eine SMS zu erhalten, oder lassen Sie die Nummer leer.',
      push: 'Auch in diesem Browser benachrichtigen',
      pushFailed: 'Benachrichtigungen konnten in diesem Browser nicht aktiviert werden.',
      confirmSms: 'Antworten Sie zur Bestätigung mit YES auf unsere SMS.',
    },
    es: {
      phoneLabel: 'Número de móvil (opcional)',
      phoneHint: 'Empieza por + y el prefijo del país, p. ej. +34 612 345 678.',
      phoneInvalid: 'Introduce un número de móvil que empiece por + y el prefijo del país.',
      smsConsent: 'Envíame un SMS cuando vuelva a estar disponible. Pueden aplicarse tarifas de mensajes y datos. Responde STOP para darte de baja.',
      smsNeeded: 'Marca la casilla para recibir un SMS o deja el número vacío.',
      push: 'Avisarme también en este navegador',
      pushFailed: 'No se pudieron activar las notificaciones en este navegador.',
      confirmSms: 'Responde YES al SMS que te enviamos para confirmar.',
    },
  };

  // The choices take a row of their own in the form's flex row, between the e-mail field and the button.
  const CSS =
    '.x{flex:1 0 100%}#p{width:100%}.h{margin-top:4px;font-size:13px;color:#4a4a4a}' +
    '.c{display:flex;gap:8px;margin:8px 0 0;font-weight:400}' +
    '[type=checkbox]{flex:none;width:20px;height:20px;margin:1px 0 0;padding:0}';

  // "Notify me in this browser": the worker's own registration (its scope, under /push/, is not
  // the product page's, so `serviceWorker.ready` would never resolve), activated, then subscribed
  // with the service's VAPID key. Permission is asked first, while the click still counts as the
  // shopper's gesture (Safari asks for nothing otherwise).
  // Not offered where it cannot work, nor once the shopper has blocked notifications for the site.
  const canPush = (root: string | false) =>
    root && window.isSecureContext && window.PushManager && window.Notification && Notification.permission != 'denied' && navigator.serviceWorker;

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

  const subscribePush = (root: string) =>
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

  const offer = (options: ChannelsOptions): ChannelHooks | undefined => {
    const root = options.root;
    const sms = options.channels.sms;
    const push = canPush(options.push) && options.channels.push;
    if (!sms && !push) return;
    const s = Object.assign({}, STRINGS[options.locale] || STRINGS.en);
    const overrides = options.strings || {};
    Object.keys(overrides).forEach((key) => {
      if (typeof overrides[key] === 'string' && key in s) (s as Record<string, string>)[key] = overrides[key] as string;
    });

    // A phone number with its own consent box (unticked), and this browser's notifications.
    const extras = document.createElement('div');
    extras.className = 'x';
    extras.innerHTML =
      '<style>' + CSS + '</style>' +
      (sms
        ? '<label for="p"></label><input id="p" type="tel" name="phone" autocomplete="tel" inputmode="tel" aria-describedby="h m">' +
          '<p class="h" id="h"></p><label class="c"><input id="c" type="checkbox" aria-describedby="m"><span></span></label>'
        : '') +
      (push ? '<label class="c"><input id="w" type="checkbox"><span></span></label>' : '');
    const $ = <E extends HTMLElement>(selector: string) => extras.querySelector<E>(selector);
    const text = (selector: string, value: string) => {
      const el = $(selector);
      if (el) el.textContent = value;
    };
    text('[for=p]', s.phoneLabel);
    text('#h', s.phoneHint);
    text('#c+span', s.smsConsent);
    text('#w+span', s.push);
    // The form's own button, in its row.
    const button = root.querySelector('button')!;
    button.parentNode!.insertBefore(extras, button);

    const phoneField = $<HTMLInputElement>('#p');
    const box = $<HTMLInputElement>('#c');
    const pushBox = $<HTMLInputElement>('#w');
    let phone = '';
    let pushFailed = false;

    return {
      check: () => {
        // Spaces, dashes, dots and brackets as people write numbers; 00 as some dial the +.
        phone = phoneField ? phoneField.value.replace(/[\s().-]/g, '').replace(/^00/, '+') : '';
        if (phone ? !/^\+[1-9]\d{6,14}$/.test(phone) : box && box.checked) return [s.phoneInvalid, phoneField];
        // No number is texted without the ticked box: refused here, before anything is sent.
        // A number means the SMS choice, with its box, is there.
        if (phone && !box!.checked) return [s.smsNeeded, box];
      },
      // Whatever goes wrong with notifications (refused, unsupported, no network), the e-mail
      // and SMS sign-up is still sent, and the shopper is told.
      add: (body) => {
        pushFailed = false;
        if (phone) Object.assign(body, { phone, smsConsent: true, smsConsentText: s.smsConsent });
        if (pushBox && pushBox.checked) {
          // The box is there only where push can work.
          return subscribePush(options.push as string).then(
            (subscription) => {
              body.push = subscription;
            },
            () => {
              pushFailed = true;
            },
          );
        }
      },
      refused: (at, body) => {
        if (at('phone')) return [s.phoneInvalid, phoneField];
        // A browser's subscription the service will not take must not cost the e-mail sign-up.
        if (body.push && at('push')) {
          delete body.push;
          return (pushFailed = true);
        }
      },
      done: (confirmBy) => [confirmBy.indexOf('sms') < 0 ? '' : s.confirmSms, pushFailed ? s.pushFailed : ''],
    };
  };

  (window.Restock = window.Restock || {}).channels = offer;
})();
