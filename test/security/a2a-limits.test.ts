/**
 * The A2A task store and request shapes (security issue, findings 4 and 8): a task is kept only
 * while it is of use (a completed answer an agent may read again, an x402 offer waiting for its
 * payment), and what is kept is bounded per agent, per address without a token and in all, by
 * count and by bytes; a body nested deep enough to overflow the SDK's copies is refused cleanly.
 * With the official A2A client where it can say it, raw JSON-RPC where the test needs a shape the
 * client would not send. Each test failed on the code before its fix.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { HTTP_EXTENSION_HEADER, TaskState } from '@a2a-js/sdk';
import type { Client } from '@a2a-js/sdk/client';
import { a2aClient, asTask, resultOf, skillMessage, withToken } from '../fixtures/a2a.ts';
import { uniqueEmail } from '../fixtures/agents.ts';
import { dialectSkip, testDialects } from '../fixtures/app.ts';
import { failOnLeakedHandles } from '../fixtures/leaks.ts';
import { registerAgent, startListeningApp, type ListeningApp } from '../fixtures/oauth.ts';
import { after, before, describe, it } from '../fixtures/suites.ts';

failOnLeakedHandles();

/** The bounds docs/a2a.md gives (src/a2a/task-store.ts). */
const PER_AGENT_TASKS = 100;
const PER_AGENT_BYTES = 1024 * 1024;
const TOTAL_BYTES = 32 * 1024 * 1024;
const X402_EXTENSION = 'https://github.com/google-agentic-commerce/a2a-x402/blob/main/spec/v0.2';
const V1 = { 'a2a-version': '1.0' };

interface RpcAnswer {
  result?: { task?: { id: string; status: { state: string } } };
  error?: { code: number; message: string };
}

