import { randomUUID } from 'node:crypto';
import { Role, TaskState, type Artifact, type Message, type Part, type Task } from '@a2a-js/sdk';
import { AgentEvent, type AgentExecutor, type ExecutionEventBus, type RequestContext, type ServerCallContext, type User } from '@a2a-js/sdk/server';
import type { FastifyBaseLogger } from 'fastify';
import { InsufficientScope } from '../agents/service.ts';
import type { Caller } from '../core/http/caller.ts';
import { toProblem } from '../core/http/errors.ts';
import type { Metrics } from '../core/metrics.ts';
import { Problem, problemTypeUri } from '../core/problems.ts';
import { PaymentPipeline, type PaidCall } from '../payments/service.ts';
import type { PaymentService } from '../payments/service.ts';
import { X402_EXTENSION_URI } from './agent-card.ts';
import type { SubscriptionCallbacks } from '../core/events.ts';
import { pushRequest, pushTemplate, type DurablePushStore } from './push.ts';
import { isRecord, readSkillCall, type Skill } from './skills.ts';
import { clientPayment, completedMetadata, failedMetadata, paymentRequiredMetadata, X402_STATUS } from './x402.ts';

/** The caller a request's access token established, as the SDK carries users. */
export class CallerUser implements User {
  constructor(readonly caller: Caller) {}
  get isAuthenticated(): boolean {
    return true;
  }
  /** Tasks are kept per user name: each agent sees its own. */
  get userName(): string {
    return this.caller.agentId;
  }
}

/** What the route hands the executor about its request. */
export interface RequestFacts {
  requestId: string;
  log: FastifyBaseLogger;
  /** The client's address as the rate limits count it (an IPv6 address by its /64). */
  address: string;
}
export const REQUEST_FACTS = 'restock.request';

export function callerOf(context: ServerCallContext): Caller | undefined {
  return context.user instanceof CallerUser ? context.user.caller : undefined;
}

/** Who a kept task is charged to: its agent, or a client without a token by its address, as its payments are limited. */
export function taskHolderOf(context: ServerCallContext): string {
  const caller = callerOf(context);
  if (caller) return `agent:${caller.agentId}`;
  const facts = context.state.get(REQUEST_FACTS) as RequestFacts | undefined;
  return `address:${facts?.address ?? 'unknown'}`;
}

/** Where a task waiting for payment keeps the call it is for. */
const STORED_SKILL = 'org.restock/skill';
const STORED_INPUT = 'org.restock/input';

/** Push notifications for the subscribe skill: the configurations given with a message, and where they are kept. */
export interface A2aPush {
  store: DurablePushStore;
  callbacks: SubscriptionCallbacks;
}

/** The skill whose task may wait for news: its subscription's product back in stock. */
const NEWS_SKILL = 'subscribeAlert';

export interface A2aPayments {
  service: PaymentService;
  rateLimitPerMinute: number;
  metrics?: Metrics;
}

/**
 * Runs the skill a message names and answers with its task, at once: `completed` with an artifact
 * holding exactly what the HTTP operation answers, or `rejected` (`failed` for the service's own
 * trouble) with the same problem details as HTTP. The skill is its MCP tool's service call, made
 * with the request's caller: what that caller may see or change is the service's answer. A caller
 * without a token (only ever sent here for a skill payable per call) goes through the payment
 * pipeline, the proof read from the x402 extension's metadata.
 */
export class RestockExecutor implements AgentExecutor {
  private readonly pipeline: PaymentPipeline;

  constructor(
    private readonly skills: Map<string, Skill>,
    private readonly baseUrl: string,
    payments: A2aPayments,
    private readonly push?: A2aPush,
  ) {
    this.pipeline = new PaymentPipeline(payments.service, payments.rateLimitPerMinute, payments.metrics);
  }

  async execute(request: RequestContext, bus: ExecutionEventBus): Promise<void> {
    const facts = request.context.state.get(REQUEST_FACTS) as RequestFacts;
    let task: Task;
    try {
      task = await this.answer(request, facts);
    } catch (err) {
      // Never the SDK's own failure text, which would carry the error's message.
      const problem = toProblem(err as Error, 0);
      if (problem.status === 503) facts.log.warn({ err, problem: problem.slug }, 'A2A skill: service unavailable');
      else if (problem.status >= 500) facts.log.error({ err }, 'A2A skill failed');
      task = this.task(request, this.refusal(problem, facts));
    }
    bus.publish(AgentEvent.task(task));
  }

