import type { FastifyInstance } from 'fastify';
import { keepCapabilityPagesPrivate } from '../core/http/capability-pages.ts';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { html, page } from '../core/html.ts';
import { acceptFormPosts } from '../core/http/form-posts.ts';
import { formatPrice } from './plans.ts';
import { checkoutSessionParams } from './schemas.ts';
import type { BillingService, CheckoutView } from './service.ts';

/**
 * The owner's key travels in the query string, so that the mailed link and the page's forms
 * carry it alike. Anything that is not a key's shape is no key (the page then shows what anyone
 * may see), rather than an error on a page people open.
 */
const ownerQuery = z.object({
  owner_key: z
    .string()
    .regex(/^[A-Za-z0-9_-]{43}$/)
    .optional()
    .catch(undefined),
});

/**
 * The hosted checkout page: shows what is being bought and for which store to whoever holds the
 * URL, and lets only the store's owner act on it (their one-time key in the URL): accept or
 * decline a proposal an agent made, and complete a purchase in test mode (no money moves),
 * which activates the plan for the store.
 */
export function checkoutPages(service: BillingService) {
  return async function (app: FastifyInstance) {
    acceptFormPosts(app);
    const pages = app.withTypeProvider<ZodTypeProvider>();

    // The key is in the URL: no page may hand it on, or be kept by a cache.
    keepCapabilityPagesPrivate(app);

    pages.get('/checkout/:sessionId', {
      config: { page: true },
      schema: { hide: true, params: checkoutSessionParams, querystring: ownerQuery },
      handler: async (request, reply) => {
        const view = await service.checkoutView(request.params.sessionId, request.query.owner_key);
        return reply.type('text/html; charset=utf-8').send(page('Checkout', checkoutBody(view, service)));
      },
    });

    pages.post('/checkout/:sessionId/accept', {
      config: { page: true },
      schema: { hide: true, params: checkoutSessionParams, querystring: ownerQuery },
      handler: async (request, reply) => reply.redirect(await service.acceptProposal(request.params.sessionId, request.query.owner_key), 303),
    });

    pages.post('/checkout/:sessionId/decline', {
      config: { page: true },
      schema: { hide: true, params: checkoutSessionParams, querystring: ownerQuery },
      handler: async (request, reply) => {
        const session = await service.declineProposal(request.params.sessionId, request.query.owner_key);
        const view: CheckoutView = { session, owner: false, proposedBy: null };
        return reply.type('text/html; charset=utf-8').send(page('Proposal declined', checkoutBody(view, service)));
      },
    });

    pages.post('/checkout/:sessionId/complete', {
      config: { page: true },
      schema: { hide: true, params: checkoutSessionParams, querystring: ownerQuery },
      handler: async (request, reply) => {
        const session = await service.completeTestCheckout(request.params.sessionId, request.query.owner_key);
        const view: CheckoutView = { session, owner: false, proposedBy: null };
        return reply.type('text/html; charset=utf-8').send(page('Plan active', checkoutBody(view, service)));
      },
    });
  };
}

function checkoutBody(view: CheckoutView, service: BillingService) {
  const { session } = view;
  const plan = service.plan(session.plan);
  const price = `${formatPrice(Math.round(session.amount * 100), session.currency)} / ${plan.interval}`;
  const summary = html`<dl>
<dt>Plan</dt><dd>${plan.name} — ${plan.description}</dd>
<dt>Price</dt><dd>${price}</dd>
<dt>Store</dt><dd>${session.shop}</dd>
</dl>`;
  // Starter on a store without its own mail server holds every alert: the owner decides knowing it.
  const sending = plan.requiresOwnMailProvider
    ? html`<p>The ${plan.name} plan sends alerts only through the store’s own e-mail provider: until one is set (dashboard Settings), shoppers’ alerts wait.</p>`
    : '';
  const action = (step: string) => `/checkout/${session.sessionId}/${step}?owner_key=${view.key ?? ''}`;
  if (session.status === 'completed') {
    return html`<h1>Your plan is active</h1>${summary}<p>The ${plan.name} plan is now active for ${session.shop}.</p>`;
  }
  if (session.status === 'expired') {
    return html`<h1>This checkout has expired</h1>${summary}<p>Start a new checkout to buy this plan.</p>`;
  }
  if (session.status === 'declined') {
    return html`<h1>This proposal was declined</h1>${summary}<p>The store’s owner declined it; the store’s plan is unchanged.</p>`;
  }
  if (session.status === 'awaiting_owner') {
    if (!view.owner) {
      return html`<h1>Waiting for the store’s owner</h1>${summary}
<p>This plan was proposed for ${session.shop}. Only the store’s owner can accept it, from the link Restock e-mailed them; nothing changes and nothing is charged until they do.</p>`;
    }
    return html`<h1>A plan is proposed for your store</h1>${summary}
<p>An agent${view.proposedBy ? html` (<code>${view.proposedBy}</code>)` : ''} proposes this plan. Nothing changes and nothing is charged unless you accept it.</p>
${sending}
<form method="post" action="${action('accept')}"><button type="submit">Accept and continue to payment</button></form>
<form method="post" action="${action('decline')}"><button class="quiet" type="submit">Decline</button></form>`;
  }
  if (session.provider !== 'local') {
    // Paid at Stripe or through app billing: their webhook activates the plan, not this page.
    return html`<h1>Waiting for the payment</h1>${summary}
<p>The purchase is completed at ${service.providerLabel(session.provider)}; the plan becomes active as soon as they confirm it.</p>
<p><a href="${session.checkoutUrl}">Continue to the payment page</a></p>`;
  }
  if (!view.owner) {
    return html`<h1>Waiting for the store’s owner</h1>${summary}
<p>Only the store’s owner completes this purchase, from the link they were given.</p>`;
  }
  return html`<h1>Confirm your plan</h1>${summary}
${sending}
<p class="muted">Test mode: no payment is taken. Completing activates the plan for this store.</p>
<form method="post" action="${action('complete')}"><button type="submit">Complete test purchase</button></form>`;
}
