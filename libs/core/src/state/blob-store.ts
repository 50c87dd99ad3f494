/**
 * Content-addressed blobs in Redis. A node output whose JSON text is larger than a threshold is
 * stored once under the SHA-256 of that text (`<prefix>:blob:<hex>`, a string) and the snapshot
 * holds a stub `{$blob, bytes, preview}` instead. Identical outputs share one key. A blob has a
 * TTL that is only ever raised, to the retention of the latest run that references it, so it
 * outlives every run that does.
 */
import { createHash } from 'node:crypto';
import { isCluster, type RedisClient } from './redis-client.js';
import { blobPreview, isBlobStub, type BlobStub } from '../domain/blob.js';
import type { NodeView, RunDocument } from '../domain/run-model.js';
import { metrics } from '../telemetry/metrics.js';
import { blobKey } from './keys.js';

/** Outputs whose JSON text has more bytes than this become blobs, unless configured otherwise. */
export const DEFAULT_BLOB_MIN_BYTES = 16 * 1024;
/** The smallest threshold a deployment may configure. */
export const MIN_BLOB_MIN_BYTES = 1024;

/**
 * Stores the text unless the key exists, and raises the key's TTL when it is lower than asked
 * (`GT`: never lowers it). One step, so an existing blob cannot expire between the two.
 * Returns 1 when this call stored the text, 0 when it was stored already.
 */
const PUT = `
if redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2], 'NX') then return 1 end
redis.call('EXPIRE', KEYS[1], ARGV[2], 'GT')
return 0
`;
const PUT_COMMAND = 'tetraloop_blob_put';

export interface BlobStoreOptions {
  readonly prefix: string;
  /** Retention of a settled run: a blob lives at least this long past its last reference. */
  readonly retentionSeconds: number;
}

export class BlobStore {
  constructor(
    private readonly redis: RedisClient,
    private readonly options: BlobStoreOptions,
  ) {
    redis.defineCommand(PUT_COMMAND, { lua: PUT, numberOfKeys: 1 });
  }

  /** How long a blob referenced by a run with this deadline must live: like the run's own keys. */
  private ttl(timeoutSeconds: number): number {
    return this.options.retentionSeconds + timeoutSeconds;
  }

  private key(tenant: string, stub: BlobStub): string {
    return blobKey(this.options.prefix, tenant, stub.$blob.slice('sha256:'.length));
  }

  /**
   * `value` as a snapshot holds it: a stub when its JSON text has more than `minBytes` UTF-8
   * bytes, `value` itself otherwise. The blob is stored (or its TTL raised) before this answers,
   * so a stub written after it never points at nothing. A value shaped like a stub is stored
   * whatever its size, so that reading it back cannot mistake it for one.
   */
  async externalize(
    tenant: string,
    value: unknown,
    minBytes: number,
    timeoutSeconds: number,
    /** The value's JSON size in bytes, when the caller knows it: a small value is not serialized. */
    knownBytes?: number,
  ): Promise<unknown> {
    if (value === undefined) return value;
    if (knownBytes !== undefined && knownBytes <= minBytes && !isBlobStub(value)) return value;
    const text = JSON.stringify(value);
    const bytes = Buffer.byteLength(text, 'utf8');
    if (bytes <= minBytes && !isBlobStub(value)) return value;
    const stub: BlobStub = {
      $blob: `sha256:${createHash('sha256').update(text).digest('hex')}`,
      bytes,
      preview: blobPreview(typeof value === 'string' ? value : text),
    };
    const put = (this.redis as unknown as Record<string, (...a: unknown[]) => Promise<number>>)[PUT_COMMAND]!;
    const stored = await put.call(this.redis, this.key(tenant, stub), text, this.ttl(timeoutSeconds));
    metrics.blobBytes.inc({ outcome: stored === 1 ? 'stored' : 'deduplicated' }, bytes);
    return stub;
  }

  /**
   * Raises the TTL of the blob behind every stub among `values` (anything else is skipped) to at
   * least what a run with this deadline gets; never lowers one.
   */
  async retain(tenant: string, values: Iterable<unknown>, timeoutSeconds: number): Promise<void> {
    const keys = new Set<string>();
    for (const value of values) if (isBlobStub(value)) keys.add(this.key(tenant, value));
    const ttl = this.ttl(timeoutSeconds);
    // Sent together: one round trip.
    await Promise.all([...keys].map((key) => this.redis.expire(key, ttl, 'GT')));
  }

  /** The content behind each stub, by `$blob`, read with one MGET (a GET each on a cluster); a blob no longer stored is absent. */
  async contents(tenant: string, stubs: readonly BlobStub[]): Promise<Map<string, unknown>> {
    const hashes = [...new Set(stubs.map((s) => s.$blob))];
    const found = new Map<string, unknown>();
    if (hashes.length === 0) return found;
    const keys = hashes.map((h) => blobKey(this.options.prefix, tenant, h.slice('sha256:'.length)));
    // Each blob is in its own slot: a cluster answers a GET per key (sent together) for the MGET.
    const texts = isCluster(this.redis)
      ? await Promise.all(keys.map((key) => this.redis.get(key)))
      : await this.redis.mget(keys);
    hashes.forEach((hash, i) => {
      const text = texts[i];
      if (typeof text === 'string') found.set(hash, JSON.parse(text) as unknown);
    });
    return found;
  }

  /** A blob's JSON text, or null when the tenant has none stored under `hex`. */
  text(tenant: string, hex: string): Promise<string | null> {
    return this.redis.get(blobKey(this.options.prefix, tenant, hex));
  }

  /**
   * The run document with every stub in `output` (a sink's output) and, unless `nodes` is false,
   * in `nodes.*.output` (and with `inputs`, in `nodes.*.input`) replaced by its content. A blob no
   * longer stored leaves its stub.
   */
  async expandDocument(
    doc: RunDocument,
    options: { nodes?: boolean; inputs?: boolean } = {},
  ): Promise<RunDocument> {
    const withNodes = options.nodes !== false;
    const withInputs = withNodes && options.inputs === true;
    const stubs = [
      ...Object.values(doc.output ?? {}),
      ...(withNodes ? Object.values(doc.nodes).map((view) => outputOf(view)) : []),
      ...(withInputs ? Object.values(doc.nodes).map((view) => inputOf(view)) : []),
    ].filter(isBlobStub);
    if (stubs.length === 0) return doc;
    const contents = await this.contents(doc.tenant, stubs);
    const swap = (value: unknown): unknown =>
      isBlobStub(value) && contents.has(value.$blob) ? contents.get(value.$blob) : value;
    const mapValues = <T>(record: Record<string, T>, f: (v: T) => T): Record<string, T> =>
      Object.fromEntries(Object.entries(record).map(([k, v]) => [k, f(v)]));
    const expandView = (view: NodeView): NodeView => {
      if (!('output' in view) && !(withInputs && 'input' in view)) return view;
      return {
        ...view,
        ...('output' in view ? { output: swap(view.output) } : {}),
        ...(withInputs && 'input' in view ? { input: swap(view.input) } : {}),
      };
    };
    return {
      ...doc,
      output: doc.output ? mapValues(doc.output, swap) : doc.output,
      nodes: withNodes ? mapValues(doc.nodes, expandView) : doc.nodes,
    };
  }
}

const outputOf = (view: NodeView): unknown => ('output' in view ? view.output : undefined);
const inputOf = (view: NodeView): unknown => ('input' in view ? view.input : undefined);
