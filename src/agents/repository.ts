import { sql } from 'kysely';
import type { ChangeBus } from '../core/changes/bus.ts';
import type { Database } from '../core/db/database.ts';
import type { AgentClaimAttemptsTable, AgentsTable, SigningKeysTable } from '../core/db/schema.ts';
import { AgentStateCache, type CacheLookup } from './state-cache.ts';

export type AgentRow = AgentsTable;
export type ClaimAttemptRow = AgentClaimAttemptsTable;
export type SigningKeyRow = SigningKeysTable;

/** What every authenticated request needs to know about its agent, in one query. */
export interface AgentState {
  method: string;
  status: string;
  scopes: string;
  store_domain: string | null;
  claimed_at: string | null;
  token_revoked: number | boolean;
}

/**
 * Storage of agents, their claims, revoked tokens, used assertions and signing keys; the only
 * code that touches those tables. What an authenticated request reads is kept in memory
 * (`AgentStateCache`); each write that changes it announces the agents it changed on the bus
 * once committed, so no process goes on answering from what it kept.
 */
export class AgentRepository {
  private readonly states: AgentStateCache;

  constructor(
    private readonly database: Database,
    bus: ChangeBus,
    cacheLookup?: CacheLookup,
  ) {
    // Built once: every authenticated request that misses the cache runs it.
    const readAgentState = database.preparedRead<AgentState>(2, (db, agentId, jti) =>
      db
        .selectFrom('agents')
        .select(['method', 'status', 'scopes', 'store_domain', 'claimed_at'])
        .select(sql<number>`exists (select 1 from revoked_tokens where jti = ${jti})`.as('token_revoked'))
        .where('id', '=', agentId!),
    );
    this.states = new AgentStateCache(bus, (agentId, jti) => readAgentState(agentId, jti), cacheLookup);
  }

  insertAgent(row: AgentRow): Promise<unknown> {
    return this.database.writeStatement((db) => db.insertInto('agents').values(row).execute());
  }

  /** A method B registration: the agent and its first code, stored together once the code is sent. */
  insertAgentWithAttempt(agent: AgentRow, attempt: ClaimAttemptRow): Promise<unknown> {
    return this.database.write(async (trx) => {
      await trx.insertInto('agents').values(agent).execute();
      await trx.insertInto('agent_claim_attempts').values(attempt).execute();
    });
  }

  /**
   * Counts one more code for the claim token, atomically, unless `max` were already sent: a
   * burst of concurrent requests cannot slip past the cap. False when the cap is reached.
   */
  async reserveClaimCode(agentId: string, max: number): Promise<boolean> {
    const result = await this.database.writeStatement((db) =>
      db
        .updateTable('agents')
        .set((eb) => ({ claim_codes_sent: eb('claim_codes_sent', '+', 1) }))
        .where('id', '=', agentId)
        .where('claim_codes_sent', '<', max)
        .executeTakeFirst(),
    );
    return Number(result.numUpdatedRows) === 1;
  }

  /** Gives back a reserved code whose e-mail could not be sent. */
  releaseClaimCode(agentId: string): Promise<unknown> {
    return this.database.writeStatement((db) =>
      db
        .updateTable('agents')
        .set((eb) => ({ claim_codes_sent: eb('claim_codes_sent', '-', 1) }))
        .where('id', '=', agentId)
        .where('claim_codes_sent', '>', 0)
        .execute(),
    );
  }

  /** A new code supersedes the ones before it: only the newest e-mail's code is live. */
  insertClaimAttempt(row: ClaimAttemptRow): Promise<unknown> {
    return this.database.write(async (trx) => {
      await trx
        .updateTable('agent_claim_attempts')
        .set({ status: 'superseded' })
        .where('agent_id', '=', row.agent_id)
        .where('status', '=', 'initiated')
        .execute();
      await trx.insertInto('agent_claim_attempts').values(row).execute();
    });
  }

  /** Codes not yet used, failed or superseded (normally one; two only after a race between requests). */
  openClaimAttempts(agentId: string, now: string): Promise<ClaimAttemptRow[]> {
    return this.database.db
      .selectFrom('agent_claim_attempts')
      .selectAll()
      .where('agent_id', '=', agentId)
      .where('status', '=', 'initiated')
      .where('expires_at', '>', now)
      .execute();
  }

  findAgent(id: string): Promise<AgentRow | undefined> {
    return this.database.db.selectFrom('agents').selectAll().where('id', '=', id).executeTakeFirst();
  }

  findAgentByIdentity(issuer: string, subject: string): Promise<AgentRow | undefined> {
    return this.database.db
      .selectFrom('agents')
      .selectAll()
      .where('issuer', '=', issuer)
      .where('subject', '=', subject)
      .orderBy('created_at', 'desc')
      .executeTakeFirst();
  }

  findAgentByClaimToken(hash: string): Promise<AgentRow | undefined> {
    return this.database.db.selectFrom('agents').selectAll().where('claim_token_hash', '=', hash).executeTakeFirst();
  }

  listStoreAgents(storeDomain: string): Promise<AgentRow[]> {
    return this.database.db
      .selectFrom('agents')
      .selectAll()
      .where('store_domain', '=', storeDomain)
      .orderBy('created_at', 'asc')
      .execute();
  }

  /** The agent's standing and whether this token was revoked: the per-request check. */
  agentState(agentId: string, jti: string): Promise<AgentState | undefined> {
    return this.states.stateOf(agentId, jti);
  }

