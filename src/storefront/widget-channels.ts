/*
 * Restock back-in-stock widget, channels: the choices of the sign-up form beside e-mail (a phone
 * number, this browser's notifications). widget.js loads it from beside itself (widget-channels.js
 * on the service, restock-channels.js in the theme app extension), once per page and only when the
 * service offers a channel beside e-mail; pages that offer e-mail alone never download it.
 *
 * Each channel's choice is its own folder's (`choice` in its storefront offer, src/core/channels.ts),
 * served after this part in the same file; each puts its maker in `Restock.channelChoices` under
 * the channel's name. This part registers one function, `window.Restock.channels(options)`, which
 * widget.js calls once per form with
 *   root        the form's shadow root (the choices go between the e-mail field and the button),
 *   locale      'en', 'fr', 'de' or 'es', as the form speaks,
 *   strings     the page's `data-strings` overrides (any key of a choice's wording may be overridden),
 *   sameOrigin  the service as the page's own origin reaches it, or false,
 *   channels    the availability answer's channels, each offered or not.
 * It asks each offered channel's maker for its choice, puts the choices in one row, and returns
 * the form's hooks into all of them, or nothing when none is offered in this browser. (The types:
 * ChannelHooks and ChannelsOptions in widget.ts, ChannelChoice in src/core/channel-choice.ts.)
 */
import type { ChannelChoice, ChoiceOptions, Complaint } from '../core/channel-choice.ts';
import type { ChannelHooks, ChannelsOptions } from './widget.ts';

(function () {
  'use strict';

  // The row of choices takes a row of its own in the form's flex row; `h` and `c` are the classes
  // the choices share (src/core/channel-choice.ts).
  const CSS =
    '.x{flex:1 0 100%}.h{margin-top:4px;font-size:13px;color:#4a4a4a}' +
    '.c{display:flex;gap:8px;margin:8px 0 0;font-weight:400}' +
    '[type=checkbox]{flex:none;width:20px;height:20px;margin:1px 0 0;padding:0}';

  const R = (window.Restock = window.Restock || {});

  /** The first choice's answer, in the choices' order. */
  const first = <T>(choices: ChannelChoice[], ask: (choice: ChannelChoice) => T | undefined) => {
    for (const choice of choices) {
      const answer = ask(choice);
      if (answer) return answer;
    }
  };

  R.channels = (options: ChannelsOptions): ChannelHooks | undefined => {
    const makers = R.channelChoices || {};
    const overrides = options.strings || {};
    const words: ChoiceOptions['words'] = (table) => {
      const chosen = Object.assign({}, table[options.locale] || table.en);
      Object.keys(overrides).forEach((key) => {
        if (typeof overrides[key] === 'string' && key in chosen) (chosen as Record<string, unknown>)[key] = overrides[key];
      });
      return chosen;
    };
    const choices: ChannelChoice[] = [];
    Object.keys(makers).forEach((name) => {
      const choice = options.channels[name] && makers[name]!({ locale: options.locale, words, sameOrigin: options.sameOrigin });
      if (choice) choices.push(choice);
    });
    if (!choices.length) return;

    const row = document.createElement('div');
    row.className = 'x';
    row.innerHTML = '<style>' + CSS + '</style>';
    choices.forEach((choice) => row.appendChild(choice.element));
    // The form's own button, in its row.
    const button = options.root.querySelector('button')!;
    button.parentNode!.insertBefore(row, button);

    return {
      check: () => first<Complaint>(choices, (choice) => choice.check()),
      add: (body) => Promise.all(choices.map((choice) => choice.add(body))).then(() => undefined),
      refused: (at, body) => first<Complaint | true>(choices, (choice) => choice.refused(at, body)),
      done: (confirmBy) => choices.map((choice) => choice.done(confirmBy)),
    };
  };
})();
