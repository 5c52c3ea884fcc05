import { html, page, type SafeHtml } from '../core/html.ts';

/**
 * A small document model for the pages that exist both for people (HTML) and for agents
 * (Markdown, asked for with `Accept: text/markdown`): one text, two renderings, so the two can
 * never say different things.
 */
export type Inline = string | { link: string; text: string } | { code: string };

export type Block =
  | { kind: 'paragraph'; text: Inline[] }
  | { kind: 'list'; items: Inline[][] }
  | { kind: 'code'; language: string; text: string }
  | { kind: 'table'; head: string[]; rows: Inline[][][] };

export interface Section {
  heading: string;
  blocks: Block[];
}

export interface Document {
  title: string;
  summary: string;
  sections: Section[];
}

export const link = (text: string, url: string): Inline => ({ link: url, text });
export const code = (text: string): Inline => ({ code: text });
export const paragraph = (...text: Inline[]): Block => ({ kind: 'paragraph', text });
export const list = (...items: Inline[][]): Block => ({ kind: 'list', items });

export function toMarkdown(doc: Document): string {
  const out = [`# ${doc.title}`, '', `> ${doc.summary}`, ''];
  for (const section of doc.sections) {
    out.push(`## ${section.heading}`, '');
    for (const block of section.blocks) out.push(markdownBlock(block), '');
  }
  return `${out.join('\n').trimEnd()}\n`;
}

function markdownBlock(block: Block): string {
  switch (block.kind) {
    case 'paragraph':
      return markdownInline(block.text);
    case 'list':
      return block.items.map((item) => `- ${markdownInline(item)}`).join('\n');
    case 'code':
      return `\`\`\`${block.language}\n${block.text}\n\`\`\``;
    case 'table': {
      const cell = (inline: Inline[]) => markdownInline(inline).replace(/\|/g, '\\|');
      return [
        `| ${block.head.join(' | ')} |`,
        `|${block.head.map(() => ' --- ').join('|')}|`,
        ...block.rows.map((row) => `| ${row.map(cell).join(' | ')} |`),
      ].join('\n');
    }
  }
}

function markdownInline(parts: Inline[]): string {
  return parts
    .map((part) => {
      if (typeof part === 'string') return part;
      if ('code' in part) return `\`${part.code}\``;
      return `[${part.text}](${part.link})`;
    })
    .join('');
}

export function toHtml(doc: Document): string {
  const body = html`<h1>${doc.title}</h1>
<p class="lead">${doc.summary}</p>
${doc.sections.map((section) => html`<h2>${section.heading}</h2>
${section.blocks.map(htmlBlock)}`)}`;
  return page(doc.title, body, { wide: true });
}

function htmlBlock(block: Block): SafeHtml {
  switch (block.kind) {
    case 'paragraph':
      return html`<p>${htmlInline(block.text)}</p>\n`;
    case 'list':
      return html`<ul>${block.items.map((item) => html`<li>${htmlInline(item)}</li>`)}</ul>\n`;
    case 'code':
      return html`<pre><code>${block.text}</code></pre>\n`;
    case 'table':
      return html`<div class="table-scroll"><table><thead><tr>${block.head.map((h) => html`<th scope="col">${h}</th>`)}</tr></thead>
<tbody>${block.rows.map((row) => html`<tr>${row.map((cell) => html`<td>${htmlInline(cell)}</td>`)}</tr>`)}</tbody></table></div>\n`;
  }
}

function htmlInline(parts: Inline[]): SafeHtml {
  return html`${parts.map((part) => {
    if (typeof part === 'string') return html`${part}`;
    if ('code' in part) return html`<code>${part.code}</code>`;
    return html`<a href="${part.link}">${part.text}</a>`;
  })}`;
}
