import { connectionPanel, csrfField, formRefusal, foundOrNull, when, type DashboardPanel, type FieldErrors, type PanelAnswer, type PanelForm, type PanelOwner } from '../core/dashboard-panel.ts';
import { html, type SafeHtml } from '../core/html.ts';
import type { NewVendureConnection, VendureConnection, VendureService } from './service.ts';

const FIELDS = ['adminApiUrl', 'apiKey', 'productUrl'] as const;

/** What the owner typed, shown again with the errors; never the API key. */
interface Typed {
  adminApiUrl: string;
  productUrl: string;
}

interface View {
  errors?: FieldErrors;
  typed?: Typed;
  /** Just connected: the signing secret, shown this once. */
  made?: NewVendureConnection;
  done?: 'disconnected';
}


/**
 * A Vendure store's page in the dashboard: its connection to its server, the form that makes it
 * (the Admin API's address, an API key, the storefront's product address), the plugin's settings
 * once connected, and disconnecting. Every form goes through the caller-taking methods the API
 * uses, so the service's own access rules answer for both.
 */
export function vendurePanel(connections: VendureService, baseUrl: string): DashboardPanel {
  const shown = async (owner: PanelOwner, view: View = {}, status = 200): Promise<PanelAnswer> => ({
    page: connectionPage(view.made ?? (await foundOrNull(() => connections.connectionFor(owner.caller, owner.shop))), owner, view, baseUrl),
    status,
  });

  const forms: Record<string, PanelForm> = {
    // The answer is the page itself, not a move to it: the signing secret is shown once, here.
    '': async (owner, fields) => {
      const input = { adminApiUrl: fields.adminApiUrl?.trim() ?? '', apiKey: fields.apiKey?.trim() ?? '', productUrl: fields.productUrl?.trim() ?? '' };
      try {
        return await shown(owner, { made: await connections.connect(owner.caller, owner.shop, input) });
      } catch (err) {
        const refusal = formRefusal(err);
        if (!refusal) throw err;
        return shown(owner, { errors: refusal.errors, typed: { adminApiUrl: input.adminApiUrl, productUrl: input.productUrl } }, refusal.status);
      }
    },
    disconnect: async (owner) => {
      await connections.disconnect(owner.caller, owner.shop);
      return { next: '/dashboard/vendure?done=disconnected' };
    },
  };

  return connectionPanel({ label: 'Vendure', path: 'vendure', done: ['disconnected'], forms, shown });
}

function stateOf(connection: VendureConnection | null): SafeHtml {
  if (!connection) return html`<p data-vendure-state="never">Never connected: Restock hears nothing from your Vendure server yet.</p>`;
  const connected = connection.status === 'connected';
  return html`<dl>
<dt>State</dt><dd data-vendure-state="${connection.status}" class="${connected ? 'status-sent' : 'status-failed'}">${connected ? 'Connected' : 'Disconnected'}</dd>
<dt>Admin API</dt><dd>${connection.adminApiUrl}</dd>
<dt>Product pages</dt><dd>${connection.productUrl}</dd>
<dt>Connected</dt><dd>${when(connection.connectedAt)}</dd>
<dt>Last reconciled</dt><dd>${connection.reconciledAt ? when(connection.reconciledAt) : 'not yet'}</dd>
${connected ? '' : html`<dt>Disconnected</dt><dd>${when(connection.disconnectedAt)}${connection.disconnectReason ? html`: ${connection.disconnectReason}` : ''}</dd>`}
</dl>`;
}

/** The plugin's three settings, right after connecting: the secret is not kept anywhere it can be shown again. */
function pluginSettings(made: NewVendureConnection, owner: PanelOwner, baseUrl: string): SafeHtml {
  return html`<section aria-labelledby="vendure-plugin">
<h2 id="vendure-plugin">The plugin's settings</h2>
<p role="status" class="status-sent">Connected. Copy these into your Vendure server's environment now: the signing secret is shown this once.</p>
<pre data-vendure-settings>RESTOCK_URL=${baseUrl}
RESTOCK_STORE=${owner.shop}
RESTOCK_SIGNING_SECRET=${made.signingSecret}</pre>
<p class="hint">Then restart the server. docs/install-vendure.md has every step.</p>
</section>`;
}

function connectionPage(connection: VendureConnection | NewVendureConnection | null, owner: PanelOwner, options: View, baseUrl: string): SafeHtml {
  const errors = options.errors ?? [];
  const error = (field: string) => errors.find((e) => e.pointer === `/${field}`);
  const general = errors.filter((e) => !FIELDS.some((field) => e.pointer === `/${field}`));
  const typed = options.typed ?? { adminApiUrl: connection?.adminApiUrl ?? '', productUrl: connection?.productUrl ?? '' };
  // `extra` holds attributes written here, never input.
  const field = (name: (typeof FIELDS)[number], label: string, type: string, value: string, hint: string, extra: SafeHtml) => {
    const problem = error(name);
    return html`<label for="vendure-${name}">${label}</label>
<input id="vendure-${name}" name="${name}" type="${type}" value="${value}" autocomplete="off" spellcheck="false" ${extra} aria-describedby="vendure-${name}-hint${problem ? ` vendure-${name}-error` : ''}"${problem ? html` aria-invalid="true"` : ''}>
<p class="hint" id="vendure-${name}-hint">${hint}</p>${problem ? html`<p class="error" id="vendure-${name}-error">${problem.message}</p>` : ''}`;
  };
  const connected = connection?.status === 'connected';
  return html`<h1>Vendure</h1>
${options.made ? pluginSettings(options.made, owner, baseUrl) : ''}
${options.done === 'disconnected' ? html`<p role="status">Disconnected: Restock forgot the API key, refuses the plugin's deliveries and sends no more alerts for this store.</p>` : ''}
<h2>Your server</h2>
${stateOf(connection)}
${connected
  ? html`<form method="post" action="/dashboard/vendure/disconnect">${csrfField(owner.csrfToken)}<p class="hint">Restock forgets the API key, refuses the plugin's deliveries and sends no more alerts for this store.</p><button class="quiet" type="submit">Disconnect</button></form>`
  : ''}
<h2>${connected ? 'Connect again' : 'Connect your server'}</h2>
<p>Make an API key on your Vendure server whose role may read the catalogue and settings (docs/install-vendure.md shows how), then:</p>
${errors.length ? html`<p role="alert" class="error">Nothing was connected.</p>` : ''}
${general.map((e) => html`<p class="error">${e.message}</p>`)}
<form method="post" action="/dashboard/vendure" novalidate>
${csrfField(owner.csrfToken)}
${field('adminApiUrl', 'Admin API address', 'url', typed.adminApiUrl, 'e.g. https://shop.example.com/admin-api', html`inputmode="url" placeholder="https://shop.example.com/admin-api"`)}
${field('apiKey', 'API key', 'password', '', 'Kept sealed and never shown again', html``)}
${field('productUrl', 'Product page address', 'url', typed.productUrl, 'Your storefront’s product page, with {slug} where the product’s slug goes, e.g. https://shop.example.com/products/{slug}', html`inputmode="url"`)}
<p><button type="submit">Connect</button></p>
</form>`;
}
