import { scopeDescriptions } from '../core/scopes.ts';
import { pricedOperation, usdText, type PricedOperation } from '../core/operations.ts';
import { embedSnippet } from '../storefront/service.ts';
import { code, link, list, paragraph, type Document } from './document.ts';
import type { IndexedOperation } from './routes.ts';

export interface FrontDoorOptions {
  serviceName: string;
  baseUrl: string;
  /** Every declared paid operation's price. */
  prices: PricedOperation[];
  /** Set when payments per request are on test networks (PAYMENTS_TEST_NETWORK): said beside the prices. */
  testNetworkNotice?: string | undefined;
}

/** Where each public document lives; the landing page, llms.txt, the sitemap and the catalog all read these. */
export function publicUrls(baseUrl: string) {
  return {
    home: `${baseUrl}/`,
    docs: `${baseUrl}/docs`,
    openapi: `${baseUrl}/openapi.json`,
    apiIndex: `${baseUrl}/api`,
    health: `${baseUrl}/api/health`,
    apiCatalog: `${baseUrl}/.well-known/api-catalog`,
    llms: `${baseUrl}/llms.txt`,
    authMd: `${baseUrl}/auth.md`,
    mcp: `${baseUrl}/mcp`,
    mcpCard: `${baseUrl}/.well-known/mcp/server-card.json`,
    a2a: `${baseUrl}/a2a`,
    a2aCard: `${baseUrl}/.well-known/agent-card.json`,
    skills: `${baseUrl}/.well-known/agent-skills/index.json`,
    protectedResource: `${baseUrl}/.well-known/oauth-protected-resource`,
    authorizationServer: `${baseUrl}/.well-known/oauth-authorization-server`,
    register: `${baseUrl}/api/agent/register`,
    plans: `${baseUrl}/api/v1/plans`,
    dashboard: `${baseUrl}/dashboard`,
  };
}


/** `/`: what Restock is, how shoppers, merchants and agents start. */
export function frontDoor(o: FrontDoorOptions): Document {
  const u = publicUrls(o.baseUrl);
  return {
    title: `${o.serviceName}`,
    summary:
      'Back-in-stock alerts for e-commerce stores. A shopper leaves an e-mail for a sold-out product; when the store restocks it, ' +
      'Restock e-mails them once, in batches sized to the stock, with one-click unsubscribe. AI agents use the same service over an HTTP API, MCP and A2A.',
    sections: [
      {
        heading: 'For shoppers',
        blocks: [
          paragraph(
            'On a sold-out product page of a store that uses Restock, enter your e-mail in the "Notify me when available" form. ',
            'You get one e-mail when it is back in stock, and every e-mail has a one-click unsubscribe link.',
          ),
        ],
      },
      {
        heading: 'For merchants',
        blocks: [
          paragraph('Add one script tag to your product pages (or the Shopify theme block), then follow demand and every alert sent in the dashboard.'),
          { kind: 'code', language: 'html', text: embedSnippet(o.baseUrl, 'my-store.myshopify.com', 'gid://shopify/Product/123') },
          list(
            [link('Merchant dashboard', u.dashboard), ': demand per product, alerts and why each was sent, plan and settings (sign in with a link mailed to the store owner).'],
            [link('Plans', u.plans), `: starter ${usdText(centsOf(o, 'checkoutPlan'))} a month (bring your own e-mail provider), growth with managed sending.`],
          ),
        ],
      },
      {
        heading: 'For AI agents',
        blocks: [
          paragraph('Four ways in, all described by machine-readable documents:'),
          list(
            [
              'Register and get a bearer credential: ',
              code(`POST ${u.register}`),
              ' with ',
              code('{"type":"anonymous"}'),
              ' (or an identity assertion). Details in ',
              link('auth.md', u.authMd),
              '.',
            ],
            [
              'Or pay per request without registering: ',
              code('subscribeAlert'),
              ` costs ${usdText(centsOf(o, 'subscribeAlert'))}, `,
              code('checkoutPlan'),
              ` ${usdText(centsOf(o, 'checkoutPlan'))}; a request without a token gets HTTP 402 with x402 and MPP offers.`,
              ...(o.testNetworkNotice ? [` ${o.testNetworkNotice}`] : []),
            ],
            ['Or use the same operations as MCP tools at ', link(u.mcp, u.mcp), ' (Streamable HTTP; ', link('server card', u.mcpCard), ').'],
            ['Or as A2A skills at ', code(u.a2a), ' (JSON-RPC; ', link('agent card', u.a2aCard), ').'],
          ),
          { kind: 'code', language: 'sh', text: startExample(o.baseUrl) },
          list(
            [link('OpenAPI 3.1 description', u.openapi)],
            [link('API reference', u.docs)],
            [link('API catalog (RFC 9727)', u.apiCatalog)],
            [link('Agent skills', u.skills)],
            [link('A2A agent card', u.a2aCard)],
            [link('llms.txt', u.llms)],
            [link('OAuth protected resource metadata', u.protectedResource)],
            [link('OAuth authorization server metadata', u.authorizationServer)],
          ),
        ],
      },
    ],
  };
}

