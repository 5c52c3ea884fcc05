import { connectionPanel, csrfField, formRefusal, foundOrNull, when, type DashboardPanel, type FieldErrors, type PanelAnswer, type PanelForm, type PanelOwner } from '../core/dashboard-panel.ts';
import type { StoreEventType } from '../core/events.ts';
import { html, type SafeHtml } from '../core/html.ts';
import { Problem } from '../core/problems.ts';
import type { KlaviyoConnection } from '../klaviyo/schemas.ts';
import { KLAVIYO_METRICS, type KlaviyoDeliveryTrouble, type KlaviyoService } from '../klaviyo/service.ts';

const PAGE = '/dashboard/klaviyo';

/** What the page asks of the Klaviyo feature: the caller-taking methods its API uses, so the service's own access rules answer for both. */
export type DashboardKlaviyo = Pick<KlaviyoService, 'connect' | 'connectionFor' | 'disconnect' | 'latestTrouble'>;

interface View {
  errors?: FieldErrors;
  done?: 'connected' | 'disconnected';
}

/** The page's query: what was just done, said once. */

/** When each Klaviyo metric is sent, in the merchant's words (docs/klaviyo.md, "Events"). */
const SENT_WHEN: Partial<Record<StoreEventType, string>> = {
  'subscription.created': 'A shopper signs up for a back-in-stock alert (once they confirm, where your store asks them to)',
  'alert.sent': 'An alert, or the reminder after it, is sent to the shopper',
  'alert.clicked': 'The shopper first clicks the alert’s link',
  'order.attributed': 'An order is credited to the alert, with its worth as the event’s value',
};

/**
 * The store's Klaviyo page in the dashboard, for every store: whether its account is connected
 * (the key's last four characters at most), the form to paste a private API key, disconnecting,
 * what is sent and how consent travels, and what became of the events lately.
 */
export function klaviyoPanel(klaviyo: DashboardKlaviyo): DashboardPanel {
  const shown = async (owner: PanelOwner, view: View = {}, status = 200): Promise<PanelAnswer> => {
    const [connection, trouble] = await Promise.all([foundOrNull(() => klaviyo.connectionFor(owner.caller, owner.shop)), klaviyo.latestTrouble(owner.caller, owner.shop)]);
    return { page: klaviyoPage(connection, trouble, owner.csrfToken, view), status };
  };

  const forms: Record<string, PanelForm> = {
    // The key as pasted: the service checks its form as the API does, then asks Klaviyo, and
    // stores it sealed only once Klaviyo took it.
    '': async (owner, fields) => {
      try {
        await klaviyo.connect(owner.caller, owner.shop, { privateApiKey: fields.privateApiKey?.trim() ?? '' });
      } catch (err) {
        const refusal = connectRefusal(err);
        if (!refusal) throw err;
        return shown(owner, { errors: refusal.errors }, refusal.status);
      }
      return { next: `${PAGE}?done=connected` };
    },
    // A store never connected (a form left open elsewhere) has nothing to disconnect: its page says so.
    disconnect: async (owner) => ((await foundOrNull(() => klaviyo.disconnect(owner.caller, owner.shop))) ? { next: `${PAGE}?done=disconnected` } : { next: PAGE }),
  };

  return connectionPanel({ label: 'Klaviyo', path: 'klaviyo', done: ['connected', 'disconnected'], forms, shown });
}

/**
 * A refusal the form shows: the key's form, or Klaviyo refusing it (400, beside the field),
 * Klaviyo out of reach (502), or a server that cannot keep keys sealed (501, which the owner
 * cannot mend but should read in words, not as an error page).
 */
function connectRefusal(err: unknown): { status: number; errors: FieldErrors } | undefined {
  const refusal = formRefusal(err);
  if (refusal) return refusal;
  if (err instanceof Problem && err.slug === 'not-configured') {
    return { status: err.status, errors: [{ pointer: '/', message: 'This Restock server cannot keep API keys yet: its operator has not set the encryption key they are sealed with. Nothing was stored.' }] };
  }
  return undefined;
}

function klaviyoPage(connection: KlaviyoConnection | null, trouble: KlaviyoDeliveryTrouble | null, csrf: string | undefined, view: View): SafeHtml {
  const errors = view.errors ?? [];
  const keyError = errors.find((e) => e.pointer === '/privateApiKey');
  const general = errors.filter((e) => e !== keyError);
  // The service's messages follow their field's name, as in the API's errors; here they open a sentence.
  const keyProblem = keyError && `The key ${keyError.message}`;
  const connected = connection?.status === 'connected';
  return html`<h1>Klaviyo</h1>
${view.done === 'connected' ? html`<p role="status" class="status-sent">Connected: from now on, sign-ups, alerts sent, clicks and credited orders go to Klaviyo.</p>` : ''}
${view.done === 'disconnected' ? html`<p role="status">Disconnected: Restock forgot the key and sends nothing more to Klaviyo; events not yet sent were cancelled.</p>` : ''}
<p>With your Klaviyo account connected, what happens to your shoppers’ alerts becomes Klaviyo events on each shopper’s profile, which your Klaviyo flows can use as triggers.</p>
<h2>Your Klaviyo account</h2>
${stateOf(connection)}
${connection && connected ? deliveryOf(connection.events, trouble) : ''}
${connected
  ? html`<form method="post" action="${PAGE}/disconnect">${csrfField(csrf)}<p class="hint">Restock forgets the key and cancels the events not yet sent; Klaviyo keeps what it already received.</p><button class="quiet" type="submit">Disconnect Klaviyo</button></form>`
  : ''}
<h2>${connected ? 'Connect again with a new key' : 'Connect Klaviyo'}</h2>
<ol>
<li>In Klaviyo, open <strong>Settings &gt; Account &gt; API keys</strong> and choose <strong>Create Private API Key</strong>.</li>
<li>Name it (Restock) and give it <strong>Accounts: Read</strong> and <strong>Events: Full Access</strong>. Restock needs nothing else: it never reads or changes your profiles, lists or consent.</li>
<li>Paste the key below.</li>
</ol>
${errors.length ? html`<p role="alert" class="error">Nothing was connected.</p>` : ''}
${general.map((e) => html`<p class="error">${e.message}</p>`)}
<form method="post" action="${PAGE}" novalidate>
${csrfField(csrf)}
<label for="klaviyo-key">Private API key</label>
<input id="klaviyo-key" name="privateApiKey" type="password" value="" autocomplete="off" spellcheck="false" aria-describedby="klaviyo-key-hint${keyProblem ? ' klaviyo-key-error' : ''}"${keyProblem ? html` aria-invalid="true"` : ''}>
<p class="hint" id="klaviyo-key-hint">Begins with pk_. Restock checks it with Klaviyo, keeps it sealed and never shows it again.</p>
${keyProblem ? html`<p class="error" id="klaviyo-key-error">${keyProblem}</p>` : ''}
<p><button type="submit">Connect</button></p>
</form>
${whatIsSent()}
${consentNote()}`;
}

