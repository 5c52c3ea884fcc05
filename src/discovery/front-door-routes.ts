import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { NotFound } from '../core/problems.ts';
import { SKILLS_PATH, skillsIndex, type Skill } from './agent-skills.ts';
import { API_CATALOG_TYPE, apiCatalog, frontDoorLinks, llmsTxt, robotsTxt, sitemapUrls, sitemapXml } from './crawler-documents.ts';
import { toHtml, toMarkdown, type Document } from './document.ts';
import { apiReference, frontDoor, type FrontDoorOptions } from './front-door.ts';
import type { IndexedOperation } from './routes.ts';

export interface FrontDoorRouteOptions extends FrontDoorOptions {
  operations: IndexedOperation[];
  skills: Skill[];
}

const PUBLIC_CACHE = 'public, max-age=300';

/**
 * The front door, for people and agents alike: `/` and `/docs` (HTML, or Markdown when asked
 * for), robots.txt, sitemap.xml, llms.txt, the RFC 9727 API catalog and the agent skills. Every
 * one is built from the same configuration and routes that serve the API.
 */
export function frontDoorRoutes(o: FrontDoorRouteOptions) {
  const home = frontDoor(o);
  // Built on first use: the operations are all known only once every feature has registered.
  let docs: Document | undefined;
  const links = frontDoorLinks(o.baseUrl);
  const skillsByName = new Map(o.skills.map((skill) => [skill.name, skill]));

  return async function (app: FastifyInstance) {
    const text = (path: string, type: string, build: () => string) =>
      app.get(path, { schema: { hide: true } }, async (_request, reply) =>
        reply.type(type).header('cache-control', PUBLIC_CACHE).header('access-control-allow-origin', '*').send(build()),
      );

    app.get('/', { schema: { hide: true } }, async (request, reply) => sendDocument(request, reply.header('link', links), home));
    app.get('/docs', { schema: { hide: true } }, async (request, reply) => sendDocument(request, reply.header('link', links), (docs ??= apiReference(o, o.operations))));

    const robots = robotsTxt(o.baseUrl);
    const sitemap = sitemapXml(sitemapUrls(o.baseUrl, o.skills.map((skill) => skill.url)));
    const llms = llmsTxt(o);
    text('/robots.txt', 'text/plain; charset=utf-8', () => robots);
    text('/sitemap.xml', 'application/xml; charset=utf-8', () => sitemap);
    text('/llms.txt', 'text/plain; charset=utf-8', () => llms);

    // A Buffer: Fastify appends a charset to string JSON bodies, which this media type does not take.
    const catalog = Buffer.from(JSON.stringify(apiCatalog(o.baseUrl)));
    // GET and HEAD (which Fastify derives from GET); RFC 9727 wants the Link header on both.
    app.get('/.well-known/api-catalog', { schema: { hide: true } }, async (_request, reply) =>
      reply
        .header('content-type', API_CATALOG_TYPE)
        .header('link', `<${o.baseUrl}/.well-known/api-catalog>; rel="api-catalog"`)
        .header('cache-control', PUBLIC_CACHE)
        .header('access-control-allow-origin', '*')
        .send(catalog),
    );

    const index = JSON.stringify(skillsIndex(o.skills));
    text(`${SKILLS_PATH}/index.json`, 'application/json; charset=utf-8', () => index);
    app.withTypeProvider<ZodTypeProvider>().get(`${SKILLS_PATH}/:name/SKILL.md`, {
      schema: { hide: true, params: z.object({ name: z.string().max(64) }) },
      handler: async (request, reply) => {
        const skill = skillsByName.get(request.params.name);
        if (!skill) throw new NotFound(`No skill ${request.params.name}; the list is at ${o.baseUrl}${SKILLS_PATH}/index.json.`);
        // The bytes the index's digest was taken of, exactly.
        return reply.type('text/markdown; charset=utf-8').header('cache-control', PUBLIC_CACHE).header('access-control-allow-origin', '*').send(skill.body);
      },
    });
  };
}

function sendDocument(request: FastifyRequest, reply: FastifyReply, doc: Document) {
  reply.header('vary', 'accept').header('cache-control', PUBLIC_CACHE);
  if (prefersMarkdown(request.headers.accept)) return reply.type('text/markdown; charset=utf-8').send(toMarkdown(doc));
  return reply.type('text/html; charset=utf-8').send(toHtml(doc));
}

/** Markdown when the client ranks `text/markdown` at least as high as HTML (agents ask for it). */
function prefersMarkdown(accept: string | undefined): boolean {
  if (!accept) return false;
  let markdown = 0;
  let htmlQ = 0;
  for (const range of accept.split(',')) {
    const [type, ...params] = range.trim().toLowerCase().split(';');
    const qParam = params.map((p) => p.trim()).find((p) => p.startsWith('q='));
    const q = qParam ? Number(qParam.slice(2)) || 0 : 1;
    if (type === 'text/markdown') markdown = Math.max(markdown, q);
    if (type === 'text/html') htmlQ = Math.max(htmlQ, q);
  }
  return markdown > 0 && markdown >= htmlQ;
}
