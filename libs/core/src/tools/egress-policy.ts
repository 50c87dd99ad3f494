/**
 * Which hosts the `http` tool may reach. Loopback, private, link-local (cloud metadata lives
 * there), carrier-grade NAT, unique-local and unspecified addresses are refused unless the host is
 * allowlisted, and so is every IPv6 address outside global unicast or in a range that carries an
 * IPv4 address (IPv4-compatible `::/96`, NAT64, 6to4, Teredo): one could lead to a private IPv4. The check runs on the address a name resolves to, inside the socket's own lookup,
 * so a DNS answer cannot swap in an internal address after the check (no rebinding window).
 */
import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';

/** Largest response body an outbound request reads, by default (10 MiB). */
export const DEFAULT_HTTP_MAX_BYTES = 10 * 1024 * 1024;

export interface EgressPolicy {
  /** `host` or `host:port` entries, lower-case; IPv6 without brackets. */
  readonly allowHosts: ReadonlySet<string>;
  /** Largest response body read, in bytes; a longer one is refused. @defaultValue 10 MiB */
  readonly maxResponseBytes: number;
}

/**
 * The policy from `TETRALOOP_HTTP_ALLOW_HOSTS` (comma-separated `host` or `host:port`) and the
 * response byte cap (`TETRALOOP_HTTP_MAX_BYTES`).
 */
export function parseAllowHosts(
  value: string | undefined,
  maxResponseBytes: number = DEFAULT_HTTP_MAX_BYTES,
): EgressPolicy {
  const entries = (value ?? '')
    .split(',')
    .map((s) =>
      s
        .trim()
        .toLowerCase()
        .replace(/^\[(.*)\](:\d+)?$/, '$1$2'),
    )
    .filter((s) => s.length > 0);
  return { allowHosts: new Set(entries), maxResponseBytes };
}

/** True when `host` (or `host:port`) is explicitly allowlisted. */
export function isAllowlisted(policy: EgressPolicy, hostname: string, port: string): boolean {
  const host = hostname.toLowerCase().replace(/^\[(.*)\]$/, '$1');
  return policy.allowHosts.has(host) || policy.allowHosts.has(`${host}:${port}`);
}

/**
 * IANA's global unicast space: an IPv6 address outside it is reserved, such as the
 * IPv4-compatible `::a.b.c.d` (`::/96`), which ipaddr.js calls `unicast`.
 */
const GLOBAL_UNICAST = ipaddr.IPv6.parseCIDR('2000::/3');

const DOTTED_TAIL = /(\d+)\.(\d+)\.(\d+)\.(\d+)(%.*)?$/;

/**
 * An IPv6 address with its dotted IPv4 tail written as two hex groups. ipaddr.js reads `::a.b.c.d`
 * as `::ffff:a.b.c.d`; a socket (and `dns.lookup`, which prints `::/96` that way) means `::/96`.
 */
const hexTail = (address: string): string =>
  address.replace(DOTTED_TAIL, (_all, a: string, b: string, c: string, d: string, zone = '') => {
    const group = (high: string, low: string): string => ((Number(high) << 8) | Number(low)).toString(16);
    return `${group(a, b)}:${group(c, d)}${zone}`;
  });

/**
 * True for globally routable unicast addresses only. An IPv4-mapped address (`::ffff:a.b.c.d`) is
 * judged by its IPv4 address; NAT64 (`64:ff9b::/96`), 6to4 (`2002::/16`) and Teredo (`2001::/32`)
 * are refused whatever IPv4 address they carry (ipaddr.js names them; they are not `unicast`).
 */
export function isPublicAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 0 || !ipaddr.isValid(address)) return false;
  if (family === 4) return ipaddr.IPv4.parse(address).range() === 'unicast';
  const v6 = ipaddr.IPv6.parse(hexTail(address));
  if (v6.isIPv4MappedAddress()) return v6.toIPv4Address().range() === 'unicast';
  return v6.range() === 'unicast' && v6.match(GLOBAL_UNICAST);
}

/**
 * A refused destination. The message names the host as the caller wrote it and never the address
 * it resolved to: the message is stored in the run document, and an internal address is not the
 * caller's to learn.
 */
export class EgressDeniedError extends Error {
  constructor(
    readonly host: string,
    readonly address: string,
  ) {
    super(
      `egress to ${host} is refused: it is or resolves to a private address; allowlist the host in TETRALOOP_HTTP_ALLOW_HOSTS`,
    );
    this.name = 'EgressDeniedError';
  }
}

/** Checks an IP literal in a URL (sockets skip the lookup for those). */
export function checkLiteralAddress(hostname: string): void {
  const host = hostname.replace(/^\[(.*)\]$/, '$1');
  if (isIP(host) !== 0 && !isPublicAddress(host)) throw new EgressDeniedError(hostname, host);
}

type LookupCallback = (
  err: NodeJS.ErrnoException | null,
  address: string | LookupAddress[],
  family?: number,
) => void;

/** A `net.connect` lookup that refuses non-public answers. */
export function guardedLookup(
  hostname: string,
  options: { all?: boolean; family?: number | string },
  callback: LookupCallback,
): void {
  dnsLookup(hostname, { ...options, all: true } as { all: true }, (err, addresses) => {
    if (err) return callback(err, []);
    const denied = addresses.find((a) => !isPublicAddress(a.address));
    if (denied) return callback(new EgressDeniedError(hostname, denied.address), []);
    if (options.all) return callback(null, addresses);
    const first = addresses[0];
    if (!first)
      return callback(Object.assign(new Error(`no address for ${hostname}`), { code: 'ENOTFOUND' }), []);
    callback(null, first.address, first.family);
  });
}
