/** Content-addressed blobs: large node outputs stored once by hash, stubs in snapshots, read through. */
import { createHash, randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_TENANT, type RunDocument } from '@tetraloop/core/domain';
import { blobKey, runKeys } from '@tetraloop/core/state';
import { startModelServer, type ModelServer } from './support/model-server.js';
import {
  post,
  postRun,
  runToEnd,
  startStack,
  untilNodeStatus,
  waitFor,
  type Stack,
} from './support/stack.js';

const RETENTION = 5000;
const TIMEOUT_SECONDS = 600;

let stack: Stack;
let model: ModelServer;
let redis: Redis;

beforeAll(async () => {
  model = await startModelServer({ script: () => ({ content: 'a summary' }) });
  stack = await startStack({
    env: {
      OPENAI_BASE_URL: model.url,
      TETRALOOP_MODEL_MAX_RETRIES: '0',
      TETRALOOP_RUN_RETENTION_SECONDS: String(RETENTION),
    },
  });
  redis = new Redis(stack.env.REDIS_URL!);
});
afterAll(async () => {
  await stack?.close();
  await model?.close();
  redis?.disconnect();
});

/** A value whose JSON text is well over the 16 KiB default threshold, unique per call. */
function bigValue(title = `report ${randomUUID()}`): { title: string; nested: { id: number }; body: string } {
  return { title, nested: { id: 42 }, body: 'x'.repeat(20_000) };
}

const hexOf = (value: unknown): string => createHash('sha256').update(JSON.stringify(value)).digest('hex');

const stubOf = (value: unknown) => {
  const text = JSON.stringify(value);
  return {
    $blob: `sha256:${hexOf(value)}`,
    bytes: Buffer.byteLength(text, 'utf8'),
    preview: text.slice(0, 200),
  };
};

const blobKeys = (): Promise<string[]> => redis.keys(`${stack.prefix}:blob:*`);

const getJson = async (path: string): Promise<{ status: number; body: unknown; type: string | null }> => {
  const res = await fetch(`${stack.url}${path}`);
  return { status: res.status, type: res.headers.get('content-type'), body: await res.json() };
};