/** The two requests that subscribe a customer; the agent-readiness test runs them as written. */
function startExample(baseUrl: string): string {
  return [
    `TOKEN=$(curl -s ${baseUrl}/api/agent/register -H 'content-type: application/json' -d '{"type":"anonymous"}' | sed 's/.*"credential":"\\([^"]*\\)".*/\\1/')`,
    `curl -s ${baseUrl}/api/v1/alerts/subscribe -H "authorization: Bearer $TOKEN" -H 'content-type: application/json' \\`,
    `  -d '{"productId":"gid://shopify/Product/123","email":"shopper@example.com","shop":"my-store.myshopify.com"}'`,
  ].join('\n');
}

/** `/docs`: the API for people: every operation, how to authenticate, pay, and read errors. */
export function apiReference(o: FrontDoorOptions, operations: IndexedOperation[]): Document {
  const u = publicUrls(o.baseUrl);
  const paid = new Map(o.prices.map((sheet) => [sheet.operation, sheet]));
  const rows = [...operations]
    .sort((a, b) => a.path.localeCompare(b.path) || a.method.localeCompare(b.method))
    .map((op) => [
      [code(`${op.method} ${op.path}`)],
      [op.operationId],
      [op.summary],
      [op.scope ? code(op.scope) : 'public', ...(paid.has(op.operationId) ? [`, or pay ${usdText(paid.get(op.operationId)!.usdCents)}`] : [])],
    ]);
  return {
    title: `${o.serviceName}: API reference`,
    summary: `Every operation of the HTTP API at ${o.baseUrl}, generated from the routes that serve it; the machine-readable twin is ${u.openapi}.`,
    sections: [
      {
        heading: 'Operations',
        blocks: [{ kind: 'table', head: ['Request', 'Operation', 'What it does', 'Access'], rows }],
      },
      {
        heading: 'Authentication',
        blocks: [
          paragraph('Send ', code('Authorization: Bearer <credential>'), '. Get a credential by registering (see ', link('auth.md', u.authMd), '). Scopes:'),
          list(...Object.entries(scopeDescriptions).map(([scope, description]) => [code(scope), `: ${description}`])),
        ],
      },
      {
        heading: 'Paying per request',
        blocks: [
          paragraph(
            'Without a token, a paid operation answers HTTP 402 with both protocols: x402 v2 (the ',
            code('PAYMENT-REQUIRED'),
            ' header) and MPP (',
            code('WWW-Authenticate: Payment'),
            ' challenges). Retry with ',
            code('PAYMENT-SIGNATURE'),
            ' or ',
            code('Authorization: Payment'),
            '; the answer carries the receipt. Offers are listed as ',
            code('x-payment-info'),
            ' in the ',
            link('OpenAPI document', u.openapi),
            '.',
          ),
        ],
      },
      {
        heading: 'MCP',
        blocks: [paragraph('The same operations are MCP tools at ', link(u.mcp, u.mcp), '; see the ', link('server card', u.mcpCard), ' for the tools and how to authorize.')],
      },
      {
        heading: 'A2A',
        blocks: [
          paragraph(
            'Some operations are A2A skills at ',
            code(u.a2a),
            ' (JSON-RPC, A2A 1.0 and 0.3; ',
            link('agent card', u.a2aCard),
            '). A message names the skill, by its operation, in one data part: ',
            code('{"skill": "subscribeAlert", "input": {...}}'),
            ', the input being the operation’s MCP tool arguments (its body, or the store and ids its path names), as the card’s extension gives each as JSON Schema. The task comes back completed, its artifact holding what the HTTP operation answers, ',
            'or rejected with the same problem details. The same tokens and scopes; without a token, ',
            code('subscribeAlert'),
            ' can be paid with the x402 extension for A2A.',
          ),
        ],
      },
      {
        heading: 'Errors',
        blocks: [
          paragraph(
            'Failures are RFC 9457 problem details (',
            code('application/problem+json'),
            ') with ',
            code('type'),
            ', ',
            code('title'),
            ', ',
            code('status'),
            ', ',
            code('detail'),
            ' and, for invalid input, ',
            code('errors'),
            ' with a JSON pointer per field. Each ',
            code('type'),
            ' URL is a page explaining it.',
          ),
        ],
      },
    ],
  };
}

/** The declared price of an operation the front door names. */
function centsOf(o: FrontDoorOptions, operation: string): number {
  return pricedOperation(o.prices, operation, 'The front door').usdCents;
}
