import { bindOperations } from '../core/operations.ts';
import type { Config } from '../config.ts';
import { LocalChangeBus, type ChangeBus } from '../core/changes/bus.ts';
import type { Database } from '../core/db/database.ts';
import type { Feature } from '../core/feature.ts';
import type { MailTransport } from '../core/mail/transport.ts';
import type { StoreService } from '../stores/service.ts';
import { AccessTokens } from './access-tokens.ts';
import { agentDiscoveryRoutes } from './discovery-routes.ts';
import { bearerGate, identityGate, type BearerGate } from './gate.ts';
import { IdentityAssertions } from './identity-assertions.ts';
import { agentOperations } from './operations.ts';
import { agentRoutes } from './routes.ts';
import { storeScopes } from './scopes.ts';
import { AgentService } from './service.ts';
import { RETIREMENT_SLACK_MS, SigningKeys } from './signing-keys.ts';
import { AgentRepository } from './repository.ts';

/** Re-read signing keys (another process may have rotated) and drop expired records this often. */
const MAINTENANCE_EVERY_MS = 60_000;

export interface AgentsDeps {
  config: Config;
  database: Database;
  mail: MailTransport;
  stores: StoreService;
  /** Where changes to agents and tokens are announced to every process (and heard from them). */
  changes: ChangeBus;
  /** Told whether each token check was answered from memory. */
  cacheLookup?: (hit: boolean) => void;
  /** Origin of the mTLS listener, when the server runs one (advertised in the metadata). */
  mtlsBaseUrl?: string;
}

/** How long the longest-lived token this service signs stays valid: keys outlive it before retiring. */
export function longestTokenMs(agents: Config['agents']): number {
  return Math.max(agents.accessTokenTtlSeconds, agents.credentialTtlSeconds) * 1000;
}

/**
 * Agent identity: registration and claims, access tokens and their signing keys, the access check
 * in front of scoped routes (`identity-gate`), and the well-known metadata.
 */
export async function buildAgents({ config, database, mail, stores, changes, cacheLookup, mtlsBaseUrl }: AgentsDeps): Promise<Feature<AgentService> & { gate: BearerGate }> {
  const store = new AgentRepository(database, changes, cacheLookup);
  const longestToken = longestTokenMs(config.agents);
  const keys = new SigningKeys(store, longestToken);
  await keys.load(config.agents.signingKeyMaxAgeDays);

  const service = new AgentService({
    store,
    stores,
    tokens: new AccessTokens(keys, config.baseUrl, config.baseUrl),
    assertions: new IdentityAssertions(config.agents.trustedIssuers, config.baseUrl),
    mail,
    config: config.agents,
    baseUrl: config.baseUrl,
  });
  const gate = bearerGate(service, `${config.baseUrl}/.well-known/oauth-protected-resource`);
  const metadata = {
    baseUrl: config.baseUrl,
    serviceName: config.serviceName,
    anonymousRateLimit: config.agents.rateLimits.anonymous,
    mtlsBaseUrl,
    trustedIssuers: config.agents.trustedIssuers.map((trusted) => trusted.issuer),
  };
  return {
    service,
    gate,
    plugins: [identityGate(gate)],
    operations: bindOperations(agentOperations, service),
    routes: [agentRoutes(service, config.baseUrl, config.bodyLimitBytes), agentDiscoveryRoutes(metadata, keys)],
    maintenance: [
      {
        name: 'agent-keys-and-sweep',
        everyMs: MAINTENANCE_EVERY_MS,
        run: () => {
          const now = Date.now();
          return Promise.all([
            keys.refresh(),
            store.sweep(new Date(now).toISOString(), new Date(now - longestToken - RETIREMENT_SLACK_MS).toISOString()),
          ]);
        },
      },
    ],
  };
}

/** `restock keys rotate`: a new signing key; running processes pick it up at their next refresh. */
export function rotateSigningKey(config: Config, database: Database): Promise<string> {
  // Rotating changes no agent's standing: nothing to announce.
  return new SigningKeys(new AgentRepository(database, new LocalChangeBus()), longestTokenMs(config.agents)).rotate();
}

/**
 * When a store changes hands (stores' `OwnerChangeListener`): agents bound by anyone but the new
 * owner lose the store and its scopes, at their next request in any process (the change is announced).
 */
export function unbindFormerOwnersAgents(database: Database, changes: ChangeBus) {
  const repository = new AgentRepository(database, changes);
  return async (shop: string, newOwner: string): Promise<string | undefined> => {
    const unbound = await repository.unbindStoreAgents(shop, newOwner, storeScopes);
    return unbound > 0 ? `${unbound} agent(s) bound by a former owner are no longer bound to it` : undefined;
  };
}

/** What the MCP endpoint links in its challenges: the metadata document of its own resource. */
export { MCP_RESOURCE_PATH, protectedResourceMetadataUrl } from './metadata.ts';
