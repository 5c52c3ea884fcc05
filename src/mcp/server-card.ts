import { InMemoryTransport, LATEST_PROTOCOL_VERSION, type JSONRPCMessage } from '@modelcontextprotocol/server';
import { scopeDescriptions } from '../core/scopes.ts';
import type { ResourceServing } from './resources.ts';
import { mcpServerFor, paidToolNames, type McpPayments, type RestockTool } from './tools.ts';

export const SERVER_CARD_PATHS = ['/.well-known/mcp/server-card.json', '/.well-known/mcp.json'];
const SERVER_CARD_SCHEMA = 'https://static.modelcontextprotocol.io/schemas/mcp-server-card/v1.json';

export interface ServerCardOptions {
  tools: RestockTool[];
  serviceName: string;
  baseUrl: string;
  endpoint: string;
  resourceMetadataUrl: string;
  payments: McpPayments;
  resources: ResourceServing;
}

/**
 * The MCP server card: what `/mcp` is, before connecting. Its server info, capabilities (tools,
 * and resources a session may subscribe to) and tools are what the server itself answers to
 * `initialize` and `tools/list` (asked once, in process, over an in-memory transport), so the
 * card cannot drift from the endpoint.
 */
export async function serverCard(o: ServerCardOptions) {
  const { initialize, tools } = await askServer(o);
  return {
    $schema: SERVER_CARD_SCHEMA,
    version: '1.0',
    protocolVersion: initialize.protocolVersion,
    serverInfo: initialize.serverInfo,
    description: 'Back-in-stock alerts for e-commerce stores: subscribe customers to restock e-mails, read and cancel them, follow each one’s news as a resource, check out plans, read stock and the alert queue.',
    documentationUrl: `${o.baseUrl}/docs`,
    transport: { type: 'streamable-http', endpoint: o.endpoint },
    capabilities: initialize.capabilities,
    authorization: {
      type: 'oauth2',
      // RFC 9728: the authorization servers, scopes and bearer methods are there.
      protectedResourceMetadata: o.resourceMetadataUrl,
      scopes: Object.keys(scopeDescriptions),
      // Without a token these tools may still be called, paid per call (x402 or MPP in _meta).
      payPerCall: [...paidToolNames(o.tools)].sort(),
    },
    tools,
  };
}

interface InitializeResult {
  protocolVersion: string;
  capabilities: Record<string, unknown>;
  serverInfo: { name: string; version: string };
}

async function askServer(o: ServerCardOptions): Promise<{ initialize: InitializeResult; tools: unknown[] }> {
  const server = mcpServerFor(o.tools, o.serviceName, o.payments, o.resources);
  const [client, serverSide] = InMemoryTransport.createLinkedPair();
  const pending = new Map<number, (message: JSONRPCMessage) => void>();
  client.onmessage = (message) => {
    const id = (message as { id?: number }).id;
    if (id !== undefined) pending.get(id)?.(message);
  };
  const request = (id: number, method: string, params: Record<string, unknown>) =>
    new Promise<Record<string, unknown>>((resolve, reject) => {
      pending.set(id, (message) => {
        const answer = message as { result?: Record<string, unknown>; error?: { message: string } };
        if (answer.error) reject(new Error(`${method}: ${answer.error.message}`));
        else resolve(answer.result ?? {});
      });
      void client.send({ jsonrpc: '2.0', id, method, params });
    });
  try {
    await server.connect(serverSide);
    await client.start();
    const initialize = (await request(1, 'initialize', {
      protocolVersion: LATEST_PROTOCOL_VERSION,
      capabilities: {},
      clientInfo: { name: 'server-card', version: '1.0.0' },
    })) as unknown as InitializeResult;
    await client.send({ jsonrpc: '2.0', method: 'notifications/initialized' });
    const listed = await request(2, 'tools/list', {});
    return { initialize, tools: listed.tools as unknown[] };
  } finally {
    await client.close();
    await server.close();
  }
}
