import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { keepCapabilityPagesPrivate } from '../core/http/capability-pages.ts';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import type { z } from 'zod';
import { parseUrlEncodedForms, postedFromAnotherSite } from '../core/http/form-posts.ts';
import { Forbidden, ValidationFailed } from '../core/problems.ts';
import { cancelForm, channelForm, eraseForm, tokenParams } from './schemas.ts';
import type { ShopperPage, ShopperPageService } from './service.ts';
import type { Language } from '../core/languages.ts';
import { languageFromAcceptLanguage, STRINGS } from './strings.ts';
import { eraseConfirmBody, erasedBody, listBody, shopperPage } from './views.ts';

/**
 * The shopper's page at `/my/{token}`. The token in the path is a capability: whoever holds the
 * link may act, so every answer keeps it out of caches, referrers and search engines. GET only
 * reads (mail scanners open every link); each POST acts and sends the browser back to the page
 * (303, so a reload does not post again).
 */
export function shopperRoutes(service: ShopperPageService, pageOrigin: string) {
  return async function (app: FastifyInstance) {
    parseUrlEncodedForms(app);
    const pages = app.withTypeProvider<ZodTypeProvider>();

    // The erase button must not be clickable through another site's frame.
    keepCapabilityPagesPrivate(app, { noindex: true, unframed: true });

    /** A browser's post from another site is refused before the token is even looked at. */
    const sameSiteOnly = async (request: FastifyRequest) => {
      if (postedFromAnotherSite(request.headers, pageOrigin)) throw new Forbidden('These forms work only from the alerts page itself.');
    };

    const common = { config: { page: true } } as const;

    pages.get('/my/:token', {
      ...common,
      schema: { hide: true, params: tokenParams },
      handler: async (request, reply) => {
        const view = await service.page(await service.shopperOf(request.params.token));
        const language = languageFor(view, request);
        return sendPage(reply, language, STRINGS[language].pageTitle, listBody(view, request.params.token, language));
      },
    });

    pages.get('/my/:token/data.json', {
      ...common,
      schema: { hide: true, params: tokenParams },
      handler: async (request, reply) => {
        const data = await service.exportData(await service.shopperOf(request.params.token));
        return reply
          .type('application/json; charset=utf-8')
          .header('content-disposition', `attachment; filename="${downloadName(data.store)}"`)
          .send(JSON.stringify(data, null, 2));
      },
    });

    pages.get('/my/:token/erase', {
      ...common,
      schema: { hide: true, params: tokenParams },
      handler: async (request, reply) => {
        const view = await service.page(await service.shopperOf(request.params.token));
        const language = languageFor(view, request);
        const s = STRINGS[language];
        return sendPage(reply, language, s.eraseTitle, eraseConfirmBody(view, request.params.token, s));
      },
    });

    pages.post('/my/:token/cancel', {
      ...common,
      preHandler: sameSiteOnly,
      schema: { hide: true, params: tokenParams },
      handler: async (request, reply) => {
        const shopper = await service.shopperOf(request.params.token);
        const form = formFields(cancelForm, request.body);
        await service.cancel(shopper, form.subscription);
        return backToPage(reply, request.params.token);
      },
    });

    pages.post('/my/:token/channel', {
      ...common,
      preHandler: sameSiteOnly,
      schema: { hide: true, params: tokenParams },
      handler: async (request, reply) => {
        const shopper = await service.shopperOf(request.params.token);
        const form = formFields(channelForm, request.body);
        await service.setChannel(shopper, form.channel, form.on === '1', form.subscription);
        return backToPage(reply, request.params.token);
      },
    });

    pages.post('/my/:token/erase', {
      ...common,
      preHandler: sameSiteOnly,
      schema: { hide: true, params: tokenParams },
      handler: async (request, reply) => {
        const shopper = await service.shopperOf(request.params.token);
        formFields(eraseForm, request.body);
        // The language is read first: afterwards nothing of the shopper's is left to read it from.
        const language = languageFor(await service.page(shopper), request);
        await service.erase(shopper);
        const s = STRINGS[language];
        return sendPage(reply, language, s.erasedTitle, erasedBody(s));
      },
    });
  };
}

/** The shopper's or the store's language, else the browser's, else English. */
function languageFor(view: ShopperPage, request: FastifyRequest): Language {
  return view.language ?? languageFromAcceptLanguage(request.headers['accept-language']) ?? 'en';
}

/**
 * A form's fields, checked after the token so that a forged link answers 404 whatever its body.
 * A post without a body (a button alone, or a program) counts as no fields.
 */
function formFields<S extends z.ZodType>(schema: S, body: unknown): z.infer<S> {
  const parsed = schema.safeParse(body ?? {});
  if (parsed.success) return parsed.data;
  throw new ValidationFailed(parsed.error.issues.map((issue) => ({ pointer: `/body${issue.path.map((part) => `/${String(part)}`).join('')}`, message: issue.message })));
}

function sendPage(reply: FastifyReply, language: Language, title: string, body: Parameters<typeof shopperPage>[2]) {
  return reply.type('text/html; charset=utf-8').send(shopperPage(language, title, body));
}

/** The token was checked against its shape before any action, so it goes back into the path as it came. */
function backToPage(reply: FastifyReply, token: string) {
  return reply.redirect(`/my/${token}`, 303);
}

/** The store's domain, reduced to characters safe inside a quoted header parameter. */
function downloadName(storeDomain: string): string {
  return `restock-data-${storeDomain.replace(/[^A-Za-z0-9.-]/g, '_')}.json`;
}
