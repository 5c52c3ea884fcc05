import { randomUUID } from 'node:crypto';
import { StreamResponse, type Task, type TaskPushNotificationConfig } from '@a2a-js/sdk';
import { V03PushNotificationSerializer } from '@a2a-js/sdk/compat/v0_3/server';
import { RequestMalformedError, UnsupportedOperationError } from '@a2a-js/sdk/errors';
import type { PushNotificationSender, PushNotificationStore, ServerCallContext } from '@a2a-js/sdk/server';
import type { A2aPushRequest, SubscriptionCallbacks } from '../core/events.ts';
import { Problem } from '../core/problems.ts';
import { callerOf } from './executor.ts';

/** Tasks whose push configurations wait in memory for their message to run, at most; the oldest go first. */
const PENDING_TASKS = 1000;
const CONFIGS_PER_TASK = 4;
const PENDING_FOR_MS = 3600_000;

interface Pending {
  agentId: string;
  configs: TaskPushNotificationConfig[];
  wire: '1.0' | '0.3';
  at: number;
}

/**
 * A2A push notifications, kept where they survive the process: a configuration given with the
 * message that subscribes (or set later on that task) becomes a durable endpoint of the
 * outgoing-webhooks queue, and the push goes out through its outbound guard, signatures and
 * retries when the product is back for the subscription. The SDK's own sender (a bare `fetch`)
 * is never used. The configuration's URL is checked when it is given, like a callback URL.
 */
export class DurablePushStore implements PushNotificationStore {
  private readonly pending = new Map<string, Pending>();

  constructor(private readonly callbacks: SubscriptionCallbacks) {}

  async save(taskId: string, context: ServerCallContext, config: TaskPushNotificationConfig): Promise<void> {
    const caller = callerOf(context);
    if (!caller) throw new UnsupportedOperationError('Push notifications are for callers with an access token.');
    try {
      this.callbacks.checkUrl(config.url, '/configuration/taskPushNotificationConfig/url');
    } catch (err) {
      if (err instanceof Problem) throw new RequestMalformedError(`taskPushNotificationConfig.url: ${err.detail}`);
      throw err;
    }
    if (!config.id) config.id = randomUUID();
    const made = await this.callbacks.subscriptionOfTask(caller.agentId, taskId);
    if (made) {
      await this.callbacks.attachA2aPush(caller.agentId, { ...pushRequest(config, taskId, made.subscriptionId), task: made.task });
    }
    this.remember(taskId, caller.agentId, config, wireOf(context));
  }

  async load(taskId: string, context: ServerCallContext): Promise<TaskPushNotificationConfig[]> {
    const entry = this.pending.get(taskId);
    const caller = callerOf(context);
    return entry && caller && entry.agentId === caller.agentId ? entry.configs.map((config) => structuredClone(config)) : [];
  }

  async delete(taskId: string, context: ServerCallContext, configId?: string): Promise<void> {
    const entry = this.pending.get(taskId);
    const caller = callerOf(context);
    if (!entry || !caller || entry.agentId !== caller.agentId) return;
    entry.configs = configId ? entry.configs.filter((config) => config.id !== configId) : [];
  }

  /** The configurations the message's own task was given, for the executor that makes its subscription. */
  configsOf(taskId: string, agentId: string): { configs: TaskPushNotificationConfig[]; wire: '1.0' | '0.3' } | undefined {
    const entry = this.pending.get(taskId);
    return entry && entry.agentId === agentId && entry.configs.length > 0 ? { configs: entry.configs, wire: entry.wire } : undefined;
  }

  private remember(taskId: string, agentId: string, config: TaskPushNotificationConfig, wire: '1.0' | '0.3'): void {
    const now = Date.now();
    for (const [id, entry] of this.pending) if (now - entry.at > PENDING_FOR_MS) this.pending.delete(id);
    const entry = this.pending.get(taskId) ?? { agentId, configs: [], wire, at: now };
    if (entry.agentId !== agentId) return;
    if (entry.configs.length >= CONFIGS_PER_TASK) throw new RequestMalformedError(`A task takes at most ${CONFIGS_PER_TASK} push notification configurations.`);
    entry.configs = [...entry.configs.filter((kept) => kept.id !== config.id), structuredClone(config)];
    this.pending.delete(taskId);
    this.pending.set(taskId, entry);
    while (this.pending.size > PENDING_TASKS) this.pending.delete(this.pending.keys().next().value!);
  }
}

/** Nothing is pushed while the message is answered: the answer carries it, and later news goes through the queue. */
export const queuedPushSender: PushNotificationSender = { send: async () => undefined };

export function pushRequest(config: TaskPushNotificationConfig, taskId: string, subscriptionId: string): Omit<A2aPushRequest, 'task'> {
  return {
    subscriptionId,
    taskId,
    url: config.url,
    ...(config.token ? { token: config.token } : {}),
    ...(config.authentication?.scheme && config.authentication.credentials ? { authentication: { scheme: config.authentication.scheme, credentials: config.authentication.credentials } } : {}),
  };
}

/** The task as it will be pushed once completed, in the wire version the client spoke (1.0: a StreamResponse; 0.3: the Task). */
export function pushTemplate(task: Task, wire: '1.0' | '0.3'): A2aPushRequest['task'] {
  const response = { payload: { $case: 'task' as const, value: task } };
  if (wire === '1.0') return { wire, body: StreamResponse.toJSON(response) as Record<string, unknown> };
  return { wire, body: JSON.parse(new V03PushNotificationSerializer().serialize(response, task).body) as Record<string, unknown> };
}

export function wireOf(context: ServerCallContext): '1.0' | '0.3' {
  const version = context.requestedVersion;
  return version === undefined || version.startsWith('0.') ? '0.3' : '1.0';
}