/** The value of `tetraloop_blob_bytes_total{outcome}` in this process's metrics. */
async function blobBytes(outcome: 'stored' | 'deduplicated'): Promise<number> {
  const text = await (await fetch(`${stack.url}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`tetraloop_blob_bytes_total{outcome="${outcome}"}`));
  return line ? Number(line.split(' ')[1]) : 0;
}

const jsonNode = (id: string, value: unknown) => ({ id, kind: 'tool', tool: 'json', args: { value } });

describe('a large output', () => {
  it('becomes a stub in the document, read through by references and prompts, expanded on request', async () => {
    const big = bigValue();
    const before = await blobKeys();
    const storedBefore = await blobBytes('stored');
    const dedupedBefore = await blobBytes('deduplicated');
    const calls = model.requests.length;
    const doc = await runToEnd(stack.url, {
      timeoutSeconds: TIMEOUT_SECONDS,
      graph: {
        nodes: [
          jsonNode('big', big),
          jsonNode('pick', { id: { $ref: 'big.output.nested.id' }, line: 'title={{big.output.title}}' }),
          jsonNode('echo', { $ref: 'big.output' }),
          { id: 'summary', kind: 'llm', prompt: 'Summarise {{big.output.title}}: {{big.output.body}}' },
        ],
        edges: [
          ['big', 'pick'],
          ['big', 'echo'],
          ['big', 'summary'],
        ],
      },
    });
    expect(doc.status).toBe('succeeded');
    const stub = stubOf(big);
    expect(stub.bytes).toBeGreaterThan(16 * 1024);
    // The snapshot and the run's output hold the stub, not the content.
    expect(doc.nodes.big).toMatchObject({ status: 'succeeded', output: stub });
    expect(doc.nodes.echo).toMatchObject({ status: 'succeeded', output: stub });
    expect(doc.output).toEqual({
      pick: { id: 42, line: `title=${big.title}` },
      echo: stub,
      summary: { text: 'a summary' },
    });
    // (The graph still holds the value, as the json node's argument; a large input is a stub too.)
    expect(doc.nodes.echo).toMatchObject({ input: stubOf({ value: big }) });
    const outputs = Object.values(doc.nodes).map((n) => ('output' in n ? n.output : undefined));
    expect(JSON.stringify({ output: doc.output, outputs }).length).toBeLessThan(10_000);

    // The dependents got the content: a nested field, an interpolation, the whole value, a prompt.
    const prompt = model.requests.slice(calls)[0]!.messages.at(-1)!.content!;
    expect(prompt.startsWith(`Summarise ${big.title}: xxxx`)).toBe(true);
    expect(prompt).toContain('…[truncated 12000 chars]');

    // `big` and `echo` have the same output: one blob; and their same input (`{value: big}`, the
    // value `echo` received), one more.
    const bigKey = blobKey(stack.prefix, DEFAULT_TENANT, hexOf(big));
    const inputKey = blobKey(stack.prefix, DEFAULT_TENANT, hexOf({ value: big }));
    const added = (await blobKeys()).filter((k) => !before.includes(k));
    expect(added.sort()).toEqual([bigKey, inputKey].sort());
    expect(await redis.get(bigKey)).toBe(JSON.stringify(big));
    const inputStub = stubOf({ value: big });
    expect((await blobBytes('stored')) - storedBefore).toBe(stub.bytes + inputStub.bytes);
    expect((await blobBytes('deduplicated')) - dedupedBefore).toBe(stub.bytes + inputStub.bytes);

    // It lives at least as long as the run that references it.
    const ttl = await redis.ttl(bigKey);
    const runTtl = await redis.ttl(runKeys(stack.prefix, doc.runId).meta);
    expect(runTtl).toBeGreaterThan(RETENTION - 60);
    expect(ttl).toBeGreaterThanOrEqual(runTtl);
    expect(ttl).toBeLessThanOrEqual(RETENTION + TIMEOUT_SECONDS);

    // GET /v1/runs/:id shows the stub; ?expand=blobs the content, in output and nodes.*.output.
    const plain = await getJson(`/v1/runs/${doc.runId}`);
    expect((plain.body as RunDocument).nodes.big).toMatchObject({ output: stub });
    const expanded = (await getJson(`/v1/runs/${doc.runId}?expand=blobs`)).body as RunDocument;
    expect(expanded.nodes.big).toMatchObject({ status: 'succeeded', output: big });
    expect(expanded.nodes.echo).toMatchObject({ output: big });
    expect(expanded.output).toEqual({ pick: doc.output!.pick, echo: big, summary: { text: 'a summary' } });
    const waited = await getJson(`/v1/runs/${doc.runId}/wait?timeoutMs=0&expand=blobs`);
    expect(waited.status).toBe(200);
    expect((waited.body as RunDocument).output!.echo).toEqual(big);

    // GET /v1/blobs/:hash, by the stub's name or by the bare hex.
    for (const name of [stub.$blob, hexOf(big)]) {
      const blob = await getJson(`/v1/blobs/${name}`);
      expect(blob.status).toBe(200);
      expect(blob.type).toMatch(/^application\/json/);
      expect(blob.body).toEqual(big);
    }
  });

  it('is stored once however many runs produce it', async () => {
    const big = bigValue();
    const before = await blobKeys();
    const dedupedBefore = await blobBytes('deduplicated');
    const graph = { nodes: [jsonNode('a', big), jsonNode('b', big)] };
    const [first, second] = await Promise.all([
      runToEnd(stack.url, { graph }),
      runToEnd(stack.url, { graph }),
    ]);
    for (const doc of [first, second]) {
      expect(doc.status).toBe('succeeded');
      expect(doc.output).toEqual({ a: stubOf(big), b: stubOf(big) });
    }
    // The output, and the input that carried it (`{value: big}`), each stored once.
    expect((await blobKeys()).filter((k) => !before.includes(k)).sort()).toEqual(
      [hexOf(big), hexOf({ value: big })].map((hex) => blobKey(stack.prefix, DEFAULT_TENANT, hex)).sort(),
    );
    // Four outputs and four inputs, one of each stored: three of each deduplicated.
    expect((await blobBytes('deduplicated')) - dedupedBefore).toBe(
      3 * stubOf(big).bytes + 3 * stubOf({ value: big }).bytes,
    );

    // Each new reference raises the blob's TTL to the run's retention, and never lowers it.
    const key = blobKey(stack.prefix, DEFAULT_TENANT, hexOf(big));
    await redis.expire(key, 100);
    await runToEnd(stack.url, { graph });
    expect(await redis.ttl(key)).toBeGreaterThanOrEqual(RETENTION);
    await redis.expire(key, RETENTION * 10);
    await runToEnd(stack.url, { graph });
    expect(await redis.ttl(key)).toBeGreaterThan(RETENTION * 9);
  });

  it('lives on with a resumed run that keeps it', async () => {
    const big = bigValue();
    const doc = await runToEnd(stack.url, {
      graph: {
        nodes: [
          jsonNode('big', big),
          {
            id: 'bad',
            kind: 'tool',
            tool: 'http',
            args: { url: 'http://127.0.0.1:1/' },
            retry: { network: 0 },
          },
        ],
        edges: [['big', 'bad']],
      },
    });
    expect(doc.status).toBe('failed');
    const key = blobKey(stack.prefix, DEFAULT_TENANT, hexOf(big));
    await redis.expire(key, 100);
    expect((await post(stack.url, `/v1/runs/${doc.runId}/resume`)).status).toBe(202);
    // Raised before the run reopened, and again when it settled.
    expect(await redis.ttl(key)).toBeGreaterThanOrEqual(RETENTION);
    const again = await waitFor(stack.url, doc.runId);
    expect(again).toMatchObject({ status: 'failed', generation: 1 });
    expect(again.nodes.big).toMatchObject({ output: stubOf(big) });
    expect(await redis.ttl(key)).toBeGreaterThanOrEqual(
      await redis.ttl(runKeys(stack.prefix, doc.runId).meta),
    );
  });

  it('below the threshold stays in the snapshot', async () => {
    const small = { title: 'small', body: 'y'.repeat(15_000) };
    const before = await blobKeys();
    const doc = await runToEnd(stack.url, {
      graph: {
        nodes: [jsonNode('a', small), jsonNode('b', { $ref: 'a.output.title' })],
        edges: [['a', 'b']],
      },
    });
    expect(doc.status).toBe('succeeded');
    expect(doc.nodes.a).toMatchObject({ output: small });
    expect(doc.output).toEqual({ b: 'small' });
    expect(await blobKeys()).toEqual(before);
  });

  it('from a nested graph is read by the loop over it: its exit condition and its output', async () => {
    const big = bigValue('inner report');
    const doc = await runToEnd(stack.url, {
      graph: {
        nodes: [
          {
            id: 'rounds',
            kind: 'loop',
            maxIterations: 3,
            until: { path: 'output.inner.title', equals: 'inner report' },
            body: { graph: { nodes: [jsonNode('inner', big)] } },
          },
          jsonNode('after', { $ref: 'rounds.output.last.inner.nested' }),
        ],
        edges: [['rounds', 'after']],
      },
    });
    expect(doc.status).toBe('succeeded');
    const loopOutput = { last: { inner: big }, iterations: 1, stoppedBy: 'condition' };
    expect(doc.nodes.rounds).toMatchObject({ output: stubOf(loopOutput) });
    expect(doc.output).toEqual({ after: { id: 42 } });
  });

  it('shaped like a stub is kept as a blob, so it reads back as itself', async () => {
    const lookalike = { $blob: `sha256:${'0'.repeat(64)}`, bytes: 1, preview: 'x' };
    const doc = await runToEnd(stack.url, {
      graph: {
        nodes: [jsonNode('a', lookalike), jsonNode('b', { $ref: 'a.output.$blob' })],
        edges: [['a', 'b']],
      },
    });
    expect(doc.status).toBe('succeeded');
    expect(doc.nodes.a).toMatchObject({ output: stubOf(lookalike) });
    expect(doc.output).toEqual({ b: lookalike.$blob });
    const expanded = (await getJson(`/v1/runs/${doc.runId}?expand=blobs`)).body as RunDocument;
    expect(expanded.nodes.a).toMatchObject({ output: lookalike });
  });
});

describe('a blob that is gone', () => {
  it('fails the node that reads it with a clear validation error', async () => {
    const big = bigValue();
    const posted = await postRun(stack.url, {
      graph: {
        nodes: [
          jsonNode('big', big),
          { id: 'gate', kind: 'wait', signal: 'go', timeoutSeconds: 60 },
          jsonNode('use', { title: { $ref: 'big.output.title' } }),
          // Reads only its status: not held up by the missing blob.
          jsonNode('status', { $ref: 'big.status' }),
        ],
        edges: [
          ['big', 'gate'],
          ['gate', 'status'],
          ['status', 'use'],
        ],
      },
    });
    expect(posted.status).toBe(202);
    const runId = posted.body.runId as string;
    await untilNodeStatus(stack, runId, 'gate', 'waiting');
    expect(await redis.del(blobKey(stack.prefix, DEFAULT_TENANT, hexOf(big)))).toBe(1);
    expect((await post(stack.url, `/v1/runs/${runId}/signals/go`, {})).status).toBe(202);
    const doc = await waitFor(stack.url, runId);
    expect(doc.status).toBe('failed');
    expect(doc.nodes.status).toMatchObject({ status: 'succeeded', output: 'succeeded' });
    expect(doc.nodes.use).toMatchObject({
      status: 'failed',
      error: {
        code: 'validation',
        message: `the output of "big" (blob sha256:${hexOf(big)}, ${stubOf(big).bytes} bytes) is no longer stored: it expired or was deleted`,
      },
    });
    expect(doc.error).toMatchObject({ code: 'node_failed', nodeId: 'use' });

    // Expanding leaves the stub of a blob that is gone; the blob route has nothing.
    const expanded = (await getJson(`/v1/runs/${runId}?expand=blobs`)).body as RunDocument;
    expect(expanded.nodes.big).toMatchObject({ output: stubOf(big) });
    const blob = await getJson(`/v1/blobs/sha256:${hexOf(big)}`);
    expect(blob.status).toBe(404);
    expect(blob.body).toMatchObject({ error: { code: 'blob_not_found' } });
  });
});

describe('the routes', () => {
  it('reject a malformed hash and an unknown expand', async () => {
    for (const name of ['nope', `sha256:${'A'.repeat(64)}`, `sha1:${'0'.repeat(64)}`, '0'.repeat(63)]) {
      const res = await getJson(`/v1/blobs/${name}`);
      expect(res.status).toBe(400);
      expect(res.body).toMatchObject({
        error: { code: 'invalid_request', issues: [{ path: 'params.hash' }] },
      });
    }
    expect((await getJson(`/v1/blobs/${'f'.repeat(64)}`)).status).toBe(404);
    const doc = await runToEnd(stack.url, { graph: { nodes: [jsonNode('a', 1)] } });
    const res = await getJson(`/v1/runs/${doc.runId}?expand=everything`);
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({
      error: { code: 'invalid_request', issues: [{ path: 'query.expand' }] },
    });
  });
});
