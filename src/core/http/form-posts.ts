import type { FastifyInstance } from 'fastify';

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
