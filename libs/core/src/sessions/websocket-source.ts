/**
 * WebSocket sources: a server that pushes events over one long-lived connection. However many
 * sense workers run, one holds the connection: it takes a lease in Redis (`SET NX PX`) and renews
 * it every `intervalMs` while the socket is open. Every run of the source's job (each
 * `intervalMs`, on any worker) is a check: a worker that finds no lease (its holder died or its
 * socket closed) connects and takes it. A socket that closes gives its lease up, so the next check
 * reconnects; one that cannot connect fails the check, which backs off like a failed poll.
 */
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type WebSocket from 'ws';
import { z } from 'zod';
import type { RedisClient } from '../state/redis-client.js';
import {
  checkLiteralAddress,
  guardedLookup,
  isAllowlisted,
  type EgressPolicy,
} from '../tools/egress-policy.js';
import { SessionKey } from './sense-jobs.js';
import { DEFAULT_TENANT, TenantId } from '../domain/tenant.js';

const SourceName = z.string().regex(/^[A-Za-z0-9_.-]{1,64}$/, 'must match [A-Za-z0-9_.-]{1,64}');

/** A WebSocket server whose messages are events (JSON: an event envelope, or the payload itself). */
export const WebSocketSource = z.strictObject({
  kind: z.literal('websocket'),
  name: SourceName,
  /** Tenant whose session receives the events. @defaultValue "default" */
  tenant: TenantId.default(DEFAULT_TENANT),
  url: z.url({ protocol: /^wss?$/ }),
  /** How often a sense worker checks that someone holds the connection; at least 1000 ms. @defaultValue 5000 */
  intervalMs: z.number().int().min(1000).default(5000),
  /** Opening handshake limit. @defaultValue 5000 */
  timeoutMs: z.number().int().positive().default(5000),
  /** Session whose environment receives the events (an envelope may name its own). */
  sessionKey: SessionKey.optional(),
  /** Largest message taken; a longer one closes the socket (1009). @defaultValue 1048576 (1 MiB) */
  maxMessageBytes: z
    .number()
    .int()
    .min(1)
    .max(16 * 1024 * 1024)
    .default(1024 * 1024),
  /** Event type when a message gives none. @defaultValue "message" */
  type: z.string().min(1).max(64).default('message'),
});
export type WebSocketSource = z.infer<typeof WebSocketSource>;

/** What the holder does with a message that arrived: parse and ingest it. */
export type MessageSink = (source: WebSocketSource, data: string) => Promise<void>;

/** Renews a lease only while this holder still has it. */
const RENEW = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 0`;
/** Gives a lease up only while this holder still has it. */
const RELEASE = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`;

interface Held {
  readonly socket: WebSocket;
  readonly lease: string;
  readonly renewal: NodeJS.Timeout;
}

export interface WebSocketSourcesDeps {
  readonly redis: RedisClient;
  /** The lease key of a source. */
  readonly leaseKey: (name: string) => string;
  readonly egress: EgressPolicy;
  readonly sink: MessageSink;
  readonly logger: Logger;
}

export class WebSocketSources {
  /** This process's open connections, by source name. */
  private readonly held = new Map<string, Held>();
  /** This process's id as a lease holder. */
  private readonly holder = randomUUID();
  private closed = false;

  constructor(private readonly deps: WebSocketSourcesDeps) {}

  /**
   * One check of a source: renews the lease this process holds, or connects when nobody holds it.
   * Rejects when a connection was tried and failed (the caller backs off).
   */
  async check(source: WebSocketSource): Promise<void> {
    if (this.closed) return;
    if (this.held.has(source.name)) return;
    const key = this.deps.leaseKey(source.name);
    const ttl = leaseTtl(source);
    const lease = `${this.holder}:${randomUUID()}`;
    if ((await this.deps.redis.set(key, lease, 'PX', ttl, 'NX')) !== 'OK') return;
    try {
      const socket = await this.connect(source);
      this.hold(source, socket, lease);
    } catch (err) {
      await this.deps.redis.eval(RELEASE, 1, key, lease);
      throw err;
    }
  }

  /** Closes every connection this process holds and gives their leases up. */
  async close(): Promise<void> {
    this.closed = true;
    const open = [...this.held.entries()];
    this.held.clear();
    await Promise.all(
      open.map(async ([name, { socket, lease, renewal }]) => {
        clearInterval(renewal);
        socket.close(1001, 'going away');
        await this.deps.redis.eval(RELEASE, 1, this.deps.leaseKey(name), lease).catch(() => undefined);
      }),
    );
  }

  private async connect(source: WebSocketSource): Promise<WebSocket> {
    // Loaded at the first connection: a deployment with no WebSocket source never loads it.
    const { default: WebSocketClient } = await import('ws');
    const url = new URL(source.url);
    const port = url.port || (url.protocol === 'wss:' ? '443' : '80');
    // The egress policy of the http tool: a private address only when allowlisted, checked on the
    // address the name resolves to.
    const allowed = isAllowlisted(this.deps.egress, url.hostname, port);
    if (!allowed) checkLiteralAddress(url.hostname);
    const socket = new WebSocketClient(url, {
      handshakeTimeout: source.timeoutMs,
      maxPayload: source.maxMessageBytes,
      followRedirects: false,
      ...(allowed ? {} : { lookup: guardedLookup }),
    });
    return new Promise((resolve, reject) => {
      socket.once('open', () => resolve(socket));
      socket.once('unexpected-response', (_req, res) => {
        socket.terminate();
        reject(new Error(`the handshake was answered HTTP ${res.statusCode}`));
      });
      socket.once('error', (err) => {
        socket.terminate();
        reject(err);
      });
    });
  }

  private hold(source: WebSocketSource, socket: WebSocket, lease: string): void {
    const log = this.deps.logger.child({ source: source.name });
    const key = this.deps.leaseKey(source.name);
    const renewal = setInterval(() => {
      this.deps.redis.eval(RENEW, 1, key, lease, leaseTtl(source)).then(
        (renewed) => {
          // The lease lapsed (Redis was unreachable longer than its TTL): another worker may hold
          // the source now, so this socket goes.
          if (Number(renewed) !== 1) socket.terminate();
        },
        (err: unknown) =>
          log.warn({ err: err instanceof Error ? err.message : String(err) }, 'lease not renewed'),
      );
    }, source.intervalMs);
    renewal.unref();
    this.held.set(source.name, { socket, lease, renewal });
    // Messages are taken one at a time, in the order they came.
    let chain = Promise.resolve();
    socket.on('message', (data, isBinary) => {
      if (isBinary) return log.warn('binary websocket message ignored');
      const text = Buffer.isBuffer(data)
        ? data.toString('utf8')
        : Buffer.from(data as ArrayBuffer).toString('utf8');
      chain = chain.then(() =>
        this.deps.sink(source, text).catch((err: unknown) => {
          log.warn({ err: err instanceof Error ? err.message : String(err) }, 'websocket message not taken');
        }),
      );
    });
    socket.on('error', (err) => log.warn({ err: err.message }, 'websocket source error'));
    socket.once('close', (code) => {
      clearInterval(renewal);
      if (this.held.get(source.name)?.socket === socket) this.held.delete(source.name);
      log.info({ code }, 'websocket source closed; the next check reconnects');
      void this.deps.redis.eval(RELEASE, 1, key, lease).catch(() => undefined);
    });
  }
}

/** A holder that dies leaves its lease for three checks at most before another worker connects. */
const leaseTtl = (source: WebSocketSource): number => source.intervalMs * 3;
