import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { html, page } from '../core/html.ts';
import { acceptFormPosts } from '../core/http/form-posts.ts';
import { NotFound } from '../core/problems.ts';
import type { SubscriptionRow } from './repository.ts';
import type { SubscriptionService } from './service.ts';

const tokenParams = z.object({ token: z.string().regex(/^[A-Za-z0-9_.-]{1,256}$/, 'must be a confirmation token') });
const FORGED = 'This confirmation link is not valid. Use the link from the confirmation e-mail.';

/**
 * Double opt-in's link. GET shows a button and changes nothing, because mail scanners open
 * links (a scanner must not confirm for the shopper); POST confirms.
 */
export function confirmRoutes(service: SubscriptionService) {
  return async function (app: FastifyInstance) {
    acceptFormPosts(app);
    const pages = app.withTypeProvider<ZodTypeProvider>();

    pages.get('/confirm/:token', {
      config: { page: true },
      schema: { hide: true, params: tokenParams },
      handler: async (request, reply) => {
        const row = await service.subscriptionForConfirmToken(request.params.token);
        if (!row) throw new NotFound(FORGED);
        const body =
          row.status === 'pending'
            ? html`<h1>Confirm your alert</h1>
<p>${row.store_domain ?? 'The store'} will e-mail <strong>${row.email}</strong> once, when the product you asked about is back in stock.</p>
<form method="post"><button type="submit">Yes, alert me</button></form>`
            : outcome(row);
        return reply.type('text/html; charset=utf-8').send(page('Confirm your alert', body));
      },
    });

    pages.post('/confirm/:token', {
      config: { page: true },
      schema: { hide: true, params: tokenParams },
      handler: async (request, reply) => {
        const row = await service.confirmSubscription(request.params.token);
        if (!row) throw new NotFound(FORGED);
        return reply.type('text/html; charset=utf-8').send(page('Alert confirmed', outcome(row)));
      },
    });
  };
}

function outcome(row: SubscriptionRow) {
  const manage = html`<p>You can see and change your alerts from the link in any of our messages.</p>`;
  switch (row.status) {
    case 'active':
    case 'notified':
      return html`<h1>Your alert is confirmed</h1><p>We will write to <strong>${row.email}</strong> when it is back.</p>${manage}`;
    case 'expired':
      return html`<h1>This request has expired</h1><p>It was not confirmed in time. Ask again on the product page.</p>`;
    default:
      return html`<h1>This alert has ended</h1><p>Nothing will be sent for it.</p>`;
  }
}
