import { McpServer, requireScopes, type ServerContext } from '@modelcontextprotocol/server';
import type { z } from 'zod';
import { API_VERSION } from '../discovery/operations.ts';
import type { Caller } from '../core/http/caller.ts';
import type { Metrics } from '../core/metrics.ts';
import { toolNameOf, type Operation } from '../core/operations.ts';
import { Problem } from '../core/problems.ts';
import type { PaymentService } from '../payments/service.ts';
import { callerIn } from './caller.ts';
import { payForToolCall, type ToolResult } from './paid-tools.ts';
import { serveSubscriptionResources, type ResourceServing } from './resources.ts';

/**
 * The declared operations offered as MCP tools (`tool` in their declaration), named after their
 * `operationId`. Each takes its operation's input, checks the scope it declares, and runs the
 * same bound operation with the caller, so a subscription made here is the one made over HTTP and
 * tenancy is the service's answer, not the tool's.
 */
export function restockTools(operations: Operation[]): RestockTool[] {
  return operations.filter((operation) => operation.declaration.tool).map((operation) => ({ name: toolNameOf(operation.declaration.id), operation }));
}

export interface RestockTool {
  name: string;
  operation: Operation;
}

/** What the server needs for callers who pay per call instead of holding a token. */
export interface McpPayments {
  service: PaymentService;
  rateLimitPerMinute: number;
  /** Where payment outcomes are counted. */
  metrics?: Metrics;
}

/**
 * An MCP server: one per stateless request, or one per session. Its tools and resources act for
 * the caller of the request they answer (callerIn). A tool whose scope the token lacks is refused
 * by the transport with HTTP 403 `insufficient_scope` (MCP authorization); any other refusal is
 * a tool error carrying the same problem details as the HTTP API. Without a caller, only paid
 * tools run, once paid.
 */
export function mcpServerFor(tools: RestockTool[], serviceName: string, payments: McpPayments, resources: ResourceServing): McpServer {
  const server = new McpServer({ name: serviceName, version: API_VERSION });
  for (const { name, operation } of tools) {
    const { declaration, paid } = operation;
    const { scope } = declaration;
    const run = async (input: unknown, as: Caller, paidWith?: 'x402' | 'mpp') => (await operation.run(input, { caller: as, ...(paidWith ? { paidWith } : {}) })) as Record<string, unknown>;
    server.registerTool(
      name,
      {
        title: declaration.tool!.title,
        description: (declaration.tool!.description ?? declaration.summary) + (scope ? ` Needs the scope ${scope}` : '') + (paid ? ', or a payment per call (x402 or MPP) without a token.' : scope ? '.' : ''),
        inputSchema: declaration.input,
        outputSchema: declaration.output as z.ZodObject,
        // The transport answers HTTP 403 insufficient_scope, from the scopes in the request's auth info.
        ...(scope ? { scopeChallenge: requireScopes(scope) } : {}),
      },
      async (input: unknown, ctx: ServerContext) => {
        const caller = callerIn(ctx);
        try {
          if (!caller) {
            // The endpoint lets a caller without a token reach paid tools only.
            if (!paid) return toolError(new Problem('unauthorized', `${name} needs an access token.`));
            const call = { tool: name, terms: paid, input: input as Record<string, unknown>, meta: ctx.mcpReq._meta, requestId: String(ctx.mcpReq.id) };
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
  serveSubscriptionResources(server, resources);
  return server;
}

/** A refusal as a tool error, with the HTTP API's problem details as structured content. */
function toolError(err: Problem): ToolResult {
  const problem = { type: err.slug, title: err.title, status: err.status, detail: err.detail, ...err.extensions };
  return { isError: true, content: [{ type: 'text', text: `${err.title}: ${err.detail}` }], structuredContent: problem };
}

/** Tools a caller without a token may call (and pay for): those of paid operations. */
export function paidToolNames(tools: RestockTool[]): Set<string> {
  return new Set(tools.filter((tool) => tool.operation.paid).map((tool) => tool.name));
}
