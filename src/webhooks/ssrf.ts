/**
 * Server-side request forgery protection for webhook URLs (CONTRACT §6). A webhook URL is
 * chosen by a developer and fetched by our servers, so it must never reach loopback, private,
 * link-local, multicast or otherwise internal addresses. The host is resolved and checked at
 * creation and again at every delivery, and the delivery connects to exactly the address that
 * was checked (see pinnedLookup): a DNS answer that changes between check and connect
 * ("DNS rebinding") cannot redirect the request.
 */
import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { BlockList, isIP, type LookupFunction } from 'node:net';

/** Refused: a URL a webhook may not use, or a host that resolves to an internal address. */
export class UnsafeDestinationError extends Error {
  override name = 'UnsafeDestinationError';
}

/**
 * Special-purpose ranges (IANA IPv4/IPv6 Special-Purpose Address Registries, RFC 6890) that are
 * not globally reachable, plus multicast and the IPv6 transition prefixes that embed them.
 */
const BLOCKED = new BlockList();
for (const [network, prefix] of [
  ['0.0.0.0', 8], // "this network" (0.0.0.0 reaches the local host on Linux)
  ['10.0.0.0', 8], // private (RFC 1918)
  ['100.64.0.0', 10], // carrier-grade NAT (RFC 6598)
  ['127.0.0.0', 8], // loopback
  ['169.254.0.0', 16], // link-local, including cloud metadata (169.254.169.254)
  ['172.16.0.0', 12], // private
  ['192.0.0.0', 24], // IETF protocol assignments
  ['192.0.2.0', 24], // documentation (TEST-NET-1)
  ['192.88.99.0', 24], // 6to4 relay anycast
  ['192.168.0.0', 16], // private
  ['198.18.0.0', 15], // benchmarking
  ['198.51.100.0', 24], // documentation (TEST-NET-2)
  ['203.0.113.0', 24], // documentation (TEST-NET-3)
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved, and 255.255.255.255 broadcast
] as const) {
  BLOCKED.addSubnet(network, prefix, 'ipv4');
}
for (const [network, prefix] of [
  ['::', 128], // unspecified
  ['::1', 128], // loopback
  ['64:ff9b::', 96], // NAT64 (RFC 6052)
  ['64:ff9b:1::', 48], // local-use NAT64 (RFC 8215)
  ['100::', 64], // discard-only
  ['2001::', 23], // IETF protocol assignments (includes Teredo 2001::/32)
  ['2001:db8::', 32], // documentation
  ['2002::', 16], // 6to4 (embeds an IPv4 address)
  ['fc00::', 7], // unique local
  ['fe80::', 10], // link-local
  ['fec0::', 10], // site-local (deprecated)
  ['ff00::', 8], // multicast
] as const) {
  BLOCKED.addSubnet(network, prefix, 'ipv6');
}

/**
 * True for any address a webhook must not reach; anything that is not an IP is refused too.
 * BlockList checks IPv4-mapped IPv6 addresses (::ffff:127.0.0.1, ::ffff:7f00:1) against the
 * IPv4 rules, which is why ::ffff:0:0/96 itself is not listed (it would match every IPv4).
 */
export function isInternalAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 4) return BLOCKED.check(address, 'ipv4');
  if (family === 6) return BLOCKED.check(address, 'ipv6');
  return true;
}

/** How host names are resolved; tests pass their own to simulate DNS answers. */
export type Resolver = (hostname: string) => Promise<LookupAddress[]>;

export const systemResolver: Resolver = (hostname) =>
  new Promise((resolve, reject) => {
    dnsLookup(hostname, { all: true, verbatim: true }, (err, addresses) => (err ? reject(err) : resolve(addresses)));
  });

export interface CheckedAddress {
  /** The host name as written in the URL (IPv6 without brackets). */
  hostname: string;
  address: string;
  family: 4 | 6;
}

export interface DestinationOptions {
  /** WEBHOOK_ALLOW_PRIVATE_NETWORKS: development and tests only. */
  allowPrivateNetworks: boolean;
  resolver?: Resolver;
}

/** The URL rules that need no DNS: absolute https, no credentials, no fragment, bounded length. */
export function parseWebhookUrl(raw: string): URL {
  if (raw.length > 2048) throw new UnsafeDestinationError('must be at most 2048 characters');
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new UnsafeDestinationError('must be an absolute https URL');
  }
  if (url.protocol !== 'https:') throw new UnsafeDestinationError('must use https');
  if (url.username || url.password) throw new UnsafeDestinationError('must not contain credentials');
  if (raw.includes('#')) throw new UnsafeDestinationError('must not contain a fragment');
  if (!url.hostname) throw new UnsafeDestinationError('must name a host');
  return url;
}

/**
 * Resolves the URL's host and checks every address it resolves to (one internal address is
 * enough to refuse: which one a client would pick is not ours to guess). Returns the address
 * to connect to.
 */
export async function checkDestination(url: URL, options: DestinationOptions): Promise<CheckedAddress> {
  const hostname = url.hostname.replace(/^\[(.*)\]$/, '$1');
  let addresses: LookupAddress[];
  if (isIP(hostname)) {
    addresses = [{ address: hostname, family: isIP(hostname) }];
  } else {
    try {
      addresses = await (options.resolver ?? systemResolver)(hostname);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      throw new UnsafeDestinationError(`host ${hostname} does not resolve${code ? ` (${code})` : ''}`);
    }
  }
  if (addresses.length === 0) throw new UnsafeDestinationError(`host ${hostname} does not resolve`);
  if (!options.allowPrivateNetworks) {
    const internal = addresses.find((a) => isInternalAddress(a.address));
    if (internal) {
      throw new UnsafeDestinationError(
        `host ${hostname} resolves to ${internal.address}, a loopback, private, link-local or otherwise internal address`,
      );
    }
  }
  const chosen = addresses[0]!;
  return { hostname, address: chosen.address, family: chosen.family === 6 ? 6 : 4 };
}

/**
 * A `lookup` for http(s).request that answers with the checked address whatever the name, so
 * the socket goes where the check said (TLS still verifies the certificate for the host name).
 * Node calls it with `all: true` when autoSelectFamily is on (the default since Node 20).
 */
export function pinnedLookup(checked: CheckedAddress): LookupFunction {
  return ((_hostname: string, options: { all?: boolean }, callback: (...args: unknown[]) => void) => {
    if (options?.all) callback(null, [{ address: checked.address, family: checked.family }]);
    else callback(null, checked.address, checked.family);
  }) as unknown as LookupFunction;
}
