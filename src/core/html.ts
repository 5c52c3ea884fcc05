import type { FastifyRequest } from 'fastify';

/** Escapes text for an HTML body or a quoted attribute. */
export function escapeHtml(value: string): string {
  return value.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** Tagged template that escapes every interpolated value unless it is already `SafeHtml`. */
export class SafeHtml {
  constructor(readonly value: string) {}
  toString(): string {
    return this.value;
  }
}

export function html(strings: TemplateStringsArray, ...values: unknown[]): SafeHtml {
  let out = strings[0] ?? '';
  values.forEach((value, i) => {
    const parts = Array.isArray(value) ? value : [value];
    for (const part of parts) out += part instanceof SafeHtml ? part.value : escapeHtml(String(part ?? ''));
    out += strings[i + 1] ?? '';
  });
  return new SafeHtml(out);
}

export interface PageOptions {
  /** Room for tables and charts (the dashboard); other pages are a narrow card. */
  wide?: boolean;
  /** Shown at the top of the page, beside the name (the dashboard's navigation). */
  header?: SafeHtml;
  /** A page shown inside the Shopify admin: it loads App Bridge, then its own script. */
  appBridge?: AppBridgePage;
}

/** Shopify's App Bridge, which every page of an app shown in the Shopify admin loads from Shopify's CDN. */
export const APP_BRIDGE_URL = 'https://cdn.shopify.com/shopifycloud/app-bridge.js';

export interface AppBridgePage {
  /** The app's client id (SHOPIFY_API_KEY), which App Bridge reads from the `shopify-api-key` meta tag. */
  apiKey: string;
  /** The page's own script on our origin, run after App Bridge (deferred, so App Bridge stays the first script). */
  script?: string;
}

/**
 * The one layout of every page people see (unsubscribe, claim, checkout, the dashboard), so
 * they look alike. No scripts and no external assets: the pages work with scripts off and leak
 * nothing to third parties. The exception is a page shown inside the Shopify admin, which Shopify
 * requires to load App Bridge from its CDN, and which cannot work without it anyway.
 * Colours meet WCAG AA contrast in both light and dark schemes.
 */
export function page(title: string, body: SafeHtml, options: PageOptions = {}): string {
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex">
${options.appBridge ? appBridgeTags(options.appBridge) : ''}<title>${title} · Restock</title>
<style>${PAGE_STYLE}</style>
</head>
<body class="${options.wide ? 'wide' : 'narrow'}">
<header class="top"><a class="brand" href="/">Restock</a>${options.header ?? ''}</header>
<main id="main">
${body}
</main>
<footer><p class="muted">Restock back-in-stock alerts</p></footer>
</body>
</html>
`.value;
}

const PAGE_STYLE = new SafeHtml(`
  :root { color-scheme: light dark; --fg: #1a1a1a; --bg: #ffffff; --muted: #595959; --line: #d0d0d0; --card: #f6f7f6;
    --accent: #0b6e4f; --accent-fg: #ffffff; --warn: #8a4b00; --bad: #b00020; --focus: #c75b00; }
  @media (prefers-color-scheme: dark) {
    :root { --fg: #ececec; --bg: #161817; --muted: #b0b0b0; --line: #3a3d3b; --card: #202321; --accent: #3fbf8f; --accent-fg: #0b1a14;
      --warn: #f0b35a; --bad: #ff7b8a; --focus: #ffb45c; }
  }
  * { box-sizing: border-box; }
  body { font: 16px/1.5 system-ui, sans-serif; margin: 0; color: var(--fg); background: var(--bg); }
  a { color: var(--accent); }
  :focus-visible { outline: 3px solid var(--focus); outline-offset: 2px; }
  header.top { display: flex; flex-wrap: wrap; align-items: center; gap: .5rem 1.5rem; padding: .75rem 1.5rem; border-bottom: 1px solid var(--line); }
  .brand { font-weight: 700; font-size: 1.15rem; text-decoration: none; color: var(--fg); }
  header.top nav ul { display: flex; flex-wrap: wrap; gap: .25rem 1rem; list-style: none; margin: 0; padding: 0; }
  header.top nav a[aria-current="page"] { font-weight: 700; color: var(--fg); }
  header.top form { margin-left: auto; }
  main { padding: 1.5rem; margin: 0 auto; }
  body.narrow main { max-width: 30rem; margin: 2rem auto; border: 1px solid var(--line); border-radius: 12px; }
  body.wide main { max-width: 72rem; }
  footer { text-align: center; }
  h1 { font-size: 1.5rem; margin-top: 0; }
  h2 { font-size: 1.15rem; margin: 2rem 0 .5rem; }
  dl { display: grid; grid-template-columns: auto 1fr; gap: .25rem 1rem; }
  dt { color: var(--muted); }
  dd { margin: 0; overflow-wrap: anywhere; }
  table { border-collapse: collapse; width: 100%; font-size: .95rem; }
  caption { text-align: left; font-weight: 600; padding: .25rem 0; }
  th, td { text-align: left; padding: .4rem .6rem; border-bottom: 1px solid var(--line); vertical-align: top; }
  td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
  .table-scroll { overflow-x: auto; }
  button, .button { font: inherit; padding: .55rem 1.1rem; border-radius: 8px; border: 0; background: var(--accent); color: var(--accent-fg); cursor: pointer; text-decoration: none; display: inline-block; }
  button.quiet { background: transparent; color: var(--accent); border: 1px solid var(--accent); padding: .35rem .8rem; }
  label { display: block; margin: .75rem 0 .25rem; font-weight: 600; }
  input, select { font: inherit; padding: .45rem .6rem; border: 1px solid var(--muted); border-radius: 6px; background: var(--bg); color: var(--fg); width: 100%; max-width: 24rem; }
  input[type="checkbox"] { width: auto; }
  .hint { color: var(--muted); font-size: .9rem; margin: .15rem 0; }
  .error { color: var(--bad); font-weight: 600; }
  .muted { color: var(--muted); font-size: .9rem; }
  .tiles { display: grid; grid-template-columns: repeat(auto-fit, minmax(10rem, 1fr)); gap: .75rem; margin: 1rem 0; padding: 0; list-style: none; }
  .tiles li { background: var(--card); border: 1px solid var(--line); border-radius: 10px; padding: .75rem 1rem; }
  .tiles .value { display: block; font-size: 1.6rem; font-weight: 700; font-variant-numeric: tabular-nums; }
  .filters { display: flex; flex-wrap: wrap; gap: .5rem; list-style: none; padding: 0; margin: 1rem 0; }
  .filters a { display: inline-block; padding: .2rem .8rem; border: 1px solid var(--accent); border-radius: 999px; text-decoration: none; }
  .filters a[aria-current] { background: var(--accent); color: var(--accent-fg); }
  .bar { display: inline-block; height: .8rem; background: var(--accent); border-radius: 3px; vertical-align: middle; min-width: 2px; }
  meter { width: 100%; max-width: 24rem; height: 1.1rem; }
  .chart svg { width: 100%; height: auto; max-width: 48rem; }
  .chart rect.day { fill: var(--accent); }
  .chart text { fill: var(--muted); font-size: 11px; }
  .chart line { stroke: var(--line); }
  .status-sent { color: var(--accent); font-weight: 600; }
  .status-failed, .status-skipped { color: var(--bad); font-weight: 600; }
  .status-queued, .status-sending { color: var(--warn); font-weight: 600; }
  .visually-hidden { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); white-space: nowrap; }
  pre { white-space: pre-wrap; background: var(--card); padding: 1rem; border-radius: 8px; border: 1px solid var(--line); }
`);

/** True when the client would rather read a page than JSON (browsers, mail clients). */
export function prefersHtml(request: FastifyRequest): boolean {
  const accept = request.headers.accept ?? '';
  return accept.includes('text/html') && !accept.startsWith('application/');
}

/**
 * App Bridge as Shopify's getting-started asks: the API key in a meta tag and the CDN script in the
 * head, before any other script, neither async nor deferred nor a module (App Bridge refuses to
 * start otherwise). The page's own script follows, deferred.
 */
function appBridgeTags(bridge: AppBridgePage): SafeHtml {
  return html`<meta name="shopify-api-key" content="${bridge.apiKey}">
<script src="${APP_BRIDGE_URL}"></script>
${bridge.script ? html`<script src="${bridge.script}" defer></script>
` : ''}`;
}

/** CSP that lets only a store's Shopify admin frame a page (the embedded app). */
export function framedByShopifyAdmin(shop: string): string {
  return `frame-ancestors https://${shop} https://admin.shopify.com`;
}
