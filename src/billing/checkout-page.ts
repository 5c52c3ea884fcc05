import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { html, page } from '../core/html.ts';
import { acceptFormPosts } from '../core/http/form-posts.ts';
import { formatPrice, type Plan } from './plans.ts';
import { checkoutSessionParams, type CheckoutSession } from './schemas.ts';
import type { BillingService } from './service.ts';

/**
 * The hosted checkout page of the embedded default: shows what is being bought and completes
 * the purchase in test mode (no money moves), which activates the plan for the store.
 */
export function checkoutPages(service: BillingService) {
  return async function (app: FastifyInstance) {
    acceptFormPosts(app);
    const pages = app.withTypeProvider<ZodTypeProvider>();

    pages.get('/checkout/:sessionId', {
      config: { page: true },
      schema: { hide: true, params: checkoutSessionParams },
      handler: async (request, reply) => {
        const session = await service.getCheckoutSession(request.params.sessionId);
        return reply.type('text/html; charset=utf-8').send(page('Checkout', checkoutBody(session, service.plan(session.plan))));
      },
    });

    pages.post('/checkout/:sessionId/complete', {
      config: { page: true },
      schema: { hide: true, params: checkoutSessionParams },
      handler: async (request, reply) => {
        const session = await service.completeTestCheckout(request.params.sessionId);
        return reply.type('text/html; charset=utf-8').send(page('Plan active', checkoutBody(session, service.plan(session.plan))));
      },
    });
  };
}

function checkoutBody(session: CheckoutSession, plan: Plan) {
  const price = `${formatPrice(Math.round(session.amount * 100), session.currency)} / ${plan.interval}`;
  const summary = html`<dl>
<dt>Plan</dt><dd>${plan.name} — ${plan.description}</dd>
<dt>Price</dt><dd>${price}</dd>
<dt>Store</dt><dd>${session.shop}</dd>
</dl>`;
  if (session.status === 'completed') {
    return html`<h1>Your plan is active</h1>${summary}<p>The ${plan.name} plan is now active for ${session.shop}.</p>`;
  }
  if (session.status === 'expired') {
    return html`<h1>This checkout has expired</h1>${summary}<p>Start a new checkout to buy this plan.</p>`;
  }
  if (session.provider !== 'local') {
    // Paid at Stripe or Shopify: their webhook activates the plan, not this page.
    return html`<h1>Waiting for the payment</h1>${summary}
<p>The purchase is completed at ${session.provider === 'shopify' ? 'Shopify' : 'Stripe'}; the plan becomes active as soon as they confirm it.</p>
<p><a href="${session.checkoutUrl}">Continue to the payment page</a></p>`;
  }
  return html`<h1>Confirm your plan</h1>${summary}
<p class="muted">Test mode: no payment is taken. Completing activates the plan for this store.</p>
<form method="post" action="/checkout/${session.sessionId}/complete"><button type="submit">Complete test purchase</button></form>`;
}
