import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import net from 'node:net';

/**
 * Where the service may connect on a tenant's behalf (a store's own mail server today). A tenant
 * names a host; without this check it could make the service talk to anything the service's own
 * network reaches: a database on loopback, a cloud metadata endpoint, a neighbour on the private
 * network. Every address is checked after DNS resolution and again on the connected socket, so a
 * name that resolves to a private address, or one whose answer changes between the check and the
 * connect (DNS rebinding), is refused as well.
 */

/** IPv4 ranges no tenant may reach: RFC 6890 special-purpose blocks that are not the public internet. */
const FORBIDDEN_V4: ReadonlyArray<[string, number]> = [
  ['0.0.0.0', 8], // "this network"
  ['10.0.0.0', 8], // private
  ['100.64.0.0', 10], // carrier-grade NAT
  ['127.0.0.0', 8], // loopback
  ['169.254.0.0', 16], // link-local, cloud metadata (169.254.169.254)
  ['172.16.0.0', 12], // private
  ['192.0.0.0', 24], // IETF protocol assignments
  ['192.0.2.0', 24], // documentation
  ['192.88.99.0', 24], // 6to4 relay anycast
  ['192.168.0.0', 16], // private
  ['198.18.0.0', 15], // benchmarking
  ['198.51.100.0', 24], // documentation
  ['203.0.113.0', 24], // documentation
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved, and 255.255.255.255 broadcast
];

/**
 * IPv6 is judged the other way round: only global unicast (2000::/3, RFC 4291) may be reached,
 * less the special-purpose blocks inside it below. Everything outside 2000::/3 is special-purpose
 * or unassigned: unspecified, loopback and IPv4-compatible (::/96), SIIT's IPv4-translated
 * ::ffff:0:0:0/96, the local-use NAT64 prefix 64:ff9b:1::/48 (RFC 8215: translates to whatever
 * IPv4 network the operator's translator serves, and may carry its IPv4 address in any of several
 * places), discard-only 100::/64, SRv6 SIDs 5f00::/16, unique local fc00::/7 (AWS's metadata
 * fd00:ec2::254 among them), link-local fe80::/10, site-local fec0::/10 and multicast ff00::/8,
 * as well as whatever IANA assigns there next. IPv4-mapped ::ffff:0:0/96, well-known NAT64
 * 64:ff9b::/96 (RFC 6052) and 6to4 2002::/16 reach the IPv4 host they carry, so they are judged
 * by that IPv4 address instead (`embeddedV4`).
 */
const GLOBAL_UNICAST_V6: [string, number] = ['2000::', 3];

/** Special-purpose blocks inside 2000::/3 (IANA IPv6 Special-Purpose Address Registry). */
const FORBIDDEN_V6: ReadonlyArray<[string, number]> = [
  ['2001::', 23], // IETF protocol assignments: Teredo 2001::/32, benchmarking, AMT, ORCHID, anycast services
  ['2001:db8::', 32], // documentation
  ['3fff::', 20], // documentation (RFC 9637)
];

const globalUnicast = new net.BlockList();
globalUnicast.addSubnet(GLOBAL_UNICAST_V6[0], GLOBAL_UNICAST_V6[1], 'ipv6');
const forbidden = new net.BlockList();
for (const [address, prefix] of FORBIDDEN_V4) forbidden.addSubnet(address, prefix, 'ipv4');
for (const [address, prefix] of FORBIDDEN_V6) forbidden.addSubnet(address, prefix, 'ipv6');

/** Refused: the message is ours, and names the host as the tenant gave it, never what it resolved to. */
export class ForbiddenDestination extends Error {
  readonly code = 'EFORBIDDENDESTINATION';

  constructor(host: string) {
    super(`${host} is a loopback, private, link-local or otherwise internal address, which the service does not connect to on a store's behalf`);
    this.name = 'ForbiddenDestination';
  }
}

/** Destinations the operator lets tenants reach although they are internal (a local mail sink in development). */
export interface OutboundPolicy {
  allowed: net.BlockList | undefined;
}

export const STRICT_OUTBOUND: OutboundPolicy = { allowed: undefined };

/** `RESTOCK_TENANT_OUTBOUND_ALLOW`: comma-separated CIDR blocks (`127.0.0.1/32,::1/128`). */
export function parseOutboundAllowList(text: string | undefined): OutboundPolicy {
  if (text === undefined || text.trim() === '') return STRICT_OUTBOUND;
  const allowed = new net.BlockList();
  for (const entry of text.split(',').map((part) => part.trim()).filter(Boolean)) {
    const match = /^([0-9a-fA-F:.]+)\/(\d{1,3})$/.exec(entry);
    const family = match ? net.isIP(match[1]!) : 0;
    const prefix = match ? Number(match[2]) : -1;
    if (!match || family === 0 || prefix > (family === 4 ? 32 : 128)) {
      throw new Error(`"${entry.slice(0, 60)}" is not a CIDR block such as 127.0.0.1/32 or ::1/128`);
    }
    allowed.addSubnet(match[1]!, prefix, family === 4 ? 'ipv4' : 'ipv6');
  }
  return { allowed };
}

