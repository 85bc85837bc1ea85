/**
 * Server-side request forgery protection for webhook URLs (docs/webhooks.md, "Endpoints"). A
 * webhook URL is chosen by a developer and fetched by our servers, so it must never reach loopback,
 * private, link-local, multicast or otherwise internal addresses. The host is resolved and checked
 * at creation and again at every delivery, and the delivery connects to exactly the address that
 * was checked (see pinnedLookup): a DNS answer that changes between check and connect
 * ("DNS rebinding") cannot redirect the request.
 */
import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { BlockList, isIP, type LookupFunction } from 'node:net';

/**
 * Refused: a URL a webhook may not use, or a host that resolves to an internal address. The
 * message is for the developer; `detail`, for the operator's log, says what the host resolved
 * to. A refused destination always gets the one message REFUSED_DESTINATION, so that nobody can
 * map internal names by registering webhook URLs (which names exist, what they resolve to).
 */
export class UnsafeDestinationError extends Error {
  override name = 'UnsafeDestinationError';

  constructor(
    message: string,
    readonly detail = message,
  ) {
    super(message);
  }
}

/** What a developer is told of every refused destination (the URL itself is well formed). */
export const REFUSED_DESTINATION =
  'must name a host on the public internet (loopback, private, link-local and other internal ' +
  'addresses are refused, and so are names public DNS does not answer)';

const refused = (detail: string) => new UnsafeDestinationError(REFUSED_DESTINATION, detail);

/**
 * IPv4: the IANA IPv4 Special-Purpose Address Registry (RFC 6890) ranges that are not globally
 * reachable, plus multicast. Globally reachable anycast entries inside a refused block
 * (192.0.0.9 PCP, 192.0.0.10 TURN) are refused with it: they are never a webhook receiver.
 */
const BLOCKED_IPV4 = new BlockList();
for (const [network, prefix] of [
  ['0.0.0.0', 8], // "this network" (0.0.0.0 reaches the local host on Linux)
  ['10.0.0.0', 8], // private (RFC 1918)
  ['100.64.0.0', 10], // carrier-grade NAT (RFC 6598)
  ['127.0.0.0', 8], // loopback
  ['169.254.0.0', 16], // link-local, including cloud metadata (169.254.169.254)
  ['172.16.0.0', 12], // private
  ['192.0.0.0', 24], // IETF protocol assignments (DS-Lite, NAT64 discovery, PCP/TURN anycast)
  ['192.0.2.0', 24], // documentation (TEST-NET-1)
  ['192.88.99.0', 24], // 6to4 and 6a44 relay anycast (deprecated, RFC 7526)
  ['192.168.0.0', 16], // private
  ['198.18.0.0', 15], // benchmarking
  ['198.51.100.0', 24], // documentation (TEST-NET-2)
  ['203.0.113.0', 24], // documentation (TEST-NET-3)
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved, and 255.255.255.255 broadcast
] as const) {
  BLOCKED_IPV4.addSubnet(network, prefix, 'ipv4');
}

