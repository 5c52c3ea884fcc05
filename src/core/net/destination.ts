import net from 'node:net';
import { isAllowedDestination, isObviouslyInternalHost, type OutboundPolicy } from './outbound-guard.ts';

/**
 * Where a store's webhook may go. The URL is the tenant's, so each is read with the WHATWG
 * parser (which also turns `0x7f.1` or `2130706433` into the address they mean) and checked the
 * same way every time it is about to be used: the endpoint's URL before each delivery, and each
 * redirect target. Host names are judged by what they resolve to, at connection time
 * (`guardedLookup`); at registration a name that can only mean an internal host is refused early.
 */

export type Destination = { url: URL; host: string } | { refused: string };

/** The URL's host as a socket takes it: IPv6 without its brackets. */
export function bareHost(url: URL): string {
  return url.hostname.replace(/^\[(.*)\]$/, '$1');
}

/** What every use of a destination checks: http(s), no credentials, no forbidden IP literal. */
export function checkDestination(text: string | URL, policy: OutboundPolicy): Destination {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return { refused: 'is not a URL' };
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return { refused: 'must be an http:// or https:// URL' };
  if (url.username !== '' || url.password !== '') return { refused: 'must not carry credentials (user:password@): put a token in the path or query instead' };
  const host = bareHost(url);
  if (host === '') return { refused: 'must name a host' };
  if (net.isIP(host) !== 0 && !isAllowedDestination(host, policy)) return { refused: 'must not be a loopback, private, link-local or otherwise internal address' };
  return { url, host };
}

/** At registration: the checks above, and names that only ever mean an internal host (`localhost`, `*.internal`). */
export function checkNewDestination(text: string, policy: OutboundPolicy): Destination {
  const checked = checkDestination(text, policy);
  if ('refused' in checked) return checked;
  if (isObviouslyInternalHost(checked.host, policy)) return { refused: 'must name a host on the internet: loopback, private, link-local and internal hosts are refused' };
  return checked;
}

/**
 * The address of a tenant's own API (a WooCommerce site, a Vendure Admin API), as its owner gives
 * it: https, or http to an IP address the operator allowed (a local server in development),
 * since the credentials travel with every request; no credentials, query or fragment; a path is
 * kept, without its trailing slash. A refusal is said in the owner's words (`what` is the thing
 * the address must be, `tls` why it must be https).
 */
export function checkTenantApiAddress(text: string, policy: OutboundPolicy, words: { what: string; tls: string }): URL | string {
  const checked = checkDestination(text, policy);
  if ('refused' in checked) return checked.refused;
  const { url, host } = checked;
  if (url.search !== '' || url.hash !== '') return `must be ${words.what}, without a query or fragment`;
  const allowedPlain = net.isIP(host) !== 0 && policy.allowed !== undefined && isAllowedDestination(host, policy);
  if (url.protocol !== 'https:' && !allowedPlain) return `must be an https:// address: ${words.tls}`;
  url.pathname = url.pathname.replace(/\/+$/, '');
  return url;
}
