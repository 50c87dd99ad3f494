/**
 * What `REDIS_URL` names: one Redis (`redis://`, `rediss://`), or a Redis Cluster
 * (`redis+cluster://[user:password@]host:port,host:port,…`, `rediss+cluster://` for TLS) given by
 * some of its nodes — the client learns the rest from them. Pure: parsing only, no connection.
 */

export interface ClusterUrl {
  readonly nodes: readonly { readonly host: string; readonly port: number }[];
  readonly username?: string;
  readonly password?: string;
  readonly tls: boolean;
}

const CLUSTER_SCHEME = /^(rediss?)\+cluster:\/\/(.*)$/;

/** Whether `url` names a cluster (its scheme ends in `+cluster`). */
export const isClusterUrl = (url: string): boolean => CLUSTER_SCHEME.test(url);

/** The nodes and credentials of a `redis+cluster://` URL; throws naming what is wrong. */
export function parseClusterUrl(url: string): ClusterUrl {
  const match = CLUSTER_SCHEME.exec(url);
  if (!match) throw new Error('a cluster URL starts with redis+cluster:// or rediss+cluster://');
  const rest = match[2]!.replace(/\/.*$/, '');
  const at = rest.lastIndexOf('@');
  const auth = at >= 0 ? rest.slice(0, at) : '';
  const hosts = at >= 0 ? rest.slice(at + 1) : rest;
  const nodes = hosts.split(',').map((hostPort) => {
    const colon = hostPort.lastIndexOf(':');
    const host = colon > 0 ? hostPort.slice(0, colon).replace(/^\[(.*)\]$/, '$1') : hostPort;
    const port = colon > 0 ? Number(hostPort.slice(colon + 1)) : 6379;
    if (!host || !Number.isInteger(port) || port < 1 || port > 65_535) {
      throw new Error(`"${hostPort}" is not host:port`);
    }
    return { host, port };
  });
  const [user = '', password] = auth.includes(':') ? auth.split(/:(.*)/s, 2) : [auth];
  return {
    nodes,
    tls: match[1] === 'rediss',
    ...(user ? { username: decodeURIComponent(user) } : {}),
    ...(password ? { password: decodeURIComponent(password) } : {}),
  };
}

/** A problem with `url` as a `REDIS_URL`, or null when it is one. */
export function redisUrlProblem(url: string): string | null {
  if (isClusterUrl(url)) {
    try {
      parseClusterUrl(url);
      return null;
    } catch (err) {
      return (err as Error).message;
    }
  }
  try {
    const { protocol } = new URL(url);
    return protocol === 'redis:' || protocol === 'rediss:'
      ? null
      : 'expected redis://, rediss://, redis+cluster:// or rediss+cluster://';
  } catch {
    return 'not a URL';
  }
}
