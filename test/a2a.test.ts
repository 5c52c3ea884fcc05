/**
 * The A2A endpoint with the official A2A client (`@a2a-js/sdk/client`) over real HTTP: the card
 * discovered from the base URL and generated from the operations (the same input schemas as the
 * MCP tools, the same scopes as the OpenAPI document); each skill run with a token and answering
 * what its HTTP operation answers (a subscription made here is the one made over HTTP); tasks read
 * again; another store's data absent; a token without the scope refused exactly as over HTTP and
 * MCP; no token, a bad token, malformed messages (nothing stored); the A2A 0.3 wire.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { HTTP_EXTENSION_HEADER, TaskState, type Task } from '@a2a-js/sdk';
import type { PaymentRequired } from '@x402/core/types';
import type { Client } from '@a2a-js/sdk/client';
import { Client as McpClient, InsufficientScopeError, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { a2aClient, asTask, httpRefusal, problemOf, resultOf, skillMessage, withToken } from './fixtures/a2a.ts';
import { after, before, describe, it } from './fixtures/suites.ts';
import { call, expectStatus, storeWithAgent, uniqueDomain, uniqueEmail, type StoreAgent } from './fixtures/agents.ts';
import { dialectSkip, tableDigests, testDialects } from './fixtures/app.ts';
import { failOnLeakedHandles } from './fixtures/leaks.ts';
import { bearerChallenge, registerAgent, startListeningApp, type ListeningApp } from './fixtures/oauth.ts';
import { startX402Chain, x402Payment, type X402Chain } from './fixtures/x402-chain.ts';

failOnLeakedHandles();

const SKILLS = ['cancelSubscription', 'checkoutPlan', 'getAlertQueue', 'getStockStatus', 'getSubscription', 'subscribeAlert'];

/** A problem without the fields that name the request it answered. */
const sameProblem = (problem: Record<string, unknown>) => {
  const { instance: _instance, requestId: _requestId, ...rest } = problem;
  return rest;
};

