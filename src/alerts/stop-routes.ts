import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { contactPointKind, type ContactChannel } from '../channels.ts';
import { html, page } from '../core/html.ts';
import { keepCapabilityPagesPrivate } from '../core/http/capability-pages.ts';
import { acceptFormPosts } from '../core/http/form-posts.ts';
import { NotFound } from '../core/problems.ts';
import type { SubscriptionService } from './service.ts';

const tokenParams = z.object({ token: z.string().regex(/^[A-Za-z0-9_.-]{1,256}$/, 'must be a stop token') });
const FORGED = 'This link is not valid. Use the button of your most recent alert.';

/**
 * A browser's own way out, the second button of its push notifications. The link covers that one
 * browser's alert and nothing else: no e-mail, no other channel, no other alert, because a
 * browser added by a sign-up proves only itself. GET asks and changes nothing; POST stops.
 */
export function stopRoutes(service: SubscriptionService) {
  return async function (app: FastifyInstance) {
    acceptFormPosts(app);
    keepCapabilityPagesPrivate(app, { noindex: true, unframed: true });
    const pages = app.withTypeProvider<ZodTypeProvider>();

    pages.get('/stop/:token', {
      config: { page: true },
      schema: { hide: true, params: tokenParams },
      handler: async (request, reply) => {
        const point = await service.contactPointForStopToken(request.params.token);
        if (!point) throw new NotFound(FORGED);
        const body =
          point.status === 'active' || point.status === 'pending'
            ? html`<h1>Stop these alerts?</h1>
<p>This ${what(point.channel)} will no longer be told when this product is back in stock${point.store_domain ? html` at <strong>${point.store_domain}</strong>` : ''}.</p>
<form method="post"><button type="submit">Stop</button></form>`
            : stoppedBody(point.channel);
        return reply.type('text/html; charset=utf-8').send(page('Stop alerts', body));
      },
    });

    pages.post('/stop/:token', {
      config: { page: true },
      schema: { hide: true, params: tokenParams },
      handler: async (request, reply) => {
        const point = await service.stopContactPoint(request.params.token);
        if (!point) throw new NotFound(FORGED);
        return reply.type('text/html; charset=utf-8').send(page('Alerts stopped', stoppedBody(point.channel)));
      },
    });
  };
}

function what(channel: ContactChannel): string {
  return contactPointKind(channel).device;
}

function stoppedBody(channel: ContactChannel) {
  return html`<h1>Alerts stopped</h1><p>This ${what(channel)} will get no more alerts for this product.</p>`;
}
