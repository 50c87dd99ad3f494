/**
 * Which hosts the `http` tool may reach. Loopback, private, link-local (cloud metadata lives
 * there), carrier-grade NAT, unique-local and unspecified addresses are refused unless the host is
 * allowlisted. The check runs on the address a name resolves to, inside the socket's own lookup,
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

/** True for globally routable unicast addresses only. */
export function isPublicAddress(address: string): boolean {
  if (!ipaddr.isValid(address)) return false;
  let parsed = ipaddr.parse(address);
  if (parsed.kind() === 'ipv6' && (parsed as ipaddr.IPv6).isIPv4MappedAddress()) {
    parsed = (parsed as ipaddr.IPv6).toIPv4Address();
  }
  return parsed.range() === 'unicast';
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
