import { storeEventTypes } from '../core/events.ts';
import { html, type SafeHtml } from '../core/html.ts';
import type { CreatedEndpoint, Delivery, Endpoint } from '../webhooks/schemas.ts';
import { csrfField, when } from '../core/dashboard-panel.ts';
import type { FieldErrors } from '../core/dashboard-panel.ts';

function state(endpoint: Endpoint): string {
  if (!endpoint.enabled) return `disabled: ${endpoint.disabledReason ?? 'by the store'}`;
  return endpoint.consecutiveFailures > 0 ? `failing since ${when(endpoint.failingSince)} (${endpoint.consecutiveFailures} attempts)` : 'delivering';
}

/**
 * The store's endpoints, the form to add one, and, right after adding, its signing secret: shown
 * this once, as the API shows it.
 */
export function webhooksBody(endpoints: Endpoint[], csrf: string | undefined, options: { created?: CreatedEndpoint; errors?: FieldErrors; typed?: string } = {}): SafeHtml {
  const urlError = options.errors?.find((error) => error.pointer === '/url');
  const rows = endpoints.map(
    (endpoint) => html`<tr><td><a href="/dashboard/webhooks/${endpoint.endpointId}">${endpoint.url}</a></td><td>${endpoint.eventTypes.join(', ')}</td>
<td data-endpoint-state="${endpoint.endpointId}">${state(endpoint)}</td>
<td>${endpoint.enabled ? '' : html`<form method="post" action="/dashboard/webhooks/${endpoint.endpointId}/enable">${csrfField(csrf)}<button class="quiet" type="submit">Enable again</button></form>`}
<form method="post" action="/dashboard/webhooks/${endpoint.endpointId}/delete">${csrfField(csrf)}<button class="quiet" type="submit" aria-label="Delete the endpoint ${endpoint.url}">Delete</button></form></td></tr>`,
  );
  const created = options.created
    ? html`<div role="status"><p>The endpoint ${options.created.url} is added. Its signing secret, shown this once (verify each delivery with a Standard Webhooks library):</p>
<p><code data-webhook-secret>${options.created.secret}</code></p></div>`
    : '';
  const boxes = storeEventTypes.map((type) => html`<label><input type="checkbox" name="type:${type}" checked> ${type}</label>`);
  return html`<h1>Webhooks</h1>
<p>Your own tools hear of sign-ups, alerts sent and clicked, orders credited to alerts and waitlists that reach your threshold: each event is POSTed to your endpoints, signed per Standard Webhooks, and retried with backoff; an endpoint that keeps failing for a day is disabled and you are told by e-mail.</p>
${created}
${rows.length ? html`<div class="table-scroll"><table><caption class="visually-hidden">Webhook endpoints</caption>
<thead><tr><th scope="col">URL</th><th scope="col">Events</th><th scope="col">State</th><th scope="col"><span class="visually-hidden">Actions</span></th></tr></thead><tbody>${rows}</tbody></table></div>` : html`<p>No endpoint yet.</p>`}
<h2>Add an endpoint</h2>
<form method="post" action="/dashboard/webhooks" novalidate>
${csrfField(csrf)}
<label for="url">URL</label>
<input id="url" name="url" type="url" required value="${options.typed ?? ''}"${urlError ? html` aria-invalid="true" aria-describedby="url-error"` : ''}>
${urlError ? html`<p id="url-error" class="error">${urlError.message}</p>` : ''}
<fieldset><legend>Events</legend>${boxes}</fieldset>
<button type="submit">Add endpoint</button>
</form>`;
}

/** One endpoint and its delivery log: each event, its attempts and their answers. */
export function deliveriesBody(endpoint: Endpoint, deliveries: Delivery[]): SafeHtml {
  const rows = deliveries.map(
    (delivery) => html`<tr><td>${delivery.eventType}<br><span class="muted">${delivery.eventId}</span></td><td class="status-${delivery.status}">${delivery.status}</td>
<td>${when(delivery.createdAt)}</td><td class="num">${delivery.attempts}</td>
<td>${delivery.log.map((attempt) => html`<div>${when(attempt.attemptedAt)}: ${attempt.statusCode ?? 'no answer'}${attempt.error ? html` — ${attempt.error}` : ''} (${attempt.durationMs} ms)</div>`)}</td></tr>`,
  );
  return html`<h1>Deliveries to ${endpoint.url}</h1>
<p>${state(endpoint)}. Newest first.</p>
${rows.length ? html`<div class="table-scroll"><table><caption class="visually-hidden">Deliveries</caption>
<thead><tr><th scope="col">Event</th><th scope="col">Status</th><th scope="col">Created</th><th scope="col" class="num">Attempts</th><th scope="col">Attempts made</th></tr></thead><tbody>${rows}</tbody></table></div>` : html`<p>Nothing delivered yet.</p>`}
<p><a href="/dashboard/webhooks">All endpoints</a></p>`;
}
