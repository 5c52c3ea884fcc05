import { McpServer, requireScopes } from '@modelcontextprotocol/server';
import { z } from 'zod';
import { subscribeAlertBody, subscribeAlertResponse, subscriptionIdSchema, subscriptionSchema } from '../alerts/schemas.ts';
import { checkoutPlanAnswer, checkoutPlanBody, checkoutPlanResponse } from '../billing/schemas.ts';
import { performanceResponse } from '../conversions/schemas.ts';
import type { Scope } from '../agents/scopes.ts';
import { API_VERSION } from '../discovery/openapi.ts';
import { alertQueueSchema } from '../dispatch/schemas.ts';
import type { Domain } from '../domain.ts';
import type { Caller } from '../core/http/caller.ts';
import type { Metrics } from '../core/metrics.ts';
import { Problem } from '../core/problems.ts';
import type { PaidOperation } from '../payments/offers.ts';
import { declarationOf } from '../payments/paid-operations.ts';
import type { PaymentService } from '../payments/service.ts';
import { payForToolCall, type ToolResult } from './paid-tools.ts';
import { reportInventoryBody, reportInventoryResponse, stockResponse } from '../inventory/schemas.ts';
import { shopSchema } from '../stores/schemas.ts';

/** A tool: its HTTP twin's schemas and scope, and the same service call. */
interface Tool<I extends z.ZodObject, O extends z.ZodType> {
  name: string;
  title: string;
  description: string;
  /** The scope the HTTP twin needs; absent: any valid token. */
  scope?: Scope;
  /** Callers without a token may pay for this tool per call, as for its HTTP twin. */
  paid?: PaidOperation;
  input: I;
  output: O;
  run(input: z.output<I>, caller: Caller, paidWith?: 'x402' | 'mpp'): Promise<z.input<O>>;
}

const tool = <I extends z.ZodObject, O extends z.ZodType>(definition: Tool<I, O>) => definition;
const storeInput = z.object({ shop: shopSchema.describe('The store (your agent must be bound to it)') });

/**
 * The service's operations as MCP tools. Each takes its input schema from the HTTP API's zod
 * schema, checks the scope its HTTP twin needs, and calls the same service method with the
 * caller, so a subscription made here is the one made over HTTP and tenancy is the service's
 * answer, not the tool's.
 */
export function restockTools(domain: Domain, serviceName: string) {
  return [
    tool({
      name: 'subscribe_alert',
      title: 'Subscribe a customer to a restock alert',
      description: 'One e-mail when the product (or variant) is back in stock. The same product, variant and e-mail again returns the same subscription.',
      scope: 'api:write',
      paid: 'subscribeAlert',
      input: subscribeAlertBody,
      output: subscribeAlertResponse,
      run: (input, caller) => domain.alerts.subscribeAlert(input, caller),
    }),
    tool({
      name: 'get_subscription',
      title: 'Read an alert subscription',
      description: 'Status, product, variant, store and the one-click unsubscribe link.',
      scope: 'api:read',
      input: z.object({ subscriptionId: subscriptionIdSchema }),
      output: subscriptionSchema,
      run: ({ subscriptionId }, caller) => domain.alerts.getSubscription(subscriptionId, caller),
    }),
    tool({
      name: 'cancel_subscription',
      title: 'Cancel an alert subscription',
      description: 'Stops a waiting alert; cancelling twice is harmless.',
      scope: 'api:write',
      input: z.object({ subscriptionId: subscriptionIdSchema }),
      output: subscriptionSchema,
      run: ({ subscriptionId }, caller) => domain.alerts.cancelSubscription(subscriptionId, caller),
    }),
    tool({
      name: 'checkout_plan',
      title: 'Check out the starter or growth plan',
      description: 'A checkout session for a store; the plan becomes active once the purchase is completed at checkoutUrl.',
      scope: 'api:write',
      paid: 'checkoutPlan',
      input: checkoutPlanBody,
      output: checkoutPlanResponse,
      run: async (input, caller, paidWith) => checkoutPlanAnswer(await domain.billing.checkoutPlan(input, caller, paidWith)),
    }),
    tool({
      name: 'get_health',
      title: 'Service health',
      description: 'Whether the service is up and can take subscriptions.',
      input: z.object({}),
      output: z.object({ status: z.literal('ok'), service: z.string(), version: z.string() }),
      run: async () => ({ status: 'ok' as const, service: serviceName, version: API_VERSION }),
    }),
    tool({
      name: 'get_stock_status',
      title: "Read a store's known stock",
      description: 'Stock per variant, as the store last reported it.',
      scope: 'api:read',
      input: storeInput,
      output: stockResponse,
      run: async ({ shop }, caller) => ({ items: await domain.inventory.stockStatus(caller, shop) }),
    }),
    tool({
      name: 'get_performance',
      title: 'Read what alerts won back',
      description: "Sends, clicks, orders credited to alerts (direct or assisted) and revenue won back, net of refunds, overall, per day and per product, over the last `days` days (default 30). The store's own agents only.",
      scope: 'api:read',
      input: storeInput.extend({ days: z.int().min(1).max(365).optional() }),
      output: performanceResponse,
      run: ({ shop, days }, caller) => domain.conversions.performance(caller, shop, days ?? 30),
    }),
    tool({
      name: 'get_alert_queue',
      title: "Read a store's alert queue lengths",
      description: 'Subscribers waiting per variant, alerts per status, restocks in progress.',
      scope: 'api:read',
      input: storeInput,
      output: alertQueueSchema,
      run: ({ shop }, caller) => domain.dispatch.readAlertQueue(caller, shop),
    }),
    tool({
      name: 'report_inventory',
      title: "Report a store's stock",
      description: "Up to 100 variants; one that becomes sellable again alerts its waiting subscribers. For agents bound to the store.",
      scope: 'inventory:alerts',
      input: storeInput.extend(reportInventoryBody.shape).strict(),
      output: reportInventoryResponse,
      run: async ({ shop, items }, caller) => ({ items: await domain.inventory.reportInventory(caller, shop, items) }),
    }),
  ];
}

