/*
 * What the storefront widget and a channel's choice on its sign-up form say to each other in the
 * shopper's browser (types only: nothing here reaches the browser). A channel's folder ships the
 * script (`StorefrontOffer.choice`, src/core/channels.ts); the service serves every one in
 * `/widget-channels.js`, after the widget's part that asks each for its choice and joins them into
 * one row of the form.
 */

/** A message for the shopper, and the field at fault (focused), if any. */
export type Complaint = [message: string, field?: HTMLElement | null];

/** The sign-up body the form posts; a choice adds its channel's fields. */
export type SignUpFields = Record<string, unknown>;

/** What the widget hands a channel's choice, once per form, when the service offers the channel. */
export interface ChoiceOptions {
  /** The form's language: 'en', 'fr', 'de' or 'es'. */
  locale: string;
  /** The choice's wording in the form's language, with the page's `data-strings` overrides of its keys. */
  words<W extends object>(table: Record<string, W>): W;
  /**
   * The service as the page's own origin reaches it (Shopify's app proxy, or a page of the service
   * itself), for what must come from that origin (a service worker); false on any other page.
   */
  sameOrigin: string | false;
}

/**
 * A channel's choice on the form. Its element goes in the form's row of choices, between the
 * e-mail field and the button, in the form's shadow root, where these classes are styled: `h` a
 * hint under a field, `c` a checkbox with its label.
 */
export interface ChannelChoice {
  element: HTMLElement;
  /** Before sending: what is not right with the choice, if anything. */
  check(): Complaint | undefined;
  /** Adds the channel's fields to the body; a promise when that takes a while (asking for notifications). */
  add(body: SignUpFields): Promise<void> | undefined;
  /**
   * The service refused the sign-up (`at(name)`: a problem points at that field): a complaint for
   * the shopper to fix, true when the choice took its fields out of `body` and it is to be sent
   * again, or nothing when the refusal is not the choice's.
   */
  refused(at: (name: string) => boolean, body: SignUpFields): Complaint | true | undefined;
  /** What to add to the confirmation, given the channels the service says are still to confirm. */
  done(confirmBy: string[]): string;
}

/** Nothing when the choice cannot be offered in this browser. */
export type ChannelChoiceMaker = (options: ChoiceOptions) => ChannelChoice | undefined;

/** Where a channel's script puts its maker, by the channel's name: `window.Restock.channelChoices`. */
export interface ChannelChoiceHost {
  channelChoices?: Record<string, ChannelChoiceMaker>;
}