/**
 * IPv6 is checked on its 128 bits, whatever the spelling (::127.0.0.1, ::7f00:1, 0:0::7F00:1).
 * Only global unicast 2000::/3 can be reached (IANA IPv6 Address Space Registry: the rest is
 * reserved, unique local, link-local, site-local or multicast), minus the special-purpose
 * ranges of the IANA IPv6 Special-Purpose Address Registry that are not globally reachable.
 * The forms that embed an IPv4 address, and what is decided for each:
 *
 * - IPv4-mapped ::ffff:0:0/96 (RFC 4291), IPv4 in the last 32 bits: the IPv4 address is
 *   checked (sockets connect to it).
 * - NAT64 64:ff9b::/96 (RFC 6052), last 32 bits: the IPv4 address is checked (globally
 *   reachable, what DNS64 answers on IPv6-only hosts; RFC 6052 §3.1 bars non-global IPv4 in it).
 * - IPv4-compatible ::/96 (RFC 4291, deprecated), last 32 bits: refused whole (outside 2000::/3).
 * - SIIT ::ffff:0:0:0/96 (RFC 2765, obsolete), last 32 bits: refused whole (outside 2000::/3).
 * - Local NAT64 64:ff9b:1::/48 (RFC 8215), where the IPv4 sits depends on the local prefix:
 *   refused whole (it translates into the operator's own network).
 * - 6to4 2002::/16 (RFC 3056, deprecated by 7526), bits 16-47: refused whole.
 * - Teredo 2001::/32 (RFC 4380), server in bits 32-63, client inverted in the last 32 bits:
 *   refused whole, with 2001::/23.
 * - ISATAP interface id (RFC 5214) in any /64 (::0:5efe:a.b.c.d, ::200:5efe:...), last 32 bits
 *   after 0:5efe or 200:5efe (u/g bits ignored): the IPv4 address is checked (the site's ISATAP
 *   router tunnels to it inside that site).
 * - NAT64 network-specific prefixes, anywhere (RFC 6052 §2.2): not recognizable from the
 *   address; the network must not route them inward.
 *
 * An address with a zone id (fe80::1%eth0) is scoped to one link, hence never global: refused.
 */
const IPV6_GLOBAL_UNICAST = ipv6Prefix('2000::', 3);
const IPV4_MAPPED = ipv6Prefix('::ffff:0:0', 96);
const NAT64_WELL_KNOWN = ipv6Prefix('64:ff9b::', 96);
const BLOCKED_IPV6_GLOBAL = [
  // Refused whole, like the special-purpose blocks in IPv4; includes Teredo 2001::/32, and
  // anycast or overlay services (PCP, TURN, AMT, AS112, ORCHIDv2, DRIP) that are no receivers.
  ipv6Prefix('2001::', 23), // IETF protocol assignments
  ipv6Prefix('2001:db8::', 32), // documentation
  ipv6Prefix('2002::', 16), // 6to4
  ipv6Prefix('3fff::', 20), // documentation (RFC 9637)
];

interface Ipv6Prefix {
  network: bigint;
  shift: bigint;
}

function ipv6Prefix(network: string, bits: number): Ipv6Prefix {
  const shift = BigInt(128 - bits);
  return { network: ipv6Bits(network) >> shift, shift };
}

const inPrefix = (bits: bigint, prefix: Ipv6Prefix) => bits >> prefix.shift === prefix.network;

/** The 128 bits of an IPv6 address that isIP accepted (without zone id). */
function ipv6Bits(address: string): bigint {
  // A trailing dotted IPv4 part (::ffff:1.2.3.4) is the last two groups.
  const text = address.replace(/(\d+)\.(\d+)\.(\d+)\.(\d+)$/, (_all, a, b, c, d) =>
    [(Number(a) << 8) | Number(b), (Number(c) << 8) | Number(d)]
      .map((group) => group.toString(16))
      .join(':'),
  );
  const groups = (part: string | undefined) => (part ? part.split(':') : []);
  const [head, tail] = text.split('::').map(groups) as [string[], string[] | undefined];
  // "::" stands for as many zero groups as make eight.
  const all = tail
    ? [...head, ...Array<string>(8 - head.length - tail.length).fill('0'), ...tail]
    : head;
  return all.reduce((bits, group) => (bits << 16n) | BigInt(parseInt(group, 16)), 0n);
}

/** The dotted IPv4 address in the last 32 bits. */
function lastIpv4(bits: bigint): string {
  const v4 = Number(bits & 0xffffffffn);
  return [24, 16, 8, 0].map((shift) => (v4 >>> shift) & 0xff).join('.');
}

/** An ISATAP interface id: 0000:5efe or 0200:5efe (and the u/g-bit variants) then an IPv4. */
const isIsatap = (bits: bigint) => ((bits >> 32n) & 0xfcffffffn) === 0x5efen;

/** Why an address may not be reached; `ipv4` names the embedded IPv4 address that decided. */
interface Verdict {
  internal: boolean;
  ipv4?: string;
}