export type RestockTool = ReturnType<typeof restockTools>[number];

/** What the server needs for callers who pay per call instead of holding a token. */
export interface McpPayments {
  service: PaymentService;
  rateLimitPerMinute: number;
  /** Where payment outcomes are counted. */
  metrics?: Metrics;
}

/**
 * One MCP server per request (stateless Streamable HTTP), its tools bound to the request's
 * caller. A tool whose scope the token lacks is refused by the transport with HTTP 403
 * `insufficient_scope` (MCP authorization); any other refusal is a tool error carrying the
 * same problem details as the HTTP API. Without a caller, only paid tools run, once paid.
 */
export function mcpServerFor(tools: RestockTool[], caller: Caller | undefined, serviceName: string, payments: McpPayments): McpServer {
  const server = new McpServer({ name: serviceName, version: API_VERSION });
  for (const t of tools as Array<Tool<z.ZodObject, z.ZodType>>) {
    const run = async (input: unknown, as: Caller, paidWith?: 'x402' | 'mpp') => (await t.run(input as never, as, paidWith)) as Record<string, unknown>;
    server.registerTool(
      t.name,
      {
        title: t.title,
        description: t.description + (t.scope ? ` Needs the scope ${t.scope}` : '') + (t.paid ? ', or a payment per call (x402 or MPP) without a token.' : t.scope ? '.' : ''),
        inputSchema: t.input,
        outputSchema: t.output as z.ZodObject,
        // The transport answers HTTP 403 insufficient_scope, from the scopes in the request's auth info.
        ...(t.scope ? { scopeChallenge: requireScopes(t.scope) } : {}),
      },
      async (input: unknown, ctx: { mcpReq: { id: string | number; _meta?: Record<string, unknown> } }) => {
        try {
          if (!caller) {
            // The endpoint lets a caller without a token reach paid tools only.
            if (!t.paid) return toolError(new Problem('unauthorized', `${t.name} needs an access token.`));
            const call = { tool: t.name, operation: t.paid, input: input as Record<string, unknown>, meta: ctx.mcpReq._meta, requestId: String(ctx.mcpReq.id) };
            return await payForToolCall(payments.service, payments.rateLimitPerMinute, call, (payer, paidWith) => run(input, payer, paidWith), toolError, payments.metrics);
          }
          const result = await run(input, caller);
          return { content: [{ type: 'text' as const, text: JSON.stringify(result) }], structuredContent: result };
        } catch (err) {
          if (!(err instanceof Problem)) throw err;
          return toolError(err);
        }
      },
    );
  }
  return server;
}

/** A refusal as a tool error, with the HTTP API's problem details as structured content. */
function toolError(err: Problem): ToolResult {
  const problem = { type: err.slug, title: err.title, status: err.status, detail: err.detail, ...err.extensions };
  return { isError: true, content: [{ type: 'text', text: `${err.title}: ${err.detail}` }], structuredContent: problem };
}

/**
 * Tools a caller without a token may call (and pay for). Each must name a declared paid
 * operation, as the HTTP routes must: one without a declaration fails here, at start-up.
 */
export function paidToolNames(tools: RestockTool[]): Set<string> {
  const paid = (tools as Array<Tool<z.ZodObject, z.ZodType>>).filter((t) => t.paid);
  for (const t of paid) declarationOf(t.paid!);
  return new Set(paid.map((t) => t.name));
}