/**
 * The IPv4 address an IPv6 address carries where that is the host it reaches (mapped
 * ::ffff:a.b.c.d, well-known NAT64 64:ff9b::/96, 6to4 2002::/16), if any. SIIT's
 * ::ffff:0:a.b.c.d and local-use NAT64 are not among them: they are refused whatever they carry.
 */
function embeddedV4(address: string): string | undefined {
  const words = expandV6(address);
  if (words === undefined) return undefined;
  const v4 = (high: number, low: number) => `${high >> 8}.${high & 255}.${low >> 8}.${low & 255}`;
  const zeros = (from: number, to: number) => words.slice(from, to).every((word) => word === 0);
  if (zeros(0, 5) && words[5] === 0xffff) return v4(words[6]!, words[7]!);
  if (words[0] === 0x64 && words[1] === 0xff9b && zeros(2, 6)) return v4(words[6]!, words[7]!);
  if (words[0] === 0x2002) return v4(words[1]!, words[2]!);
  return undefined;
}

/** An IPv6 address as its eight 16-bit words (an embedded dotted IPv4 tail included). */
function expandV6(address: string): number[] | undefined {
  let text = address.toLowerCase();
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (dotted) {
    const [a, b, c, d] = dotted[1]!.split('.').map(Number) as [number, number, number, number];
    text = `${text.slice(0, dotted.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail] = text.split('::') as [string, string | undefined];
  const part = (side: string) => (side === '' ? [] : side.split(':').map((word) => parseInt(word, 16)));
  const left = part(head);
  const right = tail === undefined ? [] : part(tail);
  const missing = 8 - left.length - right.length;
  if (tail === undefined ? missing !== 0 : missing < 0) return undefined;
  const words = [...left, ...Array<number>(missing).fill(0), ...right];
  return words.some((word) => !Number.isInteger(word) || word < 0 || word > 0xffff) ? undefined : words;
}

/** Whether a tenant may reach this IP address under the policy. */
export function isAllowedDestination(address: string, policy: OutboundPolicy): boolean {
  const family = net.isIP(address);
  // A zone index (`fe80::1%eth0`) names an interface of this machine, never a host on the internet.
  if (family === 0 || address.includes('%')) return false;
  const type = family === 4 ? 'ipv4' : 'ipv6';
  if (policy.allowed?.check(address, type)) return true;
  if (family === 4) return !forbidden.check(address, 'ipv4');
  const carried = embeddedV4(address);
  if (carried !== undefined) return isAllowedDestination(carried, policy);
  return globalUnicast.check(address, 'ipv6') && !forbidden.check(address, 'ipv6');
}

/**
 * Whether a host a tenant typed can be refused now, before any lookup: an IP literal in a
 * forbidden range, or a name that only ever means this machine or an internal network.
 */
export function isObviouslyInternalHost(host: string, policy: OutboundPolicy): boolean {
  const bare = host.replace(/^\[(.*)\]$/, '$1').replace(/\.$/, '').toLowerCase();
  if (net.isIP(bare) !== 0) return !isAllowedDestination(bare, policy);
  if (policy.allowed !== undefined) return false;
  return bare === 'localhost' || /\.(localhost|local|internal|localdomain|home\.arpa)$/.test(bare) || !bare.includes('.');
}

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

/**
 * A `lookup` for `net.connect`/`tls.connect` that resolves as usual and refuses the connection
 * when any address the name resolves to is forbidden: a name that mixes a public and a private
 * answer is refused outright rather than tried in turn.
 */
export function guardedLookup(policy: OutboundPolicy) {
  return (hostname: string, options: { all?: boolean; family?: number | string }, callback: LookupCallback): void => {
    dnsLookup(hostname, { all: true, family: typeof options.family === 'number' ? options.family : 0 }, (err, addresses) => {
      if (err) return callback(err, options.all ? [] : '', 0);
      const refused = addresses.find((entry) => !isAllowedDestination(entry.address, policy));
      if (refused || addresses.length === 0) return callback(new ForbiddenDestination(hostname), options.all ? [] : '', 0);
      if (options.all) return callback(null, addresses);
      return callback(null, addresses[0]!.address, addresses[0]!.family);
    });
  };
}

/**
 * Opens a TCP connection to a tenant's host: IP literals are checked here (`net.connect` does
 * not look them up), names by `guardedLookup`, and the connected peer once more, so nothing but
 * an allowed address is ever talked to.
 */
export function connectGuarded(host: string, port: number, policy: OutboundPolicy, options: { noDelay?: boolean } = {}): net.Socket {
  const bare = host.replace(/^\[(.*)\]$/, '$1');
  const socket = new net.Socket();
  if (net.isIP(bare) !== 0 && !isAllowedDestination(bare, policy)) {
    process.nextTick(() => socket.destroy(new ForbiddenDestination(host)));
    return socket;
  }
  socket.once('connect', () => {
    const peer = socket.remoteAddress;
    if (peer === undefined || !isAllowedDestination(peer, policy)) socket.destroy(new ForbiddenDestination(host));
  });
  socket.connect({ host: bare, port, noDelay: options.noDelay ?? false, lookup: guardedLookup(policy) as net.LookupFunction });
  return socket;
}