  async cancelTask(taskId: string, bus: ExecutionEventBus): Promise<void> {
    // Every task is answered before its message's request ends: none is left running to stop.
    bus.publish(AgentEvent.statusUpdate({ taskId, contextId: '', status: { state: TaskState.TASK_STATE_CANCELED, message: undefined, timestamp: new Date().toISOString() }, metadata: undefined }));
  }

  private async answer(request: RequestContext, facts: RequestFacts): Promise<Task> {
    const caller = callerOf(request.context);
    const call = this.callOf(request);
    if (!call.ok) return this.task(request, this.refusal(new Problem('malformed-request', call.message), facts));
    const { skill, input } = call;
    if (!caller) return this.paid(request, skill, input, facts);
    // Only a task asking for payment is ever answered, and only without a token.
    if (request.task) return this.task(request, this.refusal(new Problem('malformed-request', 'A task is answered only with its payment; with an access token, send a new message.'), facts));
    // The endpoint checked the scope already (the gate's 403); a message never runs without it.
    if (skill.scope && !caller.scopes.has(skill.scope)) return this.task(request, this.refusal(new InsufficientScope(skill.scope), facts));
    const result = await skill.run(input, caller);
    const pushes = skill.id === NEWS_SKILL ? this.push?.store.configsOf(request.taskId, caller.agentId) : undefined;
    if (pushes && this.push) return this.awaitingNews(request, skill, result, pushes, caller, this.push);
    return this.completed(request, skill, result);
  }

  /**
   * A subscription made with push notifications asked for: the task stays `working` with the
   * subscription's answer, and completes (pushed, with a `news` artifact) when the product is
   * back in stock for it. What will be pushed is written now, in the wire version the client spoke.
   */
  private async awaitingNews(request: RequestContext, skill: Skill, result: unknown, pushes: NonNullable<ReturnType<DurablePushStore['configsOf']>>, caller: Caller, push: A2aPush): Promise<Task> {
    const done = this.completed(request, skill, result);
    done.status!.message!.parts = [text(`${skill.id}: the product is back in stock for this subscription.`)];
    const subscriptionId = (skill.output.parse(result) as { subscriptionId: string }).subscriptionId;
    const template = pushTemplate(done, pushes.wire);
    for (const config of pushes.configs) await push.callbacks.attachA2aPush(caller.agentId, { ...pushRequest(config, request.taskId, subscriptionId), task: template });
    return this.task(request, {
      state: TaskState.TASK_STATE_WORKING,
      parts: [text(`${skill.id}: subscribed; this task completes, pushed to your push notification URL, when the product is back in stock for the subscription.`)],
      artifacts: done.artifacts,
    });
  }

  /** The call a message makes: its own data part, or, answering a task that asked for payment, the call that task is for. */
  private callOf(request: RequestContext) {
    if (!request.task) return readSkillCall(this.skills, dataParts(request.userMessage));
    const metadata = request.task.metadata ?? {};
    return readSkillCall(this.skills, [{ skill: metadata[STORED_SKILL], input: metadata[STORED_INPUT] }]);
  }

