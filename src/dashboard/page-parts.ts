import { html, type SafeHtml } from '../core/html.ts';

/** A stored ISO time as people read it: to the minute, in UTC (the dashboard runs no scripts to localise). */
export function when(iso: string | null): string {
  return iso ? `${iso.slice(0, 10)} ${iso.slice(11, 16)} UTC` : '–';
}

/** A cookie session's forms prove they are ours with its CSRF token; inside the admin the session token does. */
export function csrfField(csrf: string | undefined): SafeHtml {
  return csrf === undefined ? html`` : html`<input type="hidden" name="csrf" value="${csrf}">`;
}
