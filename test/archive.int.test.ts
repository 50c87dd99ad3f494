/**
 * Records outlive Redis: settled runs and session transcripts appended to the archive directory
 * (gzip JSON Lines), a run whose keys are gone served from it by `GET /v1/runs/:id` to its own
 * tenant only, `tetraloop archive export` printing them back, a damaged entry taken as not there;
 * and the fingerprints at hand-offs —
 * each node's input and output, and what the planner was given — equal to the sha256 of their
 * canonical JSON (RFC 8785).
 */
import { createHash, randomUUID } from 'node:crypto';
import { appendFile, mkdtemp, readFile, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync, gzipSync } from 'node:zlib';
import { readFileSync } from 'node:fs';
import canonicalize from 'canonicalize';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { archiveCommand } from '@tetraloop/cli';
import type { ArchiveRecord } from '@tetraloop/core/archive';
import type { RunDocument } from '@tetraloop/core/domain';
import { runJobId } from '@tetraloop/core/queues';
import { runKeyList, runKeys } from '@tetraloop/core/state';
import { startModelServer, type ChatRequest, type ModelServer } from './support/model-server.js';
import { callAsTenant, followJobEvents, startStack, type JobEvents, type Stack } from './support/stack.js';

const ROOT = 'root-token-0123456789-0123456789-0123456789';
const TENANT = `arch-${randomUUID().slice(0, 8)}`;
const OTHER = `other-${randomUUID().slice(0, 8)}`;

let stack: Stack;
let model: ModelServer;
let redis: Redis;
let dir: string;
/** What the agent's model calls wait for before they answer: a test holds a session run with it. */
let held: Promise<void> = Promise.resolve();

const isPlannerCall = (r: ChatRequest): boolean =>
  (r.response_format as { json_schema?: { name?: string } } | undefined)?.json_schema?.name === 'graph';
const PLAN = {
  nodes: [{ id: 'p', kind: 'tool', tool: 'json', args: { value: { planned: true } } }],
  edges: [],
};

beforeAll(async () => {
  dir = join(await mkdtemp(join(tmpdir(), 'tetraloop-archive-')), 'archive');
  model = await startModelServer({
    script: async (r) => {
      if (isPlannerCall(r)) return { content: JSON.stringify(PLAN) };
      await held;
      return { content: `echo: ${r.messages.at(-1)?.content ?? ''}` };
    },
  });
  stack = await startStack({
    pools: ['sense', 'plan', 'tool'],
    env: {
      TETRALOOP_AUTH: 'required',
      TETRALOOP_ADMIN_TOKEN: ROOT,
      TETRALOOP_ARCHIVE_DIR: dir,
      OPENAI_BASE_URL: model.url,
      TETRALOOP_MODEL_MAX_RETRIES: '0',
      // Small enough that a node's output is stored as a blob: the archive reads it in.
      TETRALOOP_BLOB_MIN_BYTES: '1024',
    },
  });
  redis = new Redis(stack.env.REDIS_URL!);
});

afterAll(async () => {
  await stack?.close();
  await model?.close();
  redis?.disconnect();
  if (dir) await rm(join(dir, '..'), { recursive: true, force: true });
});

/** A request as the root token acting for `tenant`. */
const call = (tenant: string, method: string, path: string, body?: unknown) =>
  callAsTenant(stack.url, ROOT, tenant, method, path, body);

const sha256 = (value: unknown): string =>
  createHash('sha256')
    .update(canonicalize(value) ?? 'null')
    .digest('hex');

/**
 * Submits a run for `tenant` and answers its document once its root job — which archives it after
 * settling it — has completed.
 */
async function settledAndArchived(body: unknown, tenant = TENANT): Promise<RunDocument> {
  const jobs = await followJobEvents(stack, ['plan']);
  try {
    const posted = await call(tenant, 'POST', '/v1/runs', body);
    expect(posted.status, JSON.stringify(posted.body)).toBe(202);
    const runId = posted.body.runId as string;
    const waited = await call(tenant, 'GET', `/v1/runs/${runId}/wait?timeoutMs=20000`);
    expect(waited.status).toBe(200);
    const doc = waited.body as unknown as RunDocument;
    await rootJobDone(jobs, runJobId(runId, doc.generation));
    return doc;
  } finally {
    jobs.close();
  }
}

