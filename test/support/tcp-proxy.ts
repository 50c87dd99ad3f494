/**
 * A TCP proxy in front of a server, for tests that need a connection to drop the way a network or
 * a load balancer drops it: `cut()` destroys every open connection, both sides, mid-response. It
 * keeps the head of each request it passed on, so a test can see what a client sent on reconnect.
 * `hold(pattern)` keeps back what a client sends from its first chunk that matches, so a test can
 * decide when a command reaches the server (a blocking read, say).
 */
import { createServer, connect, type Socket } from 'node:net';

export interface TcpProxy {
  /** `http://127.0.0.1:<port>`: the proxy, in front of the target. */
  readonly url: string;
  /** The first bytes of each connection, as text (the request line and headers). */
  readonly heads: string[];
  /** Destroys every open connection now; new ones are still taken. */
  cut(): void;
  /**
   * From now on, the first client chunk that matches `pattern` (as latin1 text) and all that
   * connection sends after it are kept back until `release()`.
   */
  hold(pattern: RegExp): Hold;
  close(): Promise<void>;
}

export interface Hold {
  /** Resolves once a matching chunk was kept back. */
  readonly held: Promise<void>;
  /** Passes on what was kept back, in order, and everything after it. */
  release(): void;
}

export async function startTcpProxy(target: string): Promise<TcpProxy> {
  const { hostname, port } = new URL(target);
  const open = new Set<Socket>();
  const heads: string[] = [];
  let holding: { pattern: RegExp; kept: Map<Socket, Buffer[]>; found: () => void } | undefined;
  const server = createServer((client) => {
    const upstream = connect(Number(port), hostname);
    for (const socket of [client, upstream]) {
      open.add(socket);
      socket.on('close', () => open.delete(socket));
      socket.on('error', () => undefined);
    }
    client.once('data', (chunk: Buffer) => heads.push(chunk.toString('latin1')));
    client.on('data', (chunk: Buffer) => {
      const kept = holding?.kept.get(upstream);
      if (kept) kept.push(chunk);
      else if (holding?.pattern.test(chunk.toString('latin1'))) {
        holding.kept.set(upstream, [chunk]);
        holding.found();
      } else upstream.write(chunk);
    });
    client.on('end', () => upstream.end());
    upstream.pipe(client);
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('the proxy has no port');
  const cut = (): void => {
    for (const socket of open) socket.destroy();
  };
  return {
    url: `http://127.0.0.1:${address.port}`,
    heads,
    cut,
    hold(pattern) {
      let found: () => void = () => undefined;
      const held = new Promise<void>((resolve) => (found = resolve));
      const kept = new Map<Socket, Buffer[]>();
      holding = { pattern, kept, found };
      return {
        held,
        release() {
          holding = undefined;
          for (const [upstream, chunks] of kept) for (const chunk of chunks) upstream.write(chunk);
        },
      };
    },
    async close() {
      cut();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
