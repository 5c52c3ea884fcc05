import { escapeHtml } from '../core/html.ts';
import { publicUrls } from './front-door.ts';

/**
 * AI crawlers named in robots.txt, each given the same rules as everyone: named so that an
 * operator reading the file (and a scanner) sees they were considered, not forgotten.
 */
const AI_USER_AGENTS = [
  'GPTBot',
  'OAI-SearchBot',
  'ChatGPT-User',
  'ClaudeBot',
  'Claude-SearchBot',
  'Claude-User',
  'anthropic-ai',
  'Google-Extended',
  'Applebot-Extended',
  'PerplexityBot',
  'Perplexity-User',
  'CCBot',
  'Amazonbot',
  'Meta-ExternalAgent',
  'cohere-ai',
  'Bytespider',
  'MistralAI-User',
  'DuckAssistBot',
];

/**
 * Search and answers grounded in these pages are welcome (they are how agents find the API);
 * training on them is not granted. Repeated in every group: a named group replaces `*` for
 * its crawlers (RFC 9309), signals included.
 */
const CONTENT_SIGNAL = 'search=yes, ai-input=yes, ai-train=no';

/** Pages for one person only (links mailed to them, their sessions); nothing for an index. */
const PRIVATE_PATHS = ['/dashboard', '/checkout/', '/unsubscribe/', '/api/agent/claim'];

export function robotsTxt(baseUrl: string): string {
  const rules = [`Content-Signal: ${CONTENT_SIGNAL}`, 'Allow: /', ...PRIVATE_PATHS.map((path) => `Disallow: ${path}`)];
  return [
    '# Restock: back-in-stock alerts. Agents start at /llms.txt, /.well-known/api-catalog or /auth.md.',
    '# Content-Signal (contentsignals.org): search=yes, ai-input=yes, ai-train=no.',
    '',
    'User-agent: *',
    ...rules,
    '',
    ...AI_USER_AGENTS.map((agent) => `User-agent: ${agent}`),
    ...rules,
    '',
    `Sitemap: ${publicUrls(baseUrl).home.replace(/\/$/, '')}/sitemap.xml`,
    '',
  ].join('\n');
}

/** The public pages and documents worth indexing. */
export function sitemapUrls(baseUrl: string, skillUrls: string[]): string[] {
  const u = publicUrls(baseUrl);
  return [u.home, u.docs, u.llms, u.authMd, u.openapi, u.apiCatalog, u.skills, ...skillUrls];
}

export function sitemapXml(urls: string[]): string {
  return [
    '<?xml version="1.0" encoding="UTF-8"?>',
    '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">',
    ...urls.map((url) => `  <url><loc>${escapeHtml(url)}</loc></url>`),
    '</urlset>',
    '',
  ].join('\n');
}

/** llms.txt (llmstxt.org): a title, a summary, then lists of what to read. */
export function llmsTxt(o: { serviceName: string; baseUrl: string; skills: Array<{ name: string; description: string; url: string }> }): string {
  const u = publicUrls(o.baseUrl);
  return `# ${o.serviceName}

> Back-in-stock alerts for e-commerce stores, for AI agents over HTTP, MCP and A2A: subscribe a customer's e-mail to a sold-out product and it is e-mailed once when the store restocks; buy a store's monthly plan. Register for a bearer credential, or pay per request (x402 or MPP) without one.

Start with the API reference or the OpenAPI document. Authentication is described in auth.md; every operation is also an MCP tool, and the main ones are A2A skills.

## Docs

- [API reference](${u.docs}): every operation, its access, errors
- [OpenAPI 3.1](${u.openapi}): the machine-readable API, with x-payment-info offers
- [auth.md](${u.authMd}): register, claim, use and revoke a credential
- [API catalog](${u.apiCatalog}): RFC 9727 linkset of this API
- [MCP server card](${u.mcpCard}): the MCP endpoint ${u.mcp}, its tools and authorization
- [A2A agent card](${u.a2aCard}): the A2A endpoint ${u.a2a} (JSON-RPC), its skills and authorization

## Skills

${o.skills.map((skill) => `- [${skill.name}](${skill.url}): ${skill.description}`).join('\n')}

## Optional

- [Home](${u.home}): what Restock is, for shoppers, merchants and agents
- [Agent skills index](${u.skills})
- [OAuth protected resource metadata](${u.protectedResource})
- [OAuth authorization server metadata](${u.authorizationServer})
`;
}

/** RFC 9727: the API catalog, one linkset entry for this API. */
export function apiCatalog(baseUrl: string) {
  const u = publicUrls(baseUrl);
  return {
    linkset: [
      {
        anchor: u.apiIndex,
        // The type it is served as: the OpenAPI media types are still a draft.
        'service-desc': [{ href: u.openapi, type: 'application/json' }],
        'service-doc': [
          { href: u.docs, type: 'text/html' },
          { href: u.llms, type: 'text/plain' },
        ],
        'service-meta': [
          { href: u.protectedResource, type: 'application/json' },
          { href: u.mcpCard, type: 'application/json' },
          { href: u.a2aCard, type: 'application/json' },
        ],
        status: [{ href: u.health, type: 'application/json' }],
      },
    ],
  };
}

export const API_CATALOG_TYPE = 'application/linkset+json; profile="https://www.rfc-editor.org/info/rfc9727"';

/** The `Link` header of `/` (and the catalog's HEAD): where an agent goes next. */
export function frontDoorLinks(baseUrl: string): string {
  const u = publicUrls(baseUrl);
  return [
    `<${u.apiCatalog}>; rel="api-catalog"; type="application/linkset+json"`,
    `<${u.openapi}>; rel="service-desc"; type="application/json"`,
    `<${u.docs}>; rel="service-doc"; type="text/html"`,
    `<${u.llms}>; rel="describedby"; type="text/plain"`,
  ].join(', ');
}
