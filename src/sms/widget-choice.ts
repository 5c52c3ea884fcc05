/*
 * Restock back-in-stock widget, SMS's choice on the sign-up form: a mobile number with its own
 * consent box, unticked. Served in /widget-channels.js, after the widget's part that asks for it
 * (src/storefront/widget-channels.ts), when the service can text for the store. What it is handed
 * and gives back: src/core/channel-choice.ts.
 */
import type { ChannelChoiceHost, ChannelChoiceMaker } from '../core/channel-choice.ts';

/** The choice's wording; a page's `data-strings` may override any of it. */
type Wording = {
  phoneLabel: string;
  phoneHint: string;
  phoneInvalid: string;
  smsConsent: string;
  smsNeeded: string;
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
      confirmSms: 'Reply YES to the text we sent to confirm.',
    },
    fr: {
      phoneLabel: 'Numéro de mobile (facultatif)',
      phoneHint: 'Commencez par + et l’indicatif du pays, p. ex. +33 6 12 34 56 78.',
      phoneInvalid: 'Veuillez saisir un numéro de mobile commençant par + et l’indicatif du pays.',
      smsConsent: 'Prévenez-moi par SMS dès son retour en stock. Des frais de messages et de données peuvent s’appliquer. Répondez STOP pour vous désabonner.',
      smsNeeded: 'Cochez la case pour recevoir un SMS, ou laissez le numéro vide.',
      confirmSms: 'Répondez YES au SMS que nous vous avons envoyé pour confirmer.',
    },
    de: {
      phoneLabel: 'Handynummer (optional)',
      phoneHint: 'Mit + und Ländervorwahl, z. B. +49 151 23456789.',
      phoneInvalid: 'Bitte geben Sie eine Handynummer mit + und Ländervorwahl ein.',
      smsConsent: 'Schicken Sie mir eine SMS, sobald der Artikel wieder verfügbar ist. Es können Kosten für Nachrichten und Daten anfallen. Antworten Sie STOP zum Abmelden.',
      smsNeeded: 'Setzen Sie das Häkchen, um eine SMS zu erhalten, oder lassen Sie die Nummer leer.',
      confirmSms: 'Antworten Sie zur Bestätigung mit YES auf unsere SMS.',
    },
    es: {
      phoneLabel: 'Número de móvil (opcional)',
      phoneHint: 'Empieza por + y el prefijo del país, p. ej. +34 612 345 678.',
      phoneInvalid: 'Introduce un número de móvil que empiece por + y el prefijo del país.',
      smsConsent: 'Envíame un SMS cuando vuelva a estar disponible. Pueden aplicarse tarifas de mensajes y datos. Responde STOP para darte de baja.',
      smsNeeded: 'Marca la casilla para recibir un SMS o deja el número vacío.',
      confirmSms: 'Responde YES al SMS que te enviamos para confirmar.',
    },
  };

  const sms: ChannelChoiceMaker = (options) => {
    const s = options.words(STRINGS);
    // `m` is the form's own message line, which tells what is wrong with the number.
    const element = document.createElement('div');
    element.innerHTML =
      '<style>#p{width:100%}</style><label for="p"></label><input id="p" type="tel" name="phone" autocomplete="tel" inputmode="tel" aria-describedby="h m">' +
      '<p class="h" id="h"></p><label class="c"><input id="c" type="checkbox" aria-describedby="m"><span></span></label>';
    const $ = <E extends HTMLElement>(selector: string) => element.querySelector<E>(selector)!;
    $('[for=p]').textContent = s.phoneLabel;
    $('#h').textContent = s.phoneHint;
    $('#c+span').textContent = s.smsConsent;
    const field = $<HTMLInputElement>('#p');
    const box = $<HTMLInputElement>('#c');
    let phone = '';

    return {
      element,
      check: () => {
        // Spaces, dashes, dots and brackets as people write numbers; 00 as some dial the +.
        phone = field.value.replace(/[\s().-]/g, '').replace(/^00/, '+');
        if (phone ? !/^\+[1-9]\d{6,14}$/.test(phone) : box.checked) return [s.phoneInvalid, field];
        // No number is texted without the ticked box: refused here, before anything is sent.
        if (phone && !box.checked) return [s.smsNeeded, box];
      },
      add: (body) => {
        if (phone) Object.assign(body, { phone, smsConsent: true, smsConsentText: s.smsConsent });
        return undefined;
      },
      refused: (at) => (at('phone') ? [s.phoneInvalid, field] : undefined),
      done: (confirmBy) => (confirmBy.indexOf('sms') < 0 ? '' : s.confirmSms),
    };
  };

  const w = window as Window & { Restock?: ChannelChoiceHost };
  const R = (w.Restock = w.Restock || {});
  (R.channelChoices = R.channelChoices || {}).sms = sms;
})();