for (const dialect of testDialects()) {
  describe(`A2A limits on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    let service: ListeningApp;
    let client: Client;

    before(async () => {
      service = await startListeningApp(dialect, {
        // Large bodies for the total bound; the default stays 16 KiB.
        BODY_LIMIT_BYTES: String(2 * 1024 * 1024),
        // Offers are made without reaching a facilitator; no payment is ever verified here.
        X402_PAY_TO: `0x${'1'.repeat(40)}`,
        X402_FACILITATOR_URL: 'http://127.0.0.1:9',
      });
      client = await a2aClient(service.baseUrl);
    });
    after(async () => {
      await service?.close();
    });

    /** An agent with a subscription of its own, which getSubscription answers as completed. */
    async function agentWithSubscription() {
      const { token } = await registerAgent(service.app);
      const created = resultOf(await send(token, 'subscribeAlert', { productId: 'gid://shopify/Product/4', email: uniqueEmail('limits') }));
      return { token, subscriptionId: created.subscriptionId as string };
    }
    const send = (token: string, skill: string, input: unknown) =>
      client.sendMessage({ tenant: '', message: skillMessage(skill, input), configuration: undefined, metadata: undefined }, withToken(token));
    const read = (token: string, id: string) => client.getTask({ tenant: '', id, historyLength: undefined }, withToken(token));
    const isKept = (token: string, id: string) =>
      read(token, id).then(
        () => true,
        (err: unknown) => {
          assert.match(String(err), /Task not found/);
          return false;
        },
      );
    /** One getSubscription whose message carries `padding` bytes of metadata, sent as raw JSON-RPC. */
    async function padded(token: string, subscriptionId: string, padding: number): Promise<string> {
      const message = { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ data: { skill: 'getSubscription', input: { subscriptionId } } }], metadata: { note: 'x'.repeat(padding) } };
      const answer = await rpc({ jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message } }, { ...V1, authorization: `Bearer ${token}` });
      assert.equal(answer.result?.task?.status.state, 'TASK_STATE_COMPLETED', JSON.stringify(answer).slice(0, 300));
      return answer.result!.task!.id;
    }
    async function rpc(body: unknown, headers: Record<string, string>, remoteAddress?: string): Promise<RpcAnswer> {
      const res = await service.app.inject({ method: 'POST', url: '/a2a', headers: { 'content-type': 'application/json', ...headers }, payload: typeof body === 'string' ? body : JSON.stringify(body), ...(remoteAddress ? { remoteAddress } : {}) });
      assert.equal(res.statusCode, 200, res.body.slice(0, 300));
      return res.json() as RpcAnswer;
    }
    /** Without a token, from `address`: subscribeAlert paid with x402, answered with an offer. */
    async function offer(address: string): Promise<string> {
      const message = { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ data: { skill: 'subscribeAlert', input: { productId: 'gid://shopify/Product/5', email: uniqueEmail('offer') } } }] };
      const answer = await rpc({ jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message } }, { ...V1, [HTTP_EXTENSION_HEADER]: X402_EXTENSION }, address);
      assert.equal(answer.result?.task?.status.state, 'TASK_STATE_INPUT_REQUIRED', JSON.stringify(answer).slice(0, 300));
      return answer.result!.task!.id;
    }
    /** Declines the offer of task `taskId`: the task is found (and cancelled), or the error says why not. */
    async function decline(taskId: string, address: string): Promise<RpcAnswer> {
      const message = { messageId: randomUUID(), role: 'ROLE_USER', taskId, parts: [{ text: 'No, thank you.' }], metadata: { 'x402.payment.status': 'payment-rejected' } };
      return rpc({ jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message } }, { ...V1, [HTTP_EXTENSION_HEADER]: X402_EXTENSION }, address);
    }

    it('finding 4: a refused message is not kept', async () => {
      const { token, subscriptionId } = await agentWithSubscription();
      const answered = asTask(await send(token, 'getSubscription', { subscriptionId }));
      assert.equal(await isKept(token, answered.id), true, 'a completed answer is read again');
      const refused = asTask(await send(token, 'getSubscription', { subscriptionId: 'sub_0123456789abcdefghijklmnop' }));
      assert.equal(refused.status?.state, TaskState.TASK_STATE_REJECTED);
      assert.equal(await isKept(token, refused.id), false, 'a refusal is not kept');

      // The offer is kept for its payment; once declined, nothing is left to answer.
      const offered = await offer('198.51.100.7');
      const declined = await decline(offered, '198.51.100.7');
      assert.equal(declined.result?.task?.status.state, 'TASK_STATE_CANCELED', JSON.stringify(declined));
      const again = await decline(offered, '198.51.100.7');
      assert.match(String(again.error?.message), /Task not found/, JSON.stringify(again));
    });

    it("finding 4: one agent's tasks are bounded by count", async () => {
      const { token, subscriptionId } = await agentWithSubscription();
      const ids: string[] = [];
      for (let i = 0; i <= PER_AGENT_TASKS; i++) ids.push(asTask(await send(token, 'getSubscription', { subscriptionId })).id);
      assert.equal(await isKept(token, ids[0]!), false, 'the oldest went');
      assert.equal(await isKept(token, ids[1]!), true);
      assert.equal(await isKept(token, ids.at(-1)!), true);
    });

    it("finding 4: one agent's tasks are bounded by bytes", async () => {
      const { token, subscriptionId } = await agentWithSubscription();
      const padding = 64 * 1024;
      const ids: string[] = [];
      // Far fewer tasks than the count allows, more bytes than the agent may hold.
      for (let i = 0; i < Math.ceil(PER_AGENT_BYTES / padding) + 2; i++) ids.push(await padded(token, subscriptionId, padding));
      assert.ok(ids.length < PER_AGENT_TASKS);
      assert.equal(await isKept(token, ids[0]!), false, 'the oldest went');
      assert.equal(await isKept(token, ids.at(-1)!), true);
      // Another agent's tasks are not pushed out by this one's.
      const other = await agentWithSubscription();
      const kept = asTask(await send(other.token, 'getSubscription', { subscriptionId: other.subscriptionId })).id;
      for (let i = 0; i < 4; i++) await padded(token, subscriptionId, padding);
      assert.equal(await isKept(other.token, kept), true);
    });

    it('finding 4: a client without a token is bounded by its address', async () => {
      const elsewhere = await offer('198.51.100.20');
      const ids: string[] = [];
      for (let i = 0; i <= PER_AGENT_TASKS; i++) ids.push(await offer('198.51.100.21'));
      assert.match(String((await decline(ids[0]!, '198.51.100.21')).error?.message), /Task not found/, 'its oldest offer went');
      assert.equal((await decline(ids.at(-1)!, '198.51.100.21')).result?.task?.status.state, 'TASK_STATE_CANCELED');
      assert.equal((await decline(elsewhere, '198.51.100.20')).result?.task?.status.state, 'TASK_STATE_CANCELED', "another address's offer stays");
    });

    it('finding 4: a message cannot have the store copy many tasks at once', async () => {
      const { token, subscriptionId } = await agentWithSubscription();
      const first = asTask(await send(token, 'getSubscription', { subscriptionId })).id;
      const referencing = (count: number) =>
        client.sendMessage({ tenant: '', message: skillMessage('getSubscription', { subscriptionId }, { referenceTaskIds: Array.from({ length: count }, () => first) }), configuration: undefined, metadata: undefined }, withToken(token));
      resultOf(await referencing(4));
      await assert.rejects(referencing(400), /referenceTaskIds/);
    });

    it('finding 4: the store as a whole is bounded', async () => {
      const padding = 700 * 1024;
      const agents = [];
      // Each agent within its own bound, all of them together over the store's.
      for (let i = 0; i < Math.ceil(TOTAL_BYTES / padding) + 2; i++) {
        const agent = await agentWithSubscription();
        agents.push({ ...agent, task: await padded(agent.token, agent.subscriptionId, padding) });
      }
      assert.equal(await isKept(agents[0]!.token, agents[0]!.task), false, 'the oldest went');
      assert.equal(await isKept(agents.at(-1)!.token, agents.at(-1)!.task), true);
    });

    it('finding 8: deep JSON gets no internal error text', async () => {
      const { token } = await registerAgent(service.app);
      const deep = '['.repeat(10_000) + ']'.repeat(10_000);
      const part = `{"data": {"skill": "getSubscription", "input": {"subscriptionId": "sub_0123456789abcdefghijklmnop", "extra": ${deep}}}}`;
      const legacyPart = `{"kind": "data", "data": {"skill": "getSubscription", "input": {"subscriptionId": "sub_0123456789abcdefghijklmnop"}}}`;
      const bodies: Array<[string, Record<string, string>]> = [
        [`{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {"messageId": "m1", "role": "ROLE_USER", "parts": [${part}]}}}`, V1],
        [`{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"data": {"skill": "getSubscription", "input": {"subscriptionId": "sub_0123456789abcdefghijklmnop"}}}], "metadata": {"deep": ${deep}}}}}`, V1],
        [`{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"data": {"skill": "getSubscription", "input": {"subscriptionId": "sub_0123456789abcdefghijklmnop"}}}]}, "extra": ${deep}}}`, V1],
        [`{"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": {"kind": "message", "messageId": "m1", "role": "user", "parts": [${legacyPart}], "metadata": {"deep": ${deep}}}}}`, {}],
        [`{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": ${deep}}}`, V1],
      ];
      for (const [body, headers] of bodies) {
        const res = await fetch(`${service.baseUrl}/a2a`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${token}`, ...headers }, body });
        const text = await res.text();
        assert.equal(res.status, 200, text.slice(0, 300));
        const answer = JSON.parse(text) as RpcAnswer;
        assert.ok(answer.error, text.slice(0, 300));
        assert.notEqual(answer.error.code, -32603, text.slice(0, 300));
        assert.doesNotMatch(text, /Maximum call stack|RangeError|\bat \w+ \(/, text.slice(0, 300));
      }
    });
  });
}
