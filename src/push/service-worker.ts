// Restock's service worker: shows the back-in-stock alerts pushed to this browser and opens the
// product page when one is clicked. Served as is from /push/sw.js and, on Shopify stores, from
// the store's own origin through the app proxy. The payload is what src/push/service.ts
// encrypts: { title, body, url, icon, tag, stop: { url, label } }.
'use strict';

declare const self: ServiceWorkerGlobalScope;

/** A notification as shown: only what the payload carried that checks out. */
interface Shown {
  title: string;
  body: string;
  url: string | null;
  icon: string | null;
  tag: string | undefined;
  stop: { url: string; label: string } | null;
}

/** What a notification is shown with; its buttons (`actions`) are for a service worker's notifications only. */
interface ShownOptions extends NotificationOptions {
  actions?: { action: string; title: string }[];
}

// A new version takes over at once rather than after every tab of the store has closed.
self.addEventListener('install', function () {
  self.skipWaiting();
});

self.addEventListener('push', function (event) {
  var shown = readNotification(event);
  if (!shown) return;
  var options: ShownOptions = { body: shown.body, tag: shown.tag, data: { url: shown.url, stop: shown.stop && shown.stop.url } };
  if (shown.icon) options.icon = shown.icon;
  // The second button stops alerts to this browser, and only that: a browser proves nothing of the shopper's e-mail.
  if (shown.stop) options.actions = [{ action: 'stop', title: shown.stop.label }];
  event.waitUntil(self.registration.showNotification(shown.title, options));
});

self.addEventListener('notificationclick', function (event) {
  event.notification.close();
  var data = event.notification.data || {};
  var url = webUrl(event.action === 'stop' ? data.stop : data.url);
  if (url) event.waitUntil(self.clients.openWindow(url));
});

/** The notification the push carries, or null for anything that is not one of ours. */
function readNotification(event: PushEvent): Shown | null {
  var data;
  try {
    data = event.data ? event.data.json() : null;
  } catch (err) {
    return null;
  }
  if (!data || typeof data.title !== 'string' || typeof data.body !== 'string') return null;
  return {
    title: data.title,
    body: data.body,
    url: webUrl(data.url),
    icon: webUrl(data.icon),
    tag: typeof data.tag === 'string' ? data.tag : undefined,
    stop: readStop(data.stop),
  };
}

function readStop(stop: { url?: unknown; label?: unknown } | null | undefined): Shown['stop'] {
  if (!stop || typeof stop.label !== 'string') return null;
  var url = webUrl(stop.url);
  return url ? { url: url, label: stop.label } : null;
}

/** Only http(s) pages are opened or shown: never javascript:, data: or anything else a payload could name. */
function webUrl(text: unknown): string | null {
  if (typeof text !== 'string') return null;
  try {
    var url = new URL(text);
    return url.protocol === 'https:' || url.protocol === 'http:' ? url.href : null;
  } catch (err) {
    return null;
  }
}