  async revokeAgent(id: string, now: string): Promise<AgentRow | undefined> {
    const revoked = await this.database.write(async (trx) => {
      await trx
        .updateTable('agents')
        .set({ status: 'revoked', revoked_at: now, claim_token_hash: null })
        .where('id', '=', id)
        .where('status', '!=', 'revoked')
        .execute();
      return trx.selectFrom('agents').selectAll().where('id', '=', id).executeTakeFirst();
    });
    await this.states.changed([id]);
    return revoked;
  }

  /**
   * A store changed hands: agents bound by anyone but `ownerEmail` lose the binding and the store
   * scopes with it, at once (the per-request check reads both). Returns how many were unbound.
   */
  async unbindStoreAgents(storeDomain: string, ownerEmail: string, storeScopes: readonly string[]): Promise<number> {
    const unbound = await this.database.write(async (trx) => {
      const bound = await trx.selectFrom('agents').select(['id', 'email', 'scopes']).where('store_domain', '=', storeDomain).execute();
      const former = bound.filter((agent) => agent.email !== ownerEmail);
      for (const agent of former) {
        const scopes = agent.scopes.split(' ').filter((scope) => scope && !storeScopes.includes(scope));
        await trx.updateTable('agents').set({ store_domain: null, scopes: scopes.join(' ') }).where('id', '=', agent.id).execute();
      }
      return former.map((agent) => agent.id);
    });
    await this.states.changed(unbound);
    return unbound.length;
  }

  /** Remembers a revoked token until it would have expired; revoking twice is harmless. */
  async revokeToken(jti: string, agentId: string, now: string, expiresAt: string): Promise<void> {
    await this.database.writeStatement((db) =>
      db
        .insertInto('revoked_tokens')
        .values({ jti, agent_id: agentId, revoked_at: now, expires_at: expiresAt })
        .onConflict((oc) => oc.column('jti').doNothing())
        .execute(),
    );
    await this.states.changed([agentId]);
  }

  /** Records an assertion's (issuer, jti); false when it was seen before (a replay). */
  async useAssertion(issuer: string, jti: string, expiresAt: string): Promise<boolean> {
    const result = await this.database.writeStatement((db) =>
      db
        .insertInto('used_assertions')
        .values({ issuer, jti, expires_at: expiresAt })
        .onConflict((oc) => oc.columns(['issuer', 'jti']).doNothing())
        .executeTakeFirst(),
    );
    return Number(result.numInsertedOrUpdatedRows ?? 0n) === 1;
  }

  latestClaimAttempt(agentId: string): Promise<ClaimAttemptRow | undefined> {
    return this.database.db
      .selectFrom('agent_claim_attempts')
      .selectAll()
      .where('agent_id', '=', agentId)
      .orderBy('created_at', 'desc')
      .orderBy('id', 'desc')
      .executeTakeFirst();
  }

  /** Counts a wrong code; the attempt fails once `maxFailures` is reached. Returns failures so far. */
  failClaimAttempt(id: string, maxFailures: number): Promise<number> {
    return this.database.write(async (trx) => {
      const row = await trx
        .updateTable('agent_claim_attempts')
        .set((eb) => ({ failed_attempts: eb('failed_attempts', '+', 1) }))
        .where('id', '=', id)
        .where('status', '=', 'initiated')
        .returning('failed_attempts')
        .executeTakeFirst();
      const failures = row?.failed_attempts ?? maxFailures;
      if (failures >= maxFailures) {
        await trx.updateTable('agent_claim_attempts').set({ status: 'failed' }).where('id', '=', id).execute();
      }
      return failures;
    });
  }

  /**
   * Completes a claim: the attempt is consumed and the agent takes its new standing, in one
   * transaction. Returns undefined when the attempt was no longer open (a concurrent completion).
   */
  async completeClaim(attemptId: string, agentId: string, changes: Partial<AgentRow>): Promise<AgentRow | undefined> {
    const claimed = await this.database.write(async (trx) => {
      const consumed = await trx
        .updateTable('agent_claim_attempts')
        .set({ status: 'claimed' })
        .where('id', '=', attemptId)
        .where('status', '=', 'initiated')
        .executeTakeFirst();
      if (Number(consumed.numUpdatedRows) !== 1) return undefined;
      await trx
        .updateTable('agents')
        .set({ ...changes, claim_token_hash: null })
        .where('id', '=', agentId)
        .where('status', '!=', 'revoked')
        .execute();
      return trx.selectFrom('agents').selectAll().where('id', '=', agentId).executeTakeFirst();
    });
    if (claimed) await this.states.changed([agentId]);
    return claimed;
  }

  listSigningKeys(): Promise<SigningKeyRow[]> {
    return this.database.db.selectFrom('signing_keys').selectAll().orderBy('created_at', 'asc').orderBy('kid', 'asc').execute();
  }

  /** Adds a key and retires every older one in one transaction, so exactly one key signs. */
  addSigningKey(row: SigningKeyRow): Promise<unknown> {
    return this.database.write(async (trx) => {
      await trx.updateTable('signing_keys').set({ retired_at: row.created_at }).where('retired_at', 'is', null).execute();
      await trx.insertInto('signing_keys').values(row).execute();
    });
  }

  /** Drops revoked tokens, used assertions and retired keys that can no longer matter. */
  async sweep(now: string, keysRetiredBefore: string): Promise<void> {
    await this.database.write(async (trx) => {
      await trx.deleteFrom('revoked_tokens').where('expires_at', '<', now).execute();
      await trx.deleteFrom('used_assertions').where('expires_at', '<', now).execute();
      await trx.deleteFrom('signing_keys').where('retired_at', '<', keysRetiredBefore).execute();
    });
  }
}
