import type { ChangeBus } from '../core/changes/bus.ts';
import type { AgentState } from './repository.ts';

/** The topic agents' changes are announced on; the key is the agent's id. */
export const AGENT_CHANGES = 'agent';
/** Agents kept at most; the oldest is dropped first. */
const MAX_AGENTS = 50_000;
/** Tokens kept per agent at most (an agent re-registering often mints many). */
const MAX_TOKENS_PER_AGENT = 16;

/** What the cache reports per lookup (the metrics' hit rate). */
export type CacheLookup = (hit: boolean) => void;

/**
 * What each authenticated request asks of the database (the agent's standing and whether its
 * token was revoked), kept in memory between changes. Every change to an agent or its tokens is
 * announced on the bus after it commits, and drops that agent here and in every other process.
 * While the bus cannot vouch that changes arrive, every lookup reads the database.
 *
 * A read racing a change could put back what the change just dropped: each read notes the bus's
 * generation (moved by every change and reset heard), and keeps its answer only if nothing moved
 * it meanwhile.
 */
export class AgentStateCache {
  private readonly agents = new Map<string, Map<string, AgentState>>();
  private generation = 0;

  constructor(
    private readonly bus: ChangeBus,
    private readonly read: (agentId: string, jti: string) => Promise<AgentState | undefined>,
    private readonly lookup: CacheLookup = () => {},
  ) {
    bus.listen(AGENT_CHANGES, {
      changed: (agentId) => {
        this.generation++;
        this.agents.delete(agentId);
      },
      reset: () => {
        this.generation++;
        this.agents.clear();
      },
    });
  }

  async stateOf(agentId: string, jti: string): Promise<AgentState | undefined> {
    if (this.bus.live) {
      const kept = this.agents.get(agentId)?.get(jti);
      if (kept) {
        this.lookup(true);
        return kept;
      }
    }
    this.lookup(false);
    const generation = this.generation;
    const state = await this.read(agentId, jti);
    if (state && generation === this.generation && this.bus.live) this.keep(agentId, jti, state);
    return state;
  }

  /** Announces, once committed, that these agents or their tokens changed. */
  changed(agentIds: readonly string[]): Promise<void> {
    return agentIds.length === 0 ? Promise.resolve() : this.bus.publish(AGENT_CHANGES, agentIds);
  }

  private keep(agentId: string, jti: string, state: AgentState): void {
    let tokens = this.agents.get(agentId);
    if (!tokens) {
      if (this.agents.size >= MAX_AGENTS) this.agents.delete(this.agents.keys().next().value!);
      tokens = new Map();
      this.agents.set(agentId, tokens);
    }
    if (tokens.size >= MAX_TOKENS_PER_AGENT) tokens.delete(tokens.keys().next().value!);
    tokens.set(jti, state);
  }
}