const rootJobDone = (jobs: JobEvents, jobId: string) =>
  jobs.next((e) => e.event === 'completed' && e.jobId === jobId, Date.now() + 20_000, `job ${jobId}`);

async function exported(args: string[]): Promise<{ code: number; records: ArchiveRecord[]; err: string }> {
  let out = '';
  let err = '';
  const code = await archiveCommand(['export', '--dir', dir, ...args], {
    env: {},
    now: Date.now(),
    stdout: (t) => void (out += t),
    stderr: (t) => void (err += t),
  });
  const records = out
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as ArchiveRecord);
  return { code, records, err };
}

const big = 'x'.repeat(4000);
const graph = {
  graph: {
    nodes: [
      { id: 'a', kind: 'tool', tool: 'json', args: { value: { z: 1, a: [true, null], text: big } } },
      { id: 'b', kind: 'tool', tool: 'json', args: { value: { from: '{{a.output.z}}', n: 2.5 } } },
    ],
    edges: [['a', 'b']],
  },
};

describe('fingerprints at hand-offs', () => {
  it('records the sha256 of each node’s resolved input and output, equal to their canonical JSON’s', async () => {
    const doc = await settledAndArchived(graph);
    expect(doc.status).toBe('succeeded');
    const expanded = await call(TENANT, 'GET', `/v1/runs/${doc.runId}?expand=blobs`);
    const nodes = (expanded.body as unknown as RunDocument).nodes as Record<
      string,
      { input?: unknown; output?: unknown; inputSha256?: string; outputSha256?: string }
    >;
    // The inputs as resolved: a's args as given (stored as a blob, it is that large), b's with the
    // reference replaced by a's value.
    const inputs = { a: graph.graph.nodes[0]!.args, b: { value: { from: '1', n: 2.5 } } };
    expect(nodes.b!.input).toEqual(inputs.b);
    for (const id of ['a', 'b'] as const) {
      expect(nodes[id]!.inputSha256).toBe(sha256(inputs[id]));
      expect(nodes[id]!.outputSha256).toBe(sha256(nodes[id]!.output));
    }
    // a's output is a blob in Redis: its fingerprint is of the value, not of the stub.
    expect((doc.nodes.a as { output?: { $blob?: string } }).output?.$blob).toMatch(/^sha256:/);
    expect((doc.nodes.a as { outputSha256?: string }).outputSha256).toBe(
      sha256({ z: 1, a: [true, null], text: big }),
    );
  });

  it('records the fingerprint of what the planner was given with each plan', async () => {
    const before = model.requests.length;
    const doc = await settledAndArchived({ task: `fingerprint ${randomUUID()}` });
    expect(doc.status).toBe('succeeded');
    const asked = model.requests.slice(before).find(isPlannerCall);
    expect(asked).toBeDefined();
    expect(doc.planning?.inputSha256).toBe(sha256(asked!.messages));
  });
});