  /** A call without a token, paid with x402 as the extension carries it (the only way such a call is let in). */
  private async paid(request: RequestContext, skill: Skill, input: unknown, facts: RequestFacts): Promise<Task> {
    if (!skill.payableWithX402 || !skill.paid) return this.task(request, this.refusal(new Problem('unauthorized', `${skill.id} needs an access token.`), facts));
    request.context.addActivatedExtension(X402_EXTENSION_URI);
    const payment = clientPayment(request.userMessage.metadata);
    if (payment.kind === 'malformed') return this.task(request, this.refusal(new Problem('malformed-request', payment.message), facts));
    if (payment.kind === 'rejected') {
      return this.task(request, { state: TaskState.TASK_STATE_CANCELED, parts: [text('The payment was declined; nothing was done or charged.')], metadata: { [X402_STATUS]: 'payment-rejected' } });
    }
    const proof = payment.kind === 'submitted' ? { kind: 'x402' as const, payload: payment.payload } : undefined;
    const call: PaidCall = {
      operation: skill.paid.operation,
      terms: skill.paid,
      input,
      method: 'A2A',
      path: `/a2a message/send ${skill.id}`,
      url: `a2a://skill/${skill.id}`,
      requestId: facts.requestId,
    };
    let outcome;
    try {
      outcome = await this.pipeline.pay(call, proof, async (payer, paidWith) => skill.output.parse(await skill.run(input, payer, paidWith)));
    } catch (err) {
      if (!(err instanceof Problem)) throw err;
      // The handler refused (the payment is given back, or was never taken).
      return this.task(request, this.refusal(err, facts, proof && failedMetadata(err, proof.payload)));
    }
    switch (outcome.kind) {
      case 'served':
        return this.completed(request, skill, outcome.result, completedMetadata(outcome.settlement));
      case 'refused':
        return this.task(request, this.refusal(outcome.problem, facts, proof && failedMetadata(outcome.problem, proof.payload)));
      case 'payment-required': {
        if (proof) return this.task(request, this.refusal(outcome.reason, facts, failedMetadata(outcome.reason, proof.payload)));
        if (outcome.x402.accepts.length === 0) {
          const missing = outcome.unavailable.filter((gap) => gap.protocol === 'x402').map((gap) => gap.reason).join(' ');
          const problem = new Problem('payment-required', `${skill.id} is paid per call over A2A with x402, which this deployment does not take${missing ? `: ${missing}` : '.'} Call it with an access token (POST ${this.baseUrl}/api/agent/register).`, {
            extensions: { unavailable: outcome.unavailable },
          });
          return this.task(request, this.refusal(problem, facts));
        }
        return this.task(request, {
          state: TaskState.TASK_STATE_INPUT_REQUIRED,
          parts: [
            text(
              `Payment required: ${outcome.reason.slug === 'payment-required' ? `${skill.id} costs what x402.payment.required accepts.` : outcome.reason.detail} ` +
                `Answer on this task with x402.payment.status "payment-submitted" and the signed payload in x402.payment.payload, or call with an access token (POST ${this.baseUrl}/api/agent/register).`,
            ),
          ],
          metadata: paymentRequiredMetadata(outcome),
          taskMetadata: { [STORED_SKILL]: skill.id, [STORED_INPUT]: input },
        });
      }
    }
  }

  private completed(request: RequestContext, skill: Skill, result: unknown, metadata?: Record<string, unknown>): Task {
    const answer = skill.output.parse(result);
    const artifact: Artifact = { artifactId: randomUUID(), name: skill.id, description: `What the HTTP operation ${skill.id} answers.`, parts: [data(answer)], metadata: undefined, extensions: [] };
    return this.task(request, { state: TaskState.TASK_STATE_COMPLETED, parts: [text(`${skill.id}: done.`)], ...(metadata ? { metadata } : {}), artifacts: [artifact] });
  }

  /** A refusal: the HTTP API's problem details in a data part; rejected, or failed when the service itself is at fault. */
  private refusal(problem: Problem, facts: RequestFacts, metadata?: Record<string, unknown>): Status {
    const details = { type: problemTypeUri(this.baseUrl, problem.slug), title: problem.title, status: problem.status, detail: problem.detail, requestId: facts.requestId, ...problem.extensions };
    return {
      state: problem.status >= 500 ? TaskState.TASK_STATE_FAILED : TaskState.TASK_STATE_REJECTED,
      parts: [text(`${problem.title}: ${problem.detail}`), data(details)],
      ...(metadata ? { metadata } : {}),
    };
  }

  private task(request: RequestContext, status: Status): Task {
    const message: Message = {
      messageId: randomUUID(),
      contextId: request.contextId,
      taskId: request.taskId,
      role: Role.ROLE_AGENT,
      parts: status.parts,
      metadata: status.metadata,
      extensions: status.metadata && request.context.activatedExtensions?.includes(X402_EXTENSION_URI) ? [X402_EXTENSION_URI] : [],
      referenceTaskIds: [],
    };
    return {
      id: request.taskId,
      contextId: request.contextId,
      status: { state: status.state, message, timestamp: new Date().toISOString() },
      artifacts: status.artifacts ?? [],
      history: request.task?.history ?? [request.userMessage],
      metadata: status.taskMetadata ?? request.task?.metadata,
    };
  }
}

interface Status {
  state: TaskState;
  parts: Part[];
  metadata?: Record<string, unknown>;
  artifacts?: Artifact[];
  taskMetadata?: Record<string, unknown>;
}

/** The JSON values of a message's data parts. */
export function dataParts(message: Message): unknown[] {
  return message.parts.flatMap((part) => (part.content?.$case === 'data' ? [part.content.value] : []));
}

const text = (value: string): Part => ({ content: { $case: 'text', value }, metadata: undefined, filename: '', mediaType: 'text/plain' });
const data = (value: unknown): Part => ({ content: { $case: 'data', value: isRecord(value) ? value : { value } }, metadata: undefined, filename: '', mediaType: 'application/json' });