for (const dialect of testDialects()) {
  describe(`A2A on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    let service: ListeningApp;
    let client: Client;
    let writer: string;
    let reader: string;
    let store: StoreAgent;
    const mcpClients: McpClient[] = [];

    before(async () => {
      service = await startListeningApp(dialect);
      writer = (await registerAgent(service.app)).token;
      reader = (await registerAgent(service.app, { scope: 'api:read' })).token;
      store = await storeWithAgent(service.app, service.database, 'a2a');
      client = await a2aClient(service.baseUrl);
    });
    after(async () => {
      await Promise.all(mcpClients.map((c) => c.close()));
      await service.close();
    });

    const send = (token: string | undefined, skill: string, input: unknown, headers: Record<string, string> = {}) =>
      client.sendMessage({ tenant: '', message: skillMessage(skill, input), configuration: undefined, metadata: undefined }, withToken(token, headers));
    const rpc = (body: unknown, headers: Record<string, string> = {}) =>
      fetch(`${service.baseUrl}/a2a`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: typeof body === 'string' ? body : JSON.stringify(body) });

    async function mcp(token: string): Promise<McpClient> {
      const mcpClient = new McpClient({ name: 'a2a-test', version: '1.0.0' });
      await mcpClient.connect(new StreamableHTTPClientTransport(new URL(`${service.baseUrl}/mcp`), { authProvider: { token: async () => token } }));
      mcpClients.push(mcpClient);
      return mcpClient;
    }

    it('is discovered from the base URL: a card of the six skills, each its operation’s scope and its MCP tool’s input schema', async () => {
      const card = await client.getAgentCard();
      assert.deepEqual(card.skills.map((s) => s.id).sort(), SKILLS);
      assert.deepEqual(card.supportedInterfaces.map((i) => [i.url, i.protocolBinding, i.protocolVersion]), [
        [`${service.baseUrl}/a2a`, 'JSONRPC', '1.0'],
        [`${service.baseUrl}/a2a`, 'JSONRPC', '0.3'],
      ]);
      const openapi = expectStatus(await call(service.app, 'GET', '/openapi.json'), 200) as { paths: Record<string, Record<string, { operationId?: string; security?: Array<{ agentToken: string[] }> }>> };
      const scopes = new Map(Object.values(openapi.paths).flatMap((item) => Object.values(item)).map((op) => [op.operationId, op.security?.[0]?.agentToken[0]]));
      const inputs = card.capabilities!.extensions.find((e) => e.uri === `${service.baseUrl}/docs#a2a`)!.params!.skills as Record<string, { input: unknown; scope: string }>;
      const tools = new Map((await (await mcp(writer)).listTools()).tools.map((tool) => [tool.name, tool]));
      for (const skill of card.skills) {
        const scope = scopes.get(skill.id);
        assert.ok(scope, `${skill.id} is an operation of the OpenAPI document with a scope`);
        assert.deepEqual(skill.securityRequirements[0]?.schemes.agentToken?.list, [scope], skill.id);
        assert.equal(inputs[skill.id]!.scope, scope);
        const tool = tools.get(skill.id.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`))!;
        assert.deepEqual(inputs[skill.id]!.input, tool.inputSchema, `${skill.id}: the MCP tool's input schema`);
        // Its example is a message this endpoint takes.
        const example = JSON.parse(skill.examples[0]!) as { skill: string; input: unknown };
        assert.equal(example.skill, skill.id);
      }
      const x402 = card.capabilities!.extensions.find((e) => e.uri.includes('a2a-x402'))!;
      assert.deepEqual(x402.params, { skills: ['subscribeAlert'] });
      assert.equal(card.securitySchemes.agentToken?.scheme?.$case, 'httpAuthSecurityScheme');
    });

    it('subscribes with a token: the subscription made over HTTP with the same input is this one, read and cancelled over A2A as HTTP reads it', async () => {
      const input = { productId: 'gid://shopify/Product/4242', variantId: 'gid://shopify/ProductVariant/4243', email: uniqueEmail('a2a') };
      const answer = await send(writer, 'subscribeAlert', input);
      const created = resultOf(answer);
      assert.deepEqual(Object.keys(created).sort(), ['status', 'subscriptionId'], 'exactly what the HTTP operation answers');
      assert.equal(created.status, 'active');
      const http = expectStatus(await call(service.app, 'POST', '/api/v1/alerts/subscribe', { token: writer, body: input }), 200);
      assert.deepEqual(http, created, 'the same subscription');

      // The same fields stored as for one made over HTTP (another address, the same caller).
      const other = expectStatus(await call(service.app, 'POST', '/api/v1/alerts/subscribe', { token: writer, body: { ...input, email: uniqueEmail('http') } }), 200);
      const rows = await service.database.db.selectFrom('subscriptions').selectAll().where('id', 'in', [created.subscriptionId as string, other.subscriptionId]).execute();
      const perRecord = ['id', 'email', 'email_key', 'created_at', 'updated_at'];
      const fields = (row: Record<string, unknown>) => Object.fromEntries(Object.entries(row).filter(([key]) => !perRecord.includes(key)));
      assert.equal(rows.length, 2);
      assert.deepEqual(fields(rows[0]!), fields(rows[1]!));

      const read = resultOf(await send(writer, 'getSubscription', { subscriptionId: created.subscriptionId }));
      assert.deepEqual(read, expectStatus(await call(service.app, 'GET', `/api/v1/alerts/${created.subscriptionId}`, { token: writer }), 200));
      const cancelled = resultOf(await send(writer, 'cancelSubscription', { subscriptionId: created.subscriptionId }));
      assert.equal(cancelled.status, 'cancelled');
      assert.deepEqual(cancelled, expectStatus(await call(service.app, 'GET', `/api/v1/alerts/${created.subscriptionId}`, { token: writer }), 200));
    });

    it('reads a task again with tasks/get, for the agent that sent it only', async () => {
      const task = asTask(await send(writer, 'subscribeAlert', { productId: 'gid://shopify/Product/77', email: uniqueEmail('again') }));
      const again = await client.getTask({ tenant: '', id: task.id, historyLength: undefined }, withToken(writer));
      assert.equal(again.status?.state, TaskState.TASK_STATE_COMPLETED);
      assert.deepEqual(resultOf(again), resultOf(task));
      await assert.rejects(client.getTask({ tenant: '', id: task.id, historyLength: undefined }, withToken(reader)), /Task not found/);
    });

    it("gives a store's agent its stock, queue and checkout, and answers another store's stock as absent", async () => {
      expectStatus(await call(service.app, 'POST', `/api/v1/stores/${store.domain}/inventory`, { token: store.token, body: { items: [{ productId: 'gid://shopify/Product/5151', available: 4 }] } }), 200);
      const stock = resultOf(await send(store.token, 'getStockStatus', { shop: store.domain }));
      assert.deepEqual(stock, expectStatus(await call(service.app, 'GET', `/api/v1/stores/${store.domain}/stock`, { token: store.token }), 200));
      assert.ok((stock.items as Array<{ productId: string }>).some((item) => item.productId === 'gid://shopify/Product/5151'));
      const queue = resultOf(await send(store.token, 'getAlertQueue', { shop: store.domain }));
      assert.deepEqual(queue, expectStatus(await call(service.app, 'GET', `/api/v1/stores/${store.domain}/queue`, { token: store.token }), 200));
      const checkout = resultOf(await send(store.token, 'checkoutPlan', { plan: 'starter', shop: store.domain }));
      assert.match(checkout.checkoutUrl as string, /\/checkout\/cs_/);

      const foreign = uniqueDomain('foreign');
      const before = await tableDigests(service.database);
      const refused = await send(store.token, 'getStockStatus', { shop: foreign });
      assert.equal(asTask(refused).status?.state, TaskState.TASK_STATE_REJECTED);
      const http = expectStatus(await call(service.app, 'GET', `/api/v1/stores/${foreign}/stock`, { token: store.token }), 404);
      assert.deepEqual(sameProblem(problemOf(refused)), sameProblem(http));
      assert.deepEqual(await tableDigests(service.database), before);
    });

    it('refuses a token without the scope with the same error as HTTP and MCP, and stores nothing', async () => {
      const input = { productId: 'gid://shopify/Product/1', email: uniqueEmail('no-scope') };
      const writeOnly = (await registerAgent(service.app, { scope: 'api:write' })).token;
      const before = await tableDigests(service.database);
      const refused = await send(reader, 'subscribeAlert', input).then(
        () => assert.fail('a token without api:write subscribes'),
        (err: unknown) => httpRefusal(err),
      );
      const http = await call(service.app, 'POST', '/api/v1/alerts/subscribe', { token: reader, body: input });
      assert.equal(refused.status, 403);
      assert.equal(refused.status, http.statusCode);
      assert.deepEqual(sameProblem(refused.body), sameProblem(http.json()));
      assert.equal(refused.body.error, 'insufficient_scope');
      assert.equal(refused.body.scope, 'api:write');
      // The same challenge header as HTTP's.
      const raw = await rpc({ jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: { messageId: 'm1', role: 'ROLE_USER', parts: [{ data: { skill: 'subscribeAlert', input } }] } } }, { authorization: `Bearer ${reader}`, 'a2a-version': '1.0' });
      assert.equal(raw.status, 403);
      assert.deepEqual(bearerChallenge(raw.headers.get('www-authenticate') ?? undefined), bearerChallenge(http.headers['www-authenticate']));
      await raw.arrayBuffer();
      // MCP names the same scope for the same tool.
      await assert.rejects((await mcp(reader)).callTool({ name: 'subscribe_alert', arguments: input }), (err: unknown) => err instanceof InsufficientScopeError && err.requiredScope === refused.body.scope);
      // A token holding only api:write cannot read stock.
      const read = await send(writeOnly, 'getStockStatus', { shop: store.domain }).then(
        () => assert.fail('api:write reads stock'),
        (err: unknown) => httpRefusal(err),
      );
      assert.equal(read.body.scope, 'api:read');
      assert.deepEqual(await tableDigests(service.database), before);
    });

    it('without a token answers 401 pointing to the protected resource metadata; a bad token is invalid_token', async () => {
      const refused = await send(undefined, 'getSubscription', { subscriptionId: 'sub_x' }).then(
        () => assert.fail('served without a token'),
        (err: unknown) => httpRefusal(err),
      );
      assert.equal(refused.status, 401);
      const raw = await rpc({ jsonrpc: '2.0', id: 1, method: 'message/send', params: { message: { messageId: 'm', role: 'user', parts: [{ kind: 'data', data: { skill: 'getStockStatus', input: { shop: store.domain } } }] } } });
      assert.equal(raw.status, 401);
      assert.match(raw.headers.get('www-authenticate') ?? '', /^Bearer .*resource_metadata="http:\/\/127\.0\.0\.1:\d+\/\.well-known\/oauth-protected-resource"/);
      await raw.arrayBuffer();
      // A paid skill, from a client that did not activate the x402 extension: told how to pay.
      const paid = await send(undefined, 'subscribeAlert', { productId: 'gid://shopify/Product/1', email: uniqueEmail('unpaid') }).then(
        () => assert.fail('served without a token or payment'),
        (err: unknown) => httpRefusal(err),
      );
      assert.equal(paid.status, 401);
      assert.match(paid.body.detail as string, /x402 extension.*A2A-Extensions/);
      // With the extension, where x402 takes no payments here: rejected, saying what is missing.
      const before = await tableDigests(service.database);
      const unpayable = await send(undefined, 'subscribeAlert', { productId: 'gid://shopify/Product/1', email: uniqueEmail('unpayable') }, { [HTTP_EXTENSION_HEADER]: X402_EXTENSION });
      const problem = problemOf(unpayable);
      assert.equal(problem.status, 402);
      assert.match(problem.detail as string, /X402_PAY_TO/);
      assert.deepEqual(await tableDigests(service.database), before);
      const forged = await rpc({ jsonrpc: '2.0', id: 1, method: 'GetTask', params: { id: 'x' } }, { authorization: 'Bearer not.a.token' });
      assert.equal(forged.status, 401);
      assert.match(forged.headers.get('www-authenticate') ?? '', /error="invalid_token"/);
      await forged.arrayBuffer();
    });

    it('answers malformed messages with JSON-RPC errors naming what is wrong, never a 500, and stores nothing', async () => {
      const before = await tableDigests(service.database);
      const v1 = { authorization: `Bearer ${writer}`, 'a2a-version': '1.0' };
      const message = (parts: unknown, extra: Record<string, unknown> = {}) => ({ jsonrpc: '2.0', id: 7, method: 'SendMessage', params: { message: { messageId: randomUUID(), role: 'ROLE_USER', parts, ...extra } } });
      const cases: Array<[unknown, RegExp]> = [
        [message([{ text: 'subscribe me please' }]), /0 data parts/],
        [message([{ data: { skill: 'subscribeEverything', input: {} } }]), /No skill "subscribeEverything"; the skills are/],
        [message([{ data: { skill: 'subscribeAlert', input: { productId: 'gid://shopify/Product/1', email: 'nope' } } }]), /\/input\/email/],
        [message([{ data: { skill: 'subscribeAlert', input: { email: 'a@b.co' } } }]), /\/input\/productId/],
        [message([{ data: { skill: 'subscribeAlert', input: 'everything' } }]), /"input" of subscribeAlert must be an object/],
        [message([{ data: { input: {} } }]), /"skill" is missing/],
        [message([{ data: { skill: 'getSubscription', input: {} } }, { data: { skill: 'getSubscription', input: {} } }]), /2 data parts/],
        [message([null]), /parts\[0\] must be an object/],
        [message([]), /non-empty array/],
        [message([{ data: { skill: 'getSubscription', input: {} } }], { taskId: 'task-of-nobody' }), /answers its request for payment/],
        [{ jsonrpc: '2.0', id: 7, method: 'SendMessage', params: {} }, /params\.message is required/],
        [{ jsonrpc: '2.0', id: 7, method: 'SendStreamingMessage', params: {} }, /every skill answers at once/],
        [{ jsonrpc: '2.0', id: 7, method: 'ListTasks', params: {} }, /not listed/],
        [{ jsonrpc: '2.0', id: 7, method: 'NoSuchMethod', params: {} }, /method/i],
        [{ id: 7, method: 'SendMessage' }, /Invalid JSON-RPC Request/],
        [JSON.stringify(JSON.stringify(message([{ data: { skill: 'getSubscription', input: { subscriptionId: 'sub_x' } } }]))), /one JSON-RPC 2\.0 request object/],
        [[message([{ data: { skill: 'getSubscription', input: { subscriptionId: 'sub_x' } } }])], /one JSON-RPC 2\.0 request object/],
      ];
      for (const [body, reason] of cases) {
        const res = await rpc(body, v1);
        const text = await res.text();
        assert.equal(res.status, 200, text);
        const answer = JSON.parse(text) as { jsonrpc: string; error?: { code: number; message: string } };
        assert.ok(answer.error, `an error for ${JSON.stringify(body)}: ${text}`);
        assert.ok(answer.error.code !== -32603, `not an internal error: ${text}`);
        assert.match(answer.error.message, reason, text);
      }
      // With the official client: the error names the field.
      await assert.rejects(send(writer, 'subscribeAlert', { productId: 'gid://shopify/Product/1', email: 'nope' }), /\/input\/email/);
      const broken = await rpc('{"jsonrpc": "2.0", ', v1);
      assert.equal(broken.status, 400);
      assert.match(((await broken.json()) as { detail: string }).detail, /not valid JSON/);
      assert.deepEqual(await tableDigests(service.database), before);
    });

    it('speaks A2A 0.3 to a client that names no version: message/send and tasks/get', async () => {
      const input = { productId: 'gid://shopify/Product/303', email: uniqueEmail('v03') };
      const res = await rpc({ jsonrpc: '2.0', id: 'a', method: 'message/send', params: { message: { kind: 'message', messageId: randomUUID(), role: 'user', parts: [{ kind: 'data', data: { skill: 'subscribeAlert', input } }] } } }, { authorization: `Bearer ${writer}` });
      const { result } = (await res.json()) as { result: { kind: string; id: string; status: { state: string }; artifacts: Array<{ parts: Array<{ kind: string; data: unknown }> }> } };
      assert.equal(result.kind, 'task');
      assert.equal(result.status.state, 'completed');
      const [part] = result.artifacts[0]!.parts;
      assert.equal(part!.kind, 'data');
      assert.deepEqual(part!.data, expectStatus(await call(service.app, 'POST', '/api/v1/alerts/subscribe', { token: writer, body: input }), 200));
      const read = await rpc({ jsonrpc: '2.0', id: 'b', method: 'tasks/get', params: { id: result.id } }, { authorization: `Bearer ${writer}` });
      assert.equal(((await read.json()) as { result: { id: string } }).result.id, result.id);
      // The 0.3 card is what a client naming no version reads.
      const card = (await (await fetch(`${service.baseUrl}/.well-known/agent-card.json`)).json()) as Record<string, unknown>;
      assert.equal(card.url, `${service.baseUrl}/a2a`);
      assert.equal(card.preferredTransport, 'JSONRPC');
      assert.equal(card.protocolVersion, '0.3');
      assert.deepEqual((card.skills as Array<{ id: string; security: unknown }>).find((s) => s.id === 'getSubscription')!.security, [{ agentToken: ['api:read'] }]);
    });
  });
}