describe('the archive', () => {
  it('serves a run whose Redis keys are gone to its tenant, and to no other; export prints it back', async () => {
    const since = new Date(Date.now() - 1000).toISOString();
    const doc = await settledAndArchived(graph);
    const { runId } = doc;
    // Another tenant never finds it, live or archived.
    expect((await call(OTHER, 'GET', `/v1/runs/${runId}`)).status).toBe(404);

    await redis.del(...runKeyList(runKeys(stack.prefix, runId)));
    expect(await redis.exists(runKeys(stack.prefix, runId).meta)).toBe(0);

    const read = await call(TENANT, 'GET', `/v1/runs/${runId}`);
    expect(read.status).toBe(200);
    const archived = read.body as unknown as RunDocument;
    expect(archived.archivedAt).toEqual(expect.any(String));
    expect(archived.status).toBe('succeeded');
    expect(archived.tenant).toBe(TENANT);
    // The blob is read in, the fingerprints kept.
    expect((archived.nodes.a as { output?: unknown }).output).toEqual({ z: 1, a: [true, null], text: big });
    expect((archived.nodes.b as { outputSha256?: string }).outputSha256).toBe(
      (doc.nodes.b as { outputSha256?: string }).outputSha256,
    );
    expect(archived.output).toEqual(doc.output);
    expect((await call(OTHER, 'GET', `/v1/runs/${runId}`)).status).toBe(404);
    expect((await call(TENANT, 'GET', `/v1/runs/${randomUUID()}`)).status).toBe(404);

    const { code, records } = await exported(['--since', since, '--kind', 'runs', '--tenant', TENANT]);
    expect(code).toBe(0);
    const record = records.find((r) => r.kind === 'run' && r.runId === runId);
    expect(record).toBeDefined();
    if (record?.kind !== 'run') throw new Error('no run record');
    expect(record.run.status).toBe('succeeded');
    expect(record.events.map((e) => e.type)).toContain('run.finished');
    expect(record.events.map((e) => e.seq)).toEqual(
      [...record.events.map((e) => e.seq)].sort((x, y) => x - y),
    );
    // Another tenant's export does not hold it.
    const others = await exported(['--since', since, '--tenant', OTHER]);
    expect(others.records.some((r) => r.kind === 'run' && r.runId === runId)).toBe(false);
  });

  it('stops giving a deleted tenant’s archived runs, by id and by export; a new tenant of the name sees only its own', async () => {
    const since = new Date(Date.now() - 1000).toISOString();
    const gone = `gone-${randomUUID().slice(0, 8)}`;
    const old = await settledAndArchived(graph, gone);
    const deleted = await fetch(`${stack.url}/v1/tenants/${gone}`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${ROOT}` },
    });
    expect(deleted.status).toBe(200);
    // Its runs are gone from Redis, and the archive no longer gives them.
    expect((await call(gone, 'GET', `/v1/runs/${old.runId}`)).status).toBe(404);
    const fresh = await settledAndArchived(graph, gone);
    await redis.del(...runKeyList(runKeys(stack.prefix, fresh.runId)));
    expect((await call(gone, 'GET', `/v1/runs/${fresh.runId}`)).status).toBe(200);
    const { records } = await exported(['--since', since, '--kind', 'runs', '--tenant', gone]);
    expect(records.map((r) => (r.kind === 'run' ? r.runId : null))).toEqual([fresh.runId]);
  });

  it('archives a session’s transcript once its run settled', async () => {
    const since = new Date(Date.now() - 1000).toISOString();
    const key = `archive-${randomUUID().slice(0, 8)}`;
    const jobs = await followJobEvents(stack, ['plan']);
    try {
      const sent = await call(TENANT, 'POST', `/v1/sessions/${key}/messages`, { text: 'hello archive' });
      expect(sent.status).toBe(202);
      const runId = sent.body.runId as string;
      const waited = await call(TENANT, 'GET', `/v1/runs/${runId}/wait?timeoutMs=20000`);
      expect((waited.body as unknown as RunDocument).status).toBe('succeeded');
      await rootJobDone(jobs, runJobId(runId, (waited.body as unknown as RunDocument).generation));
    } finally {
      jobs.close();
    }
    const { records } = await exported(['--since', since, '--kind', 'transcripts']);
    const mine = records.filter((r) => r.kind === 'transcript' && r.sessionKey === key);
    expect(mine.length).toBeGreaterThan(0);
    const lines = mine.flatMap((r) => (r.kind === 'transcript' ? r.lines : [])) as {
      role?: string;
      text?: string;
    }[];
    expect(lines).toContainEqual(expect.objectContaining({ role: 'user', text: 'hello archive' }));
    expect(lines).toContainEqual(
      expect.objectContaining({ role: 'assistant', text: expect.stringContaining('echo') }),
    );
    expect(mine.every((r) => r.tenant === TENANT)).toBe(true);
  });

  it('archives a session run cancelled before it started, by /stop', async () => {
    const since = new Date(Date.now() - 1000).toISOString();
    const key = `stop-${randomUUID().slice(0, 8)}`;
    let release = (): void => undefined;
    held = new Promise((resolve) => (release = resolve));
    try {
      const first = await call(TENANT, 'POST', `/v1/sessions/${key}/messages`, { text: 'work' });
      const queued = await call(TENANT, 'POST', `/v1/sessions/${key}/messages`, {
        text: 'more',
        mode: 'followup',
      });
      expect(queued.body).toMatchObject({ queued: true });
      const queuedRun = queued.body.runId as string;
      await call(TENANT, 'POST', `/v1/sessions/${key}/messages`, { text: '/stop' });
      const { records } = await exported(['--since', since, '--kind', 'runs']);
      const record = records.find((r) => r.kind === 'run' && r.runId === queuedRun);
      expect(record?.kind === 'run' && record.run.status).toBe('cancelled');
      expect(first.status).toBe(202);
    } finally {
      release();
      held = Promise.resolve();
    }
  });

  it('keeps its files to their owner, and each file is gzip that zcat reads whole', async () => {
    expect((await stat(dir)).mode & 0o777).toBe(0o700);
    const files = (await readdir(dir)).filter((f) => f.endsWith('.jsonl.gz'));
    expect(files.some((f) => /^runs-\d{4}-\d{2}-\d{2}\.jsonl\.gz$/.test(f))).toBe(true);
    expect(files.some((f) => /^transcripts-\d{4}-\d{2}-\d{2}\.jsonl\.gz$/.test(f))).toBe(true);
    for (const file of files) {
      expect((await stat(join(dir, file))).mode & 0o777).toBe(0o600);
      const text = gunzipSync(readFileSync(join(dir, file))).toString('utf8');
      for (const line of text.split('\n').filter((l) => l !== ''))
        expect(() => JSON.parse(line) as unknown).not.toThrow();
    }
  });

  it('refuses an export without --since, or with a bad time, naming the flag', async () => {
    expect((await exported([])).code).toBe(2);
    const bad = await exported(['--since', 'yesterday']);
    expect(bad.code).toBe(2);
    expect(bad.err).toContain('--since');
  });
});

describe('a damaged archive', () => {
  it('answers 404 run_not_found for a run whose entry is corrupt; export skips corrupt lines and says how many', async () => {
    const since = new Date(Date.now() - 1000).toISOString();
    const { runId } = await settledAndArchived(graph);
    await redis.del(...runKeyList(runKeys(stack.prefix, runId)));
    expect((await call(TENANT, 'GET', `/v1/runs/${runId}`)).status).toBe(200);

    const index = join(dir, 'index', 'runs', runId.slice(0, 2), runId);
    const entry = await readFile(index, 'utf8');
    const dayFile = join(dir, `runs-${(JSON.parse(entry) as { day: string }).day}.jsonl.gz`);
    const day = await readFile(dayFile);
    try {
      // An index entry cut short.
      await writeFile(index, entry.slice(0, 10));
      const cut = await call(TENANT, 'GET', `/v1/runs/${runId}`);
      expect(cut.status).toBe(404);
      expect(cut.body).toMatchObject({ error: { code: 'run_not_found' } });
      await writeFile(index, entry);

      // A day's file with a line that is no record, and a member cut by a crash mid-append.
      await appendFile(dayFile, gzipSync('{"kind":"run","runId":\n'));
      const member = gzipSync(`${JSON.stringify({ kind: 'run', runId: randomUUID() })}\n`);
      await appendFile(dayFile, member.subarray(0, member.length >> 1));
      const read = await call(TENANT, 'GET', `/v1/runs/${runId}`);
      expect(read.status).toBe(200);
      const { code, records, err } = await exported(['--since', since, '--kind', 'runs', '--tenant', TENANT]);
      expect(code).toBe(0);
      expect(records.map((r) => (r.kind === 'run' ? r.runId : null))).toContain(runId);
      expect(err).toBe('archive export: skipped 2 corrupt or unreadable entries\n');

      // Nor is a run whose day's file is no longer gzip.
      await writeFile(dayFile, 'overwritten');
      expect((await call(TENANT, 'GET', `/v1/runs/${runId}`)).status).toBe(404);
    } finally {
      await writeFile(index, entry);
      await writeFile(dayFile, day);
    }
  });
});
