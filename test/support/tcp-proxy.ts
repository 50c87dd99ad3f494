/**
 * A TCP proxy in front of a server, for tests that need a connection to drop the way a network or
 * a load balancer drops it: `cut()` destroys every open connection, both sides, mid-response. It
 * keeps the head of each request it passed on, so a test can see what a client sent on reconnect.
 */
import { createServer, connect, type Socket } from 'node:net';

export interface TcpProxy {
  /** `http://127.0.0.1:<port>`: the proxy, in front of the target. */
  readonly url: string;
  /** The first bytes of each connection, as text (the request line and headers). */
  readonly heads: string[];
  /** Destroys every open connection now; new ones are still taken. */
  cut(): void;
  close(): Promise<void>;
}

export async function startTcpProxy(target: string): Promise<TcpProxy> {
  const { hostname, port } = new URL(target);
  const open = new Set<Socket>();
  const heads: string[] = [];
  const server = createServer((client) => {
    const upstream = connect(Number(port), hostname);
    for (const socket of [client, upstream]) {
      open.add(socket);
      socket.on('close', () => open.delete(socket));
      socket.on('error', () => undefined);
    }
    client.once('data', (chunk: Buffer) => heads.push(chunk.toString('latin1')));
    client.pipe(upstream);
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
    async close() {
      cut();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
