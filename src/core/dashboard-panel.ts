/*
 * A connection's page in the merchant dashboard (a WooCommerce store's connection to its site, a
 * store's Klaviyo account): the dashboard lists it in its navigation (a platform's for stores of
 * that platform, `dashboardPanel` in src/platform.ts; the others for every store), signs the owner
 * in, checks each form's CSRF token and routes the forms; what the page shows and what its forms
 * do are the panel's.
 */
import { z } from 'zod';
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

/** A form of a panel: the owner and the fields as typed in, the panel's answer out. */
export type PanelForm = (owner: PanelOwner, fields: Record<string, string | undefined>) => Promise<PanelAnswer>;

/**
 * A connection's page: its `?done=` (what a form just did, one of `done`) is read before the page
 * is shown, and each form posts to its action ('' for the page itself).
 */
export function connectionPanel<Done extends string>(page: {
  label: string;
  path: string;
  done: readonly [Done, ...Done[]];
  forms: Record<string, PanelForm>;
  shown(owner: PanelOwner, state: { done?: Done }): Promise<PanelAnswer>;
}): DashboardPanel {
  const query = z.object({ done: z.enum(page.done).optional() });
  return {
    label: page.label,
    path: page.path,
    actions: Object.keys(page.forms).filter(Boolean),
    async show(owner, given) {
      const parsed = query.safeParse(given);
      if (!parsed.success) throw new ValidationFailed([{ pointer: '/query/done', message: `must be ${page.done.join(' or ')}` }]);
      const done = parsed.data.done as Done | undefined;
      return page.shown(owner, done ? { done } : {});
    },
    post(owner, action, fields) {
      const form = Object.hasOwn(page.forms, action) ? page.forms[action] : undefined;
      if (!form) throw new NotFound(`The ${page.label} page has no form ${action}.`);
      return form(owner, fields);
    },
  };
}