function checkIpv6(address: string): Verdict {
  if (address.includes('%')) return { internal: true };
  const bits = ipv6Bits(address);
  if (inPrefix(bits, IPV4_MAPPED) || inPrefix(bits, NAT64_WELL_KNOWN)) return checkEmbedded(bits);
  if (!inPrefix(bits, IPV6_GLOBAL_UNICAST)) return { internal: true };
  if (BLOCKED_IPV6_GLOBAL.some((prefix) => inPrefix(bits, prefix))) return { internal: true };
  if (isIsatap(bits)) return checkEmbedded(bits);
  return { internal: false };
}

function checkEmbedded(bits: bigint): Verdict {
  const ipv4 = lastIpv4(bits);
  return { internal: BLOCKED_IPV4.check(ipv4, 'ipv4'), ipv4 };
}

function checkAddress(address: string): Verdict {
  const family = isIP(address);
  if (family === 4) return { internal: BLOCKED_IPV4.check(address, 'ipv4') };
  if (family === 6) return checkIpv6(address);
  return { internal: true };
}

/** True for any address a webhook must not reach; anything that is not an IP is refused too. */
export function isInternalAddress(address: string): boolean {
  return checkAddress(address).internal;
}

/** How host names are resolved; tests pass their own to simulate DNS answers. */
export type Resolver = (hostname: string) => Promise<LookupAddress[]>;

const systemResolver: Resolver = (hostname) =>
  new Promise((resolve, reject) => {
    dnsLookup(hostname, { all: true, verbatim: true }, (err, addresses) =>
      err ? reject(err) : resolve(addresses),
    );
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

/**
 * The URL rules that need no DNS: absolute https, no credentials, no fragment, not port 0,
 * bounded length. The URL is what is stored and shown, in its WHATWG serialization (`href`:
 * `https:hooks.example` is `https://hooks.example/`, a default port dropped), checked again.
 */
export function parseWebhookUrl(raw: string): URL {
  if (raw.length > 2048) throw new UnsafeDestinationError('must be at most 2048 characters');
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new UnsafeDestinationError('must be an absolute https URL');
  }
  if (url.protocol !== 'https:') throw new UnsafeDestinationError('must use https');
  if (url.username || url.password)
    throw new UnsafeDestinationError('must not contain credentials');
  if (raw.includes('#')) throw new UnsafeDestinationError('must not contain a fragment');
  if (!url.hostname) throw new UnsafeDestinationError('must name a host');
  // Port 0 reaches no server (the sockets API reads it as "any port").
  if (url.port === '0') throw new UnsafeDestinationError('must not use port 0');
  if (url.href.length > 2048) throw new UnsafeDestinationError('must be at most 2048 characters');
  return url;
}

/**
 * Resolves the URL's host and checks every address it resolves to (one internal address is
 * enough to refuse: which one a client would pick is not ours to guess). Returns the address
 * to connect to.
 */
export async function checkDestination(
  url: URL,
  options: DestinationOptions,
): Promise<CheckedAddress> {
  const hostname = url.hostname.replace(/^\[(.*)\]$/, '$1');
  let addresses: LookupAddress[];
  if (isIP(hostname)) {
    addresses = [{ address: hostname, family: isIP(hostname) }];
  } else {
    try {
      addresses = await (options.resolver ?? systemResolver)(hostname);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      throw refused(`host ${hostname} does not resolve${code ? ` (${code})` : ''}`);
    }
  }
  if (addresses.length === 0) throw refused(`host ${hostname} does not resolve`);
  if (!options.allowPrivateNetworks) {
    for (const { address } of addresses) {
      const { internal, ipv4 } = checkAddress(address);
      if (!internal) continue;
      const embedded = ipv4 ? ` (which embeds the IPv4 address ${ipv4})` : '';
      throw refused(
        `host ${hostname} resolves to ${address}${embedded}, a loopback, private, link-local or otherwise internal address`,
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
  return ((
    _hostname: string,
    options: { all?: boolean },
    callback: (...args: unknown[]) => void,
  ) => {
    if (options?.all) callback(null, [{ address: checked.address, family: checked.family }]);
    else callback(null, checked.address, checked.family);
  }) as unknown as LookupFunction;
}
