import type { FastifyInstance } from 'fastify';
import { ValidationFailed } from '../problems.ts';

/**
 * Lets the pages of one plugin take HTML form posts whose fields carry nothing we need (a
 * button's post, or RFC 8058's fixed `List-Unsubscribe=One-Click`): the body is read and
 * dropped. Registered per plugin, so the API itself keeps accepting JSON only.
 */
export function acceptFormPosts(app: FastifyInstance): void {
  for (const type of ['application/x-www-form-urlencoded', 'multipart/form-data']) {
    app.addContentTypeParser(type, { parseAs: 'string' }, (_request, _body, done) => done(null, undefined));
  }
}

/**
 * Parses `application/x-www-form-urlencoded` bodies into fields, for a plugin whose routes read
 * them (OAuth endpoints, the claim page). A repeated field is refused (RFC 6749 §3.2); an empty
 * one counts as absent.
 */
export function parseUrlEncodedForms(app: FastifyInstance): void {
  app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string' }, (_request, body, done) => {
    const fields: Record<string, string> = {};
    for (const [name, value] of new URLSearchParams(body as string)) {
      if (Object.hasOwn(fields, name)) {
        return done(new ValidationFailed([{ pointer: `/body/${name}`, message: 'must not be repeated' }]), undefined);
      }
      if (value !== '') fields[name] = value;
    }
    done(null, fields);
  });
}

/**
 * Whether a browser sent this form post from another site: `Sec-Fetch-Site` when the browser
 * sends it (all current ones do), else `Origin` against our own. A post with neither comes from
 * a program, not a page, and no one's cookies ride along with it unasked.
 */
export function postedFromAnotherSite(headers: Record<string, string | string[] | undefined>, ownOrigin: string): boolean {
  const site = headers['sec-fetch-site'];
  if (typeof site === 'string') return site !== 'same-origin' && site !== 'none';
  const origin = headers.origin;
  if (typeof origin === 'string') return origin !== ownOrigin;
  return false;
}
