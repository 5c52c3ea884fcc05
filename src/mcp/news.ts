import type { FastifyBaseLogger } from 'fastify';
import type { ChangeBus } from '../core/changes/bus.ts';
import { alertNewsKey, SUBSCRIPTION_NEWS, subscriptionNewsKey } from '../core/changes/topics.ts';
import type { DispatchService } from '../dispatch/service.ts';
import { subscriptionUri } from './resources.ts';
import type { McpSessions } from './sessions.ts';

/**
 * Tells the sessions following a subscription's resource that it changed, whichever process
 * heard the news first (the worker sends alerts, the web process holds the sessions): the news
 * travels on the change bus (core/events.ts announces it). A click or an order names only its
 * alert, looked up here, and only while some session follows something.
 */
export function tellFollowers(changes: ChangeBus, sessions: McpSessions, alerts: Pick<DispatchService, 'sentNotification'>, log: FastifyBaseLogger): void {
  const subscriptionOf = async (key: string): Promise<string | undefined> => {
    const id = key.slice(key.indexOf(' ') + 1);
    if (key === subscriptionNewsKey(id)) return id;
    if (key === alertNewsKey(id)) return (await alerts.sentNotification(id))?.subscription_id;
    return undefined;
  };
  changes.listen(SUBSCRIPTION_NEWS, {
    changed(key) {
      if (!sessions.following()) return;
      subscriptionOf(key).then(
        (id) => id !== undefined && sessions.notify(subscriptionUri(id)),
        (err: unknown) => log.warn({ err, key }, 'news for MCP sessions could not be traced to its subscription'),
      );
    },
    reset: () => sessions.notifyAll(),
  });
}
