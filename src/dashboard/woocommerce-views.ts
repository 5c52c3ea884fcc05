import { html, type SafeHtml } from '../core/html.ts';
import { csrfField, when } from './page-parts.ts';
import type { FieldErrors } from './views.ts';
import type { WooCommerceConnectionState, WooCommerceTyped } from './woocommerce.ts';

const FIELDS = ['siteUrl', 'consumerKey', 'consumerSecret'] as const;

function stateOf(connection: WooCommerceConnectionState | null): SafeHtml {
  if (!connection) return html`<p data-woocommerce-state="never">Never connected: Restock hears nothing from your site yet.</p>`;
  const connected = connection.status === 'connected';
  return html`<dl>
<dt>State</dt><dd data-woocommerce-state="${connection.status}" class="${connected ? 'status-sent' : 'status-failed'}">${connected ? 'Connected' : 'Disconnected'}</dd>
<dt>Site</dt><dd>${connection.siteUrl}</dd>
<dt>Connected</dt><dd>${when(connection.connectedAt)}</dd>
<dt>Last reconciled</dt><dd>${connection.reconciledAt ? when(connection.reconciledAt) : 'not yet'}</dd>
${connected ? '' : html`<dt>Disconnected</dt><dd>${when(connection.disconnectedAt)}${connection.disconnectReason ? html`: ${connection.disconnectReason}` : ''}</dd>`}
</dl>`;
}

/**
 * A WooCommerce store's connection to its site: its state, the form to paste REST API keys (or
 * to have the site approve and make them), and disconnecting. After a refusal the form shows
 * what was typed, never the consumer secret.
 */
export function wooCommerceBody(
  connection: WooCommerceConnectionState | null,
  csrf: string | undefined,
  options: { errors?: FieldErrors; typed?: WooCommerceTyped; done?: 'connected' | 'disconnected' } = {},
): SafeHtml {
  const errors = options.errors ?? [];
  const error = (field: string) => errors.find((e) => e.pointer === `/${field}`);
  const general = errors.filter((e) => !FIELDS.some((field) => e.pointer === `/${field}`));
  const typed = options.typed ?? { siteUrl: connection?.siteUrl ?? '', consumerKey: '' };
  // `extra` holds attributes written here, never input.
  const field = (name: (typeof FIELDS)[number], label: string, type: string, value: string, hint: string, extra: SafeHtml) => {
    const problem = error(name);
    return html`<label for="woo-${name}">${label}</label>
<input id="woo-${name}" name="${name}" type="${type}" value="${value}" autocomplete="off" spellcheck="false" ${extra} aria-describedby="woo-${name}-hint${problem ? ` woo-${name}-error` : ''}"${problem ? html` aria-invalid="true"` : ''}>
<p class="hint" id="woo-${name}-hint">${hint}</p>${problem ? html`<p class="error" id="woo-${name}-error">${problem.message}</p>` : ''}`;
  };
  const connected = connection?.status === 'connected';
  return html`<h1>WooCommerce</h1>
${options.done === 'connected' ? html`<p role="status" class="status-sent">Connected: Restock made its product webhooks on your site.</p>` : ''}
${options.done === 'disconnected' ? html`<p role="status">Disconnected: Restock deleted its webhooks on your site and sends no more alerts for this store.</p>` : ''}
<h2>Your site</h2>
${stateOf(connection)}
${connected
  ? html`<form method="post" action="/dashboard/woocommerce/disconnect">${csrfField(csrf)}<p class="hint">Restock deletes its webhooks on your site, forgets the keys and sends no more alerts for this store.</p><button class="quiet" type="submit">Disconnect</button></form>`
  : ''}
<h2>${connected ? 'Connect again with new keys' : 'Connect your site'}</h2>
<ol>
<li>In your WordPress admin, open <strong>WooCommerce &gt; Settings &gt; Advanced &gt; REST API</strong> and choose <strong>Add key</strong>.</li>
<li>Describe it (Restock), set <strong>Permissions</strong> to <strong>Read/Write</strong> (Restock reads products and makes webhooks), and generate the key.</li>
<li>Paste the consumer key and the consumer secret below. They are kept sealed and never shown again.</li>
</ol>
${errors.length ? html`<p role="alert" class="error">Nothing was connected.</p>` : ''}
${general.map((e) => html`<p class="error">${e.message}</p>`)}
<form method="post" action="/dashboard/woocommerce" novalidate>
${csrfField(csrf)}
${field('siteUrl', 'Site address', 'url', typed.siteUrl, 'Your shop’s https:// address, e.g. https://shop.example.com', html`inputmode="url" placeholder="https://shop.example.com"`)}
${field('consumerKey', 'Consumer key', 'text', typed.consumerKey, 'Begins with ck_', html``)}
${field('consumerSecret', 'Consumer secret', 'password', '', 'Begins with cs_', html``)}
<p><button type="submit">Connect</button></p>
<p class="hint">No keys yet? Enter only the site address: your site asks you to approve Restock, makes the keys itself and hands them to Restock.</p>
<p><button class="quiet" type="submit" formaction="/dashboard/woocommerce/authorize">Approve on my site instead</button></p>
</form>`;
}
