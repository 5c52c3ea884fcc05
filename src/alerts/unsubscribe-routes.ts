import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { html, page } from '../core/html.ts';
import { acceptFormPosts } from '../core/http/form-posts.ts';
import { NotFound } from '../core/problems.ts';
import type { SubscriptionService } from './service.ts';

const tokenParams = z.object({ token: z.string().regex(/^[A-Za-z0-9_.-]{1,256}$/, 'must be an unsubscribe token') });
const FORGED = 'This unsubscribe link is not valid. Use the link from your most recent alert e-mail.';

/**
 * One-click unsubscribe. GET shows a page with a button and changes nothing, because mail
 * scanners open links; POST unsubscribes, either from that button or straight from the mail
 * client (RFC 8058: `List-Unsubscribe=One-Click`, no cookies, no login).
 */
export function unsubscribeRoutes(service: SubscriptionService) {
  return async function (app: FastifyInstance) {
    // Mail clients post RFC 8058's one-click body in either form encoding.
    acceptFormPosts(app);
    const pages = app.withTypeProvider<ZodTypeProvider>();

    pages.get('/unsubscribe/:token', {
      config: { page: true },
      schema: { hide: true, params: tokenParams },
      handler: async (request, reply) => {
        const row = await service.subscriptionForToken(request.params.token);
        if (!row) throw new NotFound(FORGED);
        const body =
          row.status === 'active'
            ? html`<h1>Stop this alert?</h1>
<p>You asked to hear when a product is back in stock, at <strong>${row.email}</strong>.</p>
<form method="post"><button type="submit">Unsubscribe</button></form>`
            : html`<h1>You are unsubscribed</h1><p>No alert will be sent to <strong>${row.email}</strong> for this product.</p>`;
        return reply.type('text/html; charset=utf-8').send(page('Unsubscribe', body));
      },
    });

    pages.post('/unsubscribe/:token', {
      config: { page: true },
      schema: { hide: true, params: tokenParams },
      handler: async (request, reply) => {
        const row = await service.unsubscribe(request.params.token);
        if (!row) throw new NotFound(FORGED);
        const body = html`<h1>You are unsubscribed</h1><p>No alert will be sent to <strong>${row.email}</strong> for this product.</p>`;
        return reply.type('text/html; charset=utf-8').send(page('Unsubscribed', body));
      },
    });
  };
}
