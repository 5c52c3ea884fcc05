/*
 * A platform's page in the merchant dashboard (a WooCommerce store's connection to its site): the
 * dashboard lists it in its navigation for stores of that platform, signs the owner in, checks
 * each form's CSRF token and routes the forms; what the page shows and what its forms do are the
 * platform's (`Platform`'s feature offers it as `dashboardPanel`, src/platform.ts).
 */
import type { Caller } from './http/caller.ts';
import { html, type SafeHtml } from './html.ts';
import { NotFound, Problem, ValidationFailed } from './problems.ts';

/** The signed-in owner a panel serves, and the caller they are to the platform's service. */
export interface PanelOwner {
  shop: string;
  caller: Caller;
  /** A cookie session's token, which every form of the page carries (`csrfField`); none inside the Shopify admin. */
  csrfToken?: string;
}

/**
 * What a panel answers: its page (with its status), a move to a page of the dashboard (kept inside
 * the Shopify admin's frame when it is there), or a move to another site's page.
 */
export type PanelAnswer = { page: SafeHtml; status?: number } | { next: string } | { leave: string; what: string };

export interface DashboardPanel {
  /** Its name in the navigation and its page's title. */
  readonly label: string;
  /** Its path segment: the page is `/dashboard/<path>`, whose forms post there or to `/dashboard/<path>/<action>`. */
  readonly path: string;
  /** The forms' actions beside the page's own. */
  readonly actions: readonly string[];
  /** The page, given its query as the browser sent it (the panel parses what it reads). */
  show(owner: PanelOwner, query: Record<string, string>): Promise<PanelAnswer>;
  /** A form posted to the page (`action` ''), or to one of its actions; its fields as typed. */
  post(owner: PanelOwner, action: string, fields: Record<string, string | undefined>): Promise<PanelAnswer>;
}

/** Errors to show beside a form's fields, each pointing at its field (`/siteUrl`), or above them. */
export type FieldErrors = Array<{ pointer: string; message: string }>;

/** A stored ISO time as people read it: to the minute, in UTC (the dashboard runs no scripts to localise). */
export function when(iso: string | null): string {
  return iso ? `${iso.slice(0, 10)} ${iso.slice(11, 16)} UTC` : '–';
}

/** A cookie session's forms prove they are ours with its CSRF token; inside the admin the session token does. */
export function csrfField(csrf: string | undefined): SafeHtml {
  return csrf === undefined ? html`` : html`<input type="hidden" name="csrf" value="${csrf}">`;
}

/**
 * A refusal a connection form can show: bad fields or credentials the platform refused (400, the
 * service's pointers into the API's body named as the form's fields), or a platform that could
 * not be reached (502, said above the form). Anything else is not the owner's to mend.
 */
export function formRefusal(err: unknown): { status: number; errors: FieldErrors } | undefined {
  if (err instanceof ValidationFailed) return { status: 400, errors: err.errors.map((error) => ({ pointer: error.pointer.replace(/^\/body(?=\/)/, ''), message: error.message })) };
  if (err instanceof Problem && err.slug === 'upstream-failed') return { status: err.status, errors: [{ pointer: '/', message: err.detail }] };
  return undefined;
}

/** What `read` finds, or null where it finds nothing (a store never connected). */
export async function foundOrNull<T>(read: () => Promise<T>): Promise<T | null> {
  try {
    return await read();
  } catch (err) {
    if (err instanceof NotFound) return null;
    throw err;
  }
}
