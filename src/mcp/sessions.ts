import { randomUUID } from 'node:crypto';
import { NodeStreamableHTTPServerTransport } from '@modelcontextprotocol/node';
import { ProtocolError, ProtocolErrorCode, type McpServer } from '@modelcontextprotocol/server';
import type { Following } from './resources.ts';

/** Every bound on what sessions keep in this process's memory, whoever opens them. */
export interface SessionLimits {
  total: number;
  perAgent: number;
  followedPerSession: number;
  idleMs: number;
}

export const SESSION_LIMITS: SessionLimits = {
  /** Sessions this process holds at once: each keeps a server with its tools, and a socket while its stream is open. */
  total: 1000,
  /** Sessions one agent holds at once: its clients beyond them are answered without a session, as stateless clients are. */
  perAgent: 8,
  /** Resources one session follows: every piece of news is matched against them. */
  followedPerSession: 100,
  /** A session without a request for this long, and no stream open, ends: its client left without DELETE. */
  idleMs: 10 * 60_000,
};

/** One MCP session: its transport and server, the agent it belongs to, and the resources it follows. */
export interface McpSession {
  readonly id: string;
  readonly agentId: string;
  readonly transport: NodeStreamableHTTPServerTransport;
  readonly server: McpServer;
  readonly followed: Set<string>;
  /** Its GET streams open now (the transport keeps one; a second is refused, but counted while it is answered). */
  streams: number;
  idle: NodeJS.Timeout | undefined;
}

/**
 * The MCP sessions of this process (Streamable HTTP, `Mcp-Session-Id`), kept in memory within
 * SESSION_LIMITS. A session belongs to the agent whose token opened it: it is found only for a
 * request of that agent, and every request still carries a token, checked as any other.
 */
export class McpSessions {
  private readonly byId = new Map<string, McpSession>();

  constructor(private readonly limits: SessionLimits = SESSION_LIMITS) {}

  /** Why the agent would not be given a new session now; undefined when it would. */
  refusal(agentId: string): string | undefined {
    const { total, perAgent, idleMs } = this.limits;
    if (this.byId.size >= total) return `This server holds ${total} MCP sessions, the most it may; try again later.`;
    if (this.sessionsOf(agentId) >= perAgent) {
      return `This agent holds ${perAgent} MCP sessions, the most one agent may: end one (DELETE /mcp with its Mcp-Session-Id) or let it idle out (${idleMs / 60_000} min without a request or a stream).`;
    }
    return undefined;
  }

  /**
   * A new session for the agent, its server made by `serve` and connected to a transport that
   * answers POSTs in JSON and streams on GET; undefined when a limit is reached. It counts from
   * now, before its initialize is answered, so that concurrent ones cannot pass a limit together.
   */
  async open(agentId: string, serve: (following: Following) => McpServer): Promise<McpSession | undefined> {
    if (this.refusal(agentId) !== undefined) return undefined;
    const id = randomUUID();
    const transport = new NodeStreamableHTTPServerTransport({
      sessionIdGenerator: () => id,
      enableJsonResponse: true,
      onsessionclosed: () => this.end(session),
    });
    const followed = new Set<string>();
    const session: McpSession = { id, agentId, transport, server: serve(this.followingOf(followed)), followed, streams: 0, idle: undefined };
    this.byId.set(id, session);
    this.arm(session);
    await session.server.connect(transport);
    return session;
  }

  /** The session, if it exists and is the agent's: another agent's answers as a missing one. */
  find(id: string, agentId: string): McpSession | undefined {
    const session = this.byId.get(id);
    return session?.agentId === agentId ? session : undefined;
  }

  /** A request arrived: the idle time starts again. */
  touch(session: McpSession): void {
    this.arm(session);
  }

  streamOpened(session: McpSession): void {
    session.streams++;
    this.arm(session);
  }

  streamClosed(session: McpSession): void {
    session.streams--;
    this.arm(session);
  }

  /** Whether any session follows anything: news that must be looked up first is not, otherwise. */
  following(): boolean {
    for (const session of this.byId.values()) if (session.followed.size > 0) return true;
    return false;
  }

  /** `notifications/resources/updated` to every session following the resource, on its stream if one is open. */
  notify(uri: string): void {
    for (const session of this.byId.values()) if (session.followed.has(uri)) this.tell(session, uri);
  }

  /** News may have been missed (the bus lost its channel): every followed resource may have changed. */
  notifyAll(): void {
    for (const session of this.byId.values()) for (const uri of session.followed) this.tell(session, uri);
  }

  end(session: McpSession): void {
    if (this.byId.get(session.id) !== session) return;
    this.byId.delete(session.id);
    clearTimeout(session.idle);
    void session.server.close();
  }

  /** Ends every session, closing their streams: the server stops only once no stream is open. */
  close(): void {
    for (const session of [...this.byId.values()]) this.end(session);
  }

  private sessionsOf(agentId: string): number {
    let count = 0;
    for (const session of this.byId.values()) if (session.agentId === agentId) count++;
    return count;
  }

  private followingOf(followed: Set<string>): Following {
    const { followedPerSession } = this.limits;
    return {
      follow(uri) {
        if (followed.has(uri) || followed.size < followedPerSession) return void followed.add(uri);
        throw new ProtocolError(ProtocolErrorCode.InvalidRequest, `This session follows ${followedPerSession} resources, the most one session may: unsubscribe from one first.`, { limit: followedPerSession });
      },
      unfollow(uri) {
        followed.delete(uri);
      },
    };
  }

  /** An open stream keeps the session: its client is there, waiting for news. */
  private arm(session: McpSession): void {
    clearTimeout(session.idle);
    session.idle = session.streams > 0 ? undefined : setTimeout(() => this.end(session), this.limits.idleMs).unref();
  }

  private tell(session: McpSession, uri: string): void {
    // Sent on the session's stream, or dropped by the transport when none is open (nothing to resume from).
    session.server.server.sendResourceUpdated({ uri }).catch(() => this.end(session));
  }
}
