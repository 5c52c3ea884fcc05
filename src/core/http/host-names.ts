import net from 'node:net';

/** A name the service answers to: a host and its port, or the host on any port. */
export interface HostName {
  /** Lower case, without a trailing dot; an IPv6 address in brackets, compressed. */
  hostname: string;
  port: number | 'any';
}

/** `host[:port]`: a registered name or IPv4 address, or an IPv6 address in brackets. */
const HOST_PORT = /^(?:\[([0-9a-f:.]+)\]|([a-z0-9_-]+(?:\.[a-z0-9_-]+)*\.?))(?::([0-9]{0,5}))?$/i;
const ORIGIN = /^(https?):\/\/([^/?#]+)$/i;
const LOOPBACK = ['localhost', '127.0.0.1', '[::1]'];

/**
 * Reads `host[:port]` as a Host header or an ALLOWED_HOSTS entry carries it; undefined when it is
 * not one (a URL, credentials, a path, a port out of range). An empty port is no port (RFC 3986 §3.2.3).
 */
export function parseHostPort(text: string): { hostname: string; port: number | undefined } | undefined {
  const match = HOST_PORT.exec(text);
  if (!match) return undefined;
  const [, v6, name, portText] = match;
  let hostname: string;
  if (v6 !== undefined) {
    if (!net.isIPv6(v6)) return undefined;
    // The URL parser compresses it, so that [0:0:0:0:0:0:0:1] is [::1].
    hostname = new URL(`http://[${v6}]/`).hostname;
  } else {
    hostname = name!.toLowerCase().replace(/\.$/, '');
  }
  if (portText === undefined || portText === '') return { hostname, port: undefined };
  const port = Number(portText);
  if (port < 1 || port > 65535) return undefined;
  return { hostname, port };
}

/**
 * ALLOWED_HOSTS: comma-separated `host[:port]`; a host without a port is allowed on any port.
 * Throws with the first entry that is not one, for the start-up error.
 */
export function parseAllowedHosts(text: string | undefined): HostName[] {
  if (text === undefined) return [];
  return text
    .split(',')
    .map((entry) => entry.trim())
    .filter(Boolean)
    .map((entry) => {
      const parsed = parseHostPort(entry);
      if (!parsed) throw new Error(`"${entry}" is not a host name with an optional port (host, host:port or [v6]:port; no scheme, path or wildcard)`);
      return { hostname: parsed.hostname, port: parsed.port ?? 'any' };
    });
}

export interface HostPolicy {
  /** Whether a Host header's value names this service. */
  servesHost(host: string): boolean;
  /** Whether an Origin header's value is one of this service's own origins. */
  isOwnOrigin(origin: string): boolean;
}

/**
 * The names this service answers to: BASE_URL's host and port, the mTLS listener's (same host,
 * its port), and ALLOWED_HOSTS. A loopback BASE_URL also answers to the other loopback names on
 * the same port, since local clients send whichever they connected with. A Host without a port
 * names BASE_URL's scheme's default port.
 */
export function hostPolicy(baseUrl: string, allowedHosts: HostName[], otherOrigins: string[] = []): HostPolicy {
  const base = new URL(baseUrl);
  const defaultPort = base.protocol === 'https:' ? 443 : 80;
  const names: HostName[] = [...allowedHosts];
  for (const origin of [baseUrl, ...otherOrigins]) {
    const url = new URL(origin);
    const port = url.port ? Number(url.port) : url.protocol === 'https:' ? 443 : 80;
    const hostname = url.hostname.replace(/\.$/, '');
    const twins = LOOPBACK.includes(hostname) ? LOOPBACK : [hostname];
    for (const name of twins) names.push({ hostname: name, port });
  }
  const named = (hostname: string, port: number) => names.some((name) => name.hostname === hostname && (name.port === 'any' || name.port === port));
  return {
    servesHost(host) {
      const parsed = parseHostPort(host);
      return parsed !== undefined && named(parsed.hostname, parsed.port ?? defaultPort);
    },
    isOwnOrigin(origin) {
      const match = ORIGIN.exec(origin);
      if (!match) return false;
      const parsed = parseHostPort(match[2]!);
      if (!parsed) return false;
      return named(parsed.hostname, parsed.port ?? (match[1]!.toLowerCase() === 'https' ? 443 : 80));
    },
  };
}
