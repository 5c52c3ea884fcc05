import { z } from 'zod';
import { defineOperation } from '../core/operations.ts';
import { storeInput } from '../stores/schemas.ts';
import { agentIdSchema, agentViewSchema } from './schemas.ts';
import type { AgentService } from './service.ts';

/** The caller's own view, and the store owner's agent list. */
export const agentOperations = [
  defineOperation({
    id: 'getAgent',
    method: 'GET',
    path: '/api/agent/me',
    summary: 'The calling agent: its scopes, store binding and rate limit',
    tag: 'agents',
    scope: 'api:read',
    input: z.object({}),
    output: agentViewSchema,
    errors: [],
    tenancy: { none: 'the calling agent itself' },
    example: {},
    run: (agents: AgentService, _input, { caller }) => agents.describeAgent(caller),
  }),
  defineOperation({
    id: 'listStoreAgents',
    method: 'GET',
    path: '/api/v1/stores/:shop/agents',
    summary: "List the agents bound to a store (the owner's agents only)",
    tag: 'stores',
    scope: 'api:read',
    input: storeInput,
    output: z.object({ agents: z.array(agentViewSchema) }),
    errors: [400, 404],
    tenancy: { refusal: 404 },
    example: { shop: 'my-store.myshopify.com' },
    run: async (agents: AgentService, { shop }, { caller }) => ({ agents: await agents.listStoreAgents(shop, caller) }),
  }),
  defineOperation({
    id: 'revokeStoreAgent',
    method: 'DELETE',
    path: '/api/v1/stores/:shop/agents/:agentId',
    summary: "Revoke one of a store's agents; its tokens stop working at once",
    tag: 'stores',
    scope: 'api:write',
    input: storeInput.extend({ agentId: agentIdSchema }),
    output: agentViewSchema,
    errors: [400, 404, 503],
    tenancy: { refusal: 404 },
    example: { shop: 'my-store.myshopify.com', agentId: 'agt_0123456789' },
    run: (agents: AgentService, { shop, agentId }, { caller }) => agents.revokeStoreAgent(shop, agentId, caller),
  }),
];
