import type { FastifyPluginAsync } from 'fastify';
import type { ChannelName, ChannelSending, PendingContactPoint } from './channels.ts';
import type { WorkerJob } from './jobs.ts';
import type { Operation } from './operations.ts';

/**
 * Work a process serving HTTP repeats on a timer (re-reading rotated signing keys, sweeping
 * expired sign-in links). Unlike a `WorkerJob`, it runs in every such process, worker or not.
 */
export interface PeriodicTask {
  name: string;
  everyMs: number;
  run(): Promise<unknown>;
}

/**
 * What every feature's `build` returns, so the app and the worker assemble features one way:
 * - `service`: what other features and the MCP tools call;
 * - `operations`: the feature's declared operations, bound to its service (served over HTTP, and
 *   as MCP tools and A2A skills where offered);
 * - `plugins`: app-wide Fastify plugins (gates, route collectors), registered before any route;
 *   a gate names the gates it must follow (fastify-plugin `dependencies`), checked at start-up;
 * - `routes`: the feature's HTTP routes, each plugin registered in its own encapsulated context;
 * - `jobs`: background work handed to the dispatch worker (runs where the worker runs);
 * - `maintenance`: timers of every process serving HTTP;
 * - `channel`: a contact channel's sending (texts, browser push), which the dispatch worker asks
 *   by the channel's name, and its confirmation request to a new contact point (a phone's
 *   "reply YES" text), which the subscriptions' jobs send;
 * - `close`: releases what the feature opened, after the app stops taking requests.
 */
export interface Feature<S> {
  service: S;
  operations?: Operation[];
  plugins?: FastifyPluginAsync[];
  routes?: FastifyPluginAsync[];
  jobs?: WorkerJob[];
  maintenance?: PeriodicTask[];
  channel?: {
    name: ChannelName;
    sending: ChannelSending;
    /** The service itself can send it for any store (SMS: its own Twilio account); else only stores with their own. */
    offered: boolean;
    confirm?: (point: PendingContactPoint) => Promise<void>;
  };
  close?(): Promise<void>;
}

/** One part of what the contact channels' features offer, by channel name (their sendings, whether the service can send them, their confirmation requests). */
export function channelPart<K extends keyof NonNullable<Feature<unknown>['channel']>>(features: ReadonlyArray<Feature<unknown>>, part: K): Partial<Record<ChannelName, NonNullable<NonNullable<Feature<unknown>['channel']>[K]>>> {
  return Object.fromEntries(features.flatMap(({ channel }) => (channel && channel[part] !== undefined ? [[channel.name, channel[part]]] : [])));
}

/** What fastify-plugin records on a plugin: its name and the plugins that must load before it. */
interface PluginMeta {
  name?: string;
  dependencies?: string[];
}

const metaOf = (plugin: FastifyPluginAsync): PluginMeta => (plugin as unknown as Record<symbol, PluginMeta | undefined>)[Symbol.for('plugin-meta')] ?? {};

/**
 * App-wide plugins in an order that satisfies every `dependencies` list, otherwise as given.
 * Fastify checks the same lists again as each loads, so a gate can never run before one it names.
 */
export function inDependencyOrder(plugins: FastifyPluginAsync[]): FastifyPluginAsync[] {
  const byName = new Map(plugins.map((plugin) => [metaOf(plugin).name, plugin]));
  const ordered: FastifyPluginAsync[] = [];
  const visiting = new Set<FastifyPluginAsync>();
  const visit = (plugin: FastifyPluginAsync) => {
    if (ordered.includes(plugin)) return;
    const { name = 'an unnamed plugin', dependencies = [] } = metaOf(plugin);
    if (visiting.has(plugin)) throw new Error(`The app's plugins depend on each other in a cycle through ${name}.`);
    visiting.add(plugin);
    for (const dependency of dependencies) {
      const needed = byName.get(dependency);
      if (!needed) throw new Error(`${name} needs ${dependency}, which no feature provides.`);
      visit(needed);
    }
    ordered.push(plugin);
  };
  plugins.forEach(visit);
  return ordered;
}
