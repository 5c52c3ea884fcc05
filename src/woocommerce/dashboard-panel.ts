import { connectionPanel, csrfField, formRefusal, foundOrNull, when, type DashboardPanel, type FieldErrors, type PanelAnswer, type PanelForm, type PanelOwner } from '../core/dashboard-panel.ts';
import { html, type SafeHtml } from '../core/html.ts';
import type { WooCommerceConnection, WooCommerceService } from './service.ts';

const FIELDS = ['siteUrl', 'consumerKey', 'consumerSecret'] as const;

/** What the owner typed, shown again with the errors; never the consumer secret. */
interface Typed {
  siteUrl: string;
  consumerKey: string;
}

interface View {
  errors?: FieldErrors;
  typed?: Typed;
  done?: 'connected' | 'disconnected';
}

/** The page's query: what was just done, said once. */

/**
 * A WooCommerce store's page in the dashboard: its connection to its site, the form to paste REST
 * API keys (or to have the site approve and make them), and disconnecting. Every form goes through
 * the same caller-taking methods as the API, so the service's own access rules answer for both.
 */
export function wooCommercePanel(connections: WooCommerceService): DashboardPanel {
  const shown = async (owner: PanelOwner, view: View = {}, status = 200): Promise<PanelAnswer> => ({
    page: connectionPage(await foundOrNull(() => connections.connectionFor(owner.caller, owner.shop)), owner.csrfToken, view),
    status,
  });

  /** The form's refusal shown beside what was typed; anything not the owner's to mend is thrown on. */
  const refused = (owner: PanelOwner, fields: Record<string, string | undefined>, err: unknown) => {
    const refusal = formRefusal(err);
    if (!refusal) throw err;
    return shown(owner, { errors: refusal.errors, typed: { siteUrl: fields.siteUrl ?? '', consumerKey: fields.consumerKey ?? '' } }, refusal.status);
  };

  const forms: Record<string, PanelForm> = {
    // The keys pasted, as typed: the service checks their shape as the API does, then the site's
    // address, then tries the keys on the site before storing anything.
    '': async (owner, fields) => {
      const input = { siteUrl: fields.siteUrl?.trim() ?? '', consumerKey: fields.consumerKey?.trim() ?? '', consumerSecret: fields.consumerSecret?.trim() ?? '' };
      try {
        await connections.connectWithKeys(owner.caller, owner.shop, input);
      } catch (err) {
        return refused(owner, fields, err);
      }
      return { next: '/dashboard/woocommerce?done=connected' };
    },
    // WooCommerce's approval page on the owner's site, where the site makes the keys and posts them
    // to the service, then sends the owner back.
    authorize: async (owner, fields) => {
      try {
        return { leave: await connections.authorizationUrl(owner.caller, owner.shop, fields.siteUrl?.trim() ?? ''), what: 'Approve Restock on your site' };
      } catch (err) {
        return refused(owner, fields, err);
      }
    },
    disconnect: async (owner) => {
      await connections.disconnect(owner.caller, owner.shop);
      return { next: '/dashboard/woocommerce?done=disconnected' };
    },
  };

  return connectionPanel({ label: 'WooCommerce', path: 'woocommerce', done: ['connected', 'disconnected'], forms, shown });
}

function stateOf(connection: WooCommerceConnection | null): SafeHtml {
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

/** The page: after a refusal the form shows what was typed, never the consumer secret. */
function connectionPage(connection: WooCommerceConnection | null, csrf: string | undefined, options: View): SafeHtml {
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