const X402_EXTENSION = 'https://github.com/google-agentic-commerce/a2a-x402/blob/main/spec/v0.2';
const PRICE = 50_000n;

/** The x402 extension's metadata on a task's status message. */
function x402Of(task: Task): Record<string, unknown> {
  return (task.status?.message?.metadata ?? {}) as Record<string, unknown>;
}

for (const dialect of testDialects()) {
  describe(`paid A2A skills (x402 extension) on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    let chain: X402Chain;
    let service: ListeningApp;
    let client: Client;
    const paying = { [HTTP_EXTENSION_HEADER]: X402_EXTENSION };

    before(async () => {
      chain = await startX402Chain();
      service = await startListeningApp(dialect, {
        X402_PAY_TO: chain.payTo.address,
        X402_NETWORK: chain.network,
        X402_ASSET: chain.usdc,
        X402_FACILITATOR_URL: chain.facilitatorUrl,
      });
      client = await a2aClient(service.baseUrl);
    });
    after(async () => {
      await service.close();
      await chain.close();
    });

    const ask = (skill: string, input: unknown) =>
      client.sendMessage({ tenant: '', message: skillMessage(skill, input), configuration: undefined, metadata: undefined }, withToken(undefined, paying));
    /** The client's answer on the task that asked for payment. */
    const answerTask = (taskId: string, metadata: Record<string, unknown>) =>
      client.sendMessage(
        { tenant: '', message: { ...skillMessage('', {}), taskId, parts: [{ content: { $case: 'text', value: 'Here is the payment.' }, metadata: undefined, filename: '', mediaType: 'text/plain' }], metadata }, configuration: undefined, metadata: undefined },
        withToken(undefined, paying),
      );

    it('asks for payment, takes it on the same task and subscribes: settled on chain, receipts in metadata; the same payment again is refused', async () => {
      const input = { productId: 'gid://shopify/Product/88', email: uniqueEmail('a2a-x402') };
      const before = await tableDigests(service.database);
      const asked = asTask(await ask('subscribeAlert', input));
      assert.equal(asked.status?.state, TaskState.TASK_STATE_INPUT_REQUIRED);
      assert.deepEqual(await tableDigests(service.database), before, 'asking stores nothing');
      const offer = x402Of(asked);
      assert.equal(offer['x402.payment.status'], 'payment-required');
      const required = offer['x402.payment.required'] as PaymentRequired;
      assert.equal(required.x402Version, 2);
      assert.equal(required.resource.url, 'a2a://skill/subscribeAlert');
      assert.equal(required.accepts[0]!.amount, String(PRICE));

      const payment = await x402Payment(chain, required);
      const balance = await chain.usdcBalance(chain.payTo.address);
      const paid = asTask(await answerTask(asked.id, { 'x402.payment.status': 'payment-submitted', 'x402.payment.payload': payment }));
      const created = resultOf(paid);
      assert.equal(paid.id, asked.id, 'the same task');
      assert.equal(created.status, 'active');
      assert.deepEqual(Object.keys(created).sort(), ['status', 'subscriptionId']);
      const settled = x402Of(paid);
      assert.equal(settled['x402.payment.status'], 'payment-completed');
      const [receipt] = settled['x402.payment.receipts'] as Array<{ success: boolean; transaction: string }>;
      assert.equal(receipt!.success, true);
      assert.match(receipt!.transaction, /^0x[0-9a-f]{64}$/);
      assert.equal((await chain.usdcBalance(chain.payTo.address)) - balance, PRICE);
      const ledger = await service.database.db.selectFrom('payments').selectAll().where('reference', '=', receipt!.transaction).executeTakeFirstOrThrow();
      assert.equal(ledger.status, 'settled');
      assert.equal(ledger.request_path, '/a2a message/send subscribeAlert');
      const row = await service.database.db.selectFrom('subscriptions').selectAll().where('id', '=', created.subscriptionId as string).executeTakeFirstOrThrow();
      assert.equal(row.agent_id, `payer:x402:${chain.payer.address.toLowerCase()}`, 'made by its payer');

      // The same payment for another request: refused, nothing more taken.
      const again = asTask(await ask('subscribeAlert', { ...input, email: uniqueEmail('replay') }));
      const replay = asTask(await answerTask(again.id, { 'x402.payment.status': 'payment-submitted', 'x402.payment.payload': payment }));
      assert.equal(replay.status?.state, TaskState.TASK_STATE_REJECTED);
      assert.equal(x402Of(replay)['x402.payment.status'], 'payment-failed');
      assert.match(String(problemOf(replay).detail), /already been used/);
      assert.equal((await chain.usdcBalance(chain.payTo.address)) - balance, PRICE);
    });

    it('cancels a task whose payment is declined, and refuses an answer without the payment; nothing is stored or charged', async () => {
      const asked = asTask(await ask('subscribeAlert', { productId: 'gid://shopify/Product/89', email: uniqueEmail('declines') }));
      const before = await tableDigests(service.database);
      await assert.rejects(answerTask(asked.id, { 'x402.payment.status': 'payment-submitted' }), /x402\.payment\.payload/);
      // Without a token, a message that neither names a paid skill nor carries a payment is not let in.
      await assert.rejects(answerTask(asked.id, {}), /Status: 401/);
      const declined = asTask(await answerTask(asked.id, { 'x402.payment.status': 'payment-rejected' }));
      assert.equal(declined.status?.state, TaskState.TASK_STATE_CANCELED);
      assert.equal(x402Of(declined)['x402.payment.status'], 'payment-rejected');
      assert.deepEqual(await tableDigests(service.database), before);
      // A skill that is not paid per call still needs a token, extension or not.
      await assert.rejects(ask('getStockStatus', { shop: 'my-store.myshopify.com' }), /Status: 401/);
    });

    it('asks for payment on the A2A 0.3 wire as the extension’s spec shows it, echoing the activation', async () => {
      const res = await fetch(`${service.baseUrl}/a2a`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-a2a-extensions': X402_EXTENSION },
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: 'req-001',
          method: 'message/send',
          params: { message: { kind: 'message', messageId: randomUUID(), role: 'user', parts: [{ kind: 'data', data: { skill: 'subscribeAlert', input: { productId: 'gid://shopify/Product/90', email: uniqueEmail('v03-pay') } } }] } },
        }),
      });
      assert.equal(res.headers.get('x-a2a-extensions'), X402_EXTENSION);
      const { result } = (await res.json()) as { result: { kind: string; status: { state: string; message: { metadata: Record<string, unknown> } } } };
      assert.equal(result.kind, 'task');
      assert.equal(result.status.state, 'input-required');
      assert.equal(result.status.message.metadata['x402.payment.status'], 'payment-required');
      assert.equal((result.status.message.metadata['x402.payment.required'] as PaymentRequired).accepts[0]!.payTo, chain.payTo.address);
    });
  });
}
