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

/**
 * The one layout of every page people see (unsubscribe, checkout, and later claim and the
 * dashboard), so they look alike. No scripts, no external assets.
 */
export function page(title: string, body: SafeHtml): string {
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex">
<title>${title} · Restock</title>
<style>
  :root { color-scheme: light dark; --accent: #0b6e4f; }
  body { font: 16px/1.5 system-ui, sans-serif; margin: 0; display: grid; place-items: center; min-height: 100vh; }
  main { max-width: 28rem; padding: 2rem; border: 1px solid #8884; border-radius: 12px; margin: 1rem; }
  h1 { font-size: 1.4rem; margin-top: 0; }
  dl { display: grid; grid-template-columns: auto 1fr; gap: .25rem 1rem; }
  dt { color: #888; }
  dd { margin: 0; }
  button { font: inherit; padding: .6rem 1.2rem; border-radius: 8px; border: 0; background: var(--accent); color: #fff; cursor: pointer; }
  button:focus-visible { outline: 3px solid #f5a623; outline-offset: 2px; }
  .muted { color: #888; font-size: .9rem; }
</style>
</head>
<body><main>
${body}
<p class="muted">Restock back-in-stock alerts</p>
</main></body>
</html>
`.value;
}

/** True when the client would rather read a page than JSON (browsers, mail clients). */
export function prefersHtml(request: FastifyRequest): boolean {
  const accept = request.headers.accept ?? '';
  return accept.includes('text/html') && !accept.startsWith('application/');
}