function stateOf(connection: KlaviyoConnection | null): SafeHtml {
  if (!connection) return html`<p data-klaviyo-state="never">Not connected: nothing is sent to Klaviyo.</p>`;
  const connected = connection.status === 'connected';
  // The key's last four characters tell which key is in use; once disconnected, none is.
  return html`<dl>
<dt>State</dt><dd data-klaviyo-state="${connection.status}" class="${connected ? 'status-sent' : 'status-failed'}">${connected ? 'Connected' : 'Disconnected'}</dd>
${connected && connection.keyHint ? html`<dt>Private API key</dt><dd data-klaviyo-key>ending in ${connection.keyHint}</dd>` : ''}
${connection.accountId ? html`<dt>Klaviyo account</dt><dd>${connection.accountId}</dd>` : ''}
<dt>Connected</dt><dd>${when(connection.connectedAt)}</dd>
${connected ? '' : html`<dt>Disconnected</dt><dd>${when(connection.disconnectedAt)}${connection.disconnectReason ? html`: ${connection.disconnectReason}` : ''}</dd>`}
</dl>`;
}

/** What became of the latest events, and what last went wrong, in words the owner can act on. */
function deliveryOf(events: KlaviyoConnection['events'], trouble: KlaviyoDeliveryTrouble | null): SafeHtml {
  return html`<h3>Recent events</h3>
<dl>
<dt>Waiting to be sent</dt><dd data-klaviyo-events="pending">${events.pending}</dd>
<dt>Delivered</dt><dd data-klaviyo-events="delivered">${events.delivered}</dd>
<dt>Given up</dt><dd data-klaviyo-events="failed">${events.failed}</dd>
</dl>
${trouble ? troubleOf(trouble) : ''}`;
}

function troubleOf(trouble: KlaviyoDeliveryTrouble): SafeHtml {
  const fate = trouble.retryAt ? `Restock tries again at ${when(trouble.retryAt)}.` : 'Restock gave up on it.';
  return html`<p data-klaviyo-trouble${trouble.retryAt ? '' : html` class="error"`}>Last problem: a ${trouble.metric} event of ${when(trouble.queuedAt)} was not taken: ${trouble.error}. ${fate} ${adviceFor(trouble.statusCode)}</p>`;
}

function adviceFor(status: number | null): string {
  if (status === 401 || status === 403) return 'Klaviyo refused the key: check in Klaviyo that it still exists and has Events: Full Access, or connect again with a new key.';
  if (status === null || status === 408 || status === 429 || status >= 500) return 'Klaviyo was busy or could not be reached; nothing needs doing unless it keeps happening.';
  return 'Klaviyo would not take the event as it was sent.';
}

function whatIsSent(): SafeHtml {
  const rows = Object.entries(KLAVIYO_METRICS).map(([type, metric]) => html`<tr><td><code>${metric}</code></td><td>${SENT_WHEN[type as StoreEventType] ?? type}</td></tr>`);
  return html`<h2>What Restock sends</h2>
<p>Each event goes on the profile of the shopper’s e-mail address; in Klaviyo, pick its metric as a flow’s trigger (a metric appears once its first event has arrived). Only what happens while Klaviyo is connected is sent.</p>
<div class="table-scroll"><table><caption class="visually-hidden">The Klaviyo metrics Restock sends</caption>
<thead><tr><th scope="col">Klaviyo metric</th><th scope="col">Sent when</th></tr></thead><tbody>${rows}</tbody></table></div>`;
}

function consentNote(): SafeHtml {
  return html`<h2>Consent</h2>
<ul>
<li>E-mail consent is passed only as it was given: a shopper who signs up asks for one message about one product, not for marketing. Each <code>Restock Subscribed</code> event says how the consent was given and when it was confirmed, with <code>marketingConsent: false</code>.</li>
<li>Restock never subscribes a profile to your e-mail marketing and never changes its consent in Klaviyo; a marketing message still needs the consent Klaviyo records.</li>
<li>Double opt-in is respected: where your store asks shoppers to confirm, nothing about a sign-up reaches Klaviyo until the shopper confirms.</li>
<li>A shopper who unsubscribes from Restock’s alerts is not unsubscribed in Klaviyo, where Restock never subscribed them.</li>
</ul>`;
}
