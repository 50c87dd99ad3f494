/**
 * Where a secret may go. Each secret carries a scope written with its value: the hosts an `http`
 * call may send it to and the other tools it may be given to. A reference is filled in only for a
 * call its scope allows, so a plan written by a model (or a prompt injection in what the planner
 * read) cannot send a secret to a host of its choosing. Pure: no I/O.
 */
import { z } from 'zod';

/** Most entries in a secret's `hosts` (and in its `tools`). */
export const MAX_SECRET_SCOPE_ENTRIES = 50;

/**
 * A `hosts` entry: `"*"` (any host: written on purpose, never implied), a name such as
 * `api.example.com`, a wildcard `*.example.com` (any name below it, not the name itself), an IPv4
 * or bracketed IPv6 address; each with an optional `:port`.
 */
export const SecretHost = z
  .string()
  .trim()
  .toLowerCase()
  .regex(
    /^(\*|(\*\.)?[a-z0-9_]([a-z0-9_-]{0,62})(\.[a-z0-9_]([a-z0-9_-]{0,62}))*\.?(:\d{1,5})?|\[[0-9a-f:.]+\](:\d{1,5})?)$/,
    'a host is "*", a name (api.example.com), a wildcard (*.example.com) or an address, each with an optional :port',
  );

/** A `tools` entry: a tool's name as a graph names it (`mcp.crm.lookup`). */
export const SecretTool = z
  .string()
  .min(1)
  .max(128)
  .refine((name) => name !== 'http', {
    message: 'the http tool is allowed by "hosts", not by "tools"',
  });

/** A secret's scope as stored and listed. */
export const SecretScope = z.object({
  hosts: z.array(SecretHost).max(MAX_SECRET_SCOPE_ENTRIES).default([]),
  tools: z.array(SecretTool).max(MAX_SECRET_SCOPE_ENTRIES).default([]),
});
export type SecretScope = z.infer<typeof SecretScope>;

/** Where one call sends what it is given: the tool, and the host when it reaches a URL. */
export interface SecretDestination {
  readonly tool: string;
  /** The URL the call reaches (the `http` tool): its hosts decide, never `tools`. */
  readonly url?: URL;
}

/** `host:port` of a URL as a scope entry is matched against (default ports filled in), and whether it is TLS. */
function hostAndPort(url: URL): { host: string; port: string; secure: boolean } {
  const host = url.hostname
    .toLowerCase()
    .replace(/^\[(.*)\]$/, '$1')
    .replace(/\.$/, '');
  const port = url.port || (url.protocol === 'https:' ? '443' : url.protocol === 'http:' ? '80' : '');
  return { host, port, secure: url.protocol === 'https:' };
}

/** An entry split into its host part (IPv6 without brackets) and its port, if it names one. */
function splitEntry(entry: string): { name: string; port?: string } {
  const bracketed = /^\[([^\]]+)\](?::(\d+))?$/.exec(entry);
  if (bracketed) return { name: bracketed[1]!, ...(bracketed[2] ? { port: bracketed[2] } : {}) };
  const withPort = /^(.*):(\d+)$/.exec(entry);
  if (withPort) return { name: withPort[1]!, port: withPort[2]! };
  return { name: entry };
}

/**
 * Whether one `hosts` entry admits `host` (lower case, IPv6 without brackets) on `port`. An entry
 * without a port admits HTTPS only (on any port): a secret is never sent in clear to a host that
 * was named without saying so. An entry with a port admits that port, over HTTP or HTTPS.
 */
export function hostMatches(entry: string, host: string, port: string, secure: boolean): boolean {
  if (entry === '*') return true;
  const { name: raw, port: wanted } = splitEntry(entry);
  if (wanted === undefined ? !secure : wanted !== port) return false;
  const name = raw.toLowerCase().replace(/\.$/, '');
  if (name.startsWith('*.')) {
    const suffix = name.slice(1);
    return host.endsWith(suffix) && host.length > suffix.length;
  }
  return name === host;
}

/** Why `scope` keeps secret `name` from `to`, or undefined when it may go there. */
export function secretRefusal(name: string, scope: SecretScope, to: SecretDestination): string | undefined {
  if (to.url) {
    const { host, port, secure } = hostAndPort(to.url);
    if (scope.hosts.some((entry) => hostMatches(entry, host, port, secure))) return undefined;
    const allowed = scope.hosts.length > 0 ? scope.hosts.join(', ') : 'none';
    const where = `${to.url.protocol}//${to.url.host}`;
    return `secret "${name}" may not be sent to ${where} (its hosts: ${allowed}; an entry without a port admits https only); add the host to the secret's "hosts" with PUT /v1/secrets/${name}`;
  }
  if (scope.tools.includes(to.tool)) return undefined;
  const allowed = scope.tools.length > 0 ? scope.tools.join(', ') : 'none';
  return `secret "${name}" may not be given to tool "${to.tool}" (its tools: ${allowed}); add the tool to the secret's "tools" with PUT /v1/secrets/${name}`;
}

/** What a secret written before secrets had scopes answers when a call uses it. */
export function unscopedSecretMessage(name: string): string {
  return `secret "${name}" was stored before secrets said where they may go: write it again with "hosts" (and "tools"), e.g. PUT /v1/secrets/${name} {"hosts": ["api.example.com"]}`;
}
