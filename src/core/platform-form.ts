/*
 * What the storefront widget and a platform's product-form script say to each other in the
 * shopper's browser (types only: nothing here reaches the browser). A platform's folder ships the
 * script (`Platform.widgetForm`, src/platform.ts); the service serves every one in
 * `/widget-platforms.js`, after the widget's part that hands them these tools.
 */

/** A variant's stock as the page tells it, by the platform's own number. */
export interface PageVariant {
  id: string | number;
  soldOut: boolean;
}

/** What the widget gives a platform's form. */
export interface FormTools {
  /** The shopper's variant choice (the platform's number; null: no complete choice); `onlyUnset` for the form's state at load, which the tag's data-variant wins over. */
  select(id: string | null | undefined, onlyUnset?: boolean): void;
  /** What the page tells of a product's stock: its variants and, when it says, whether all are sold out. Later news of a variant replaces earlier. */
  learn(product: string, list: PageVariant[], all?: boolean | null): void;
  /** The number of the first widget's product: the one whose form is followed (asked only in `follow`). */
  followed(): string;
}

/** A platform's product form, as its script follows it. */
export interface PlatformForm {
  /** The product the page shows (its number), or null. */
  product(): string | null;
  /** Starts following the form of the first widget's product. */
  follow(): void;
}

export type PlatformFormMaker = (tools: FormTools) => PlatformForm;

/** Where a platform's script puts its maker, by the platform's name: `window.Restock.platformForms`. */
export interface PlatformFormHost {
  platformForms?: Record<string, PlatformFormMaker>;
}
