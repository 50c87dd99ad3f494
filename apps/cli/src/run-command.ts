/**
 * `tetraloop run <graph.json>`: submit a run to the API and wait for it, optionally printing
 * progress. Sends `TETRALOOP_API_KEY` as its bearer key when set (it needs `runs:write` and
 * `runs:read`). Exit codes: 0 the run succeeded, 1 it did not, or the API refused or was unreachable.
 */
import { readFile } from 'node:fs/promises';
import type { RunDocument, RunRequest } from '@tetraloop/client';
import { apiTargetFromEnv, clientOf, describeFailure, type ApiTarget } from './api-client.js';

export async function runGraphFile(
  file: string,
  options: { follow: boolean; target?: ApiTarget },
): Promise<number> {
  const client = clientOf(options.target ?? apiTargetFromEnv());
  const parsed = JSON.parse(await readFile(file, 'utf8')) as Record<string, unknown>;
  // A file may hold a whole run request (a graph or a task) or just a graph; the API checks it.
  const body = ('graph' in parsed || 'task' in parsed ? parsed : { graph: parsed }) as RunRequest;
  const seen = new Map<string, string>();
  const progress = (doc: RunDocument): void => {
    for (const [id, node] of Object.entries(doc.nodes)) {
      if (seen.get(id) !== node.status) {
        seen.set(id, node.status);
        process.stderr.write(`  ${id}: ${node.status}\n`);
      }
    }
  };
  try {
    const { runId } = await client.submit(body);
    process.stderr.write(`run ${runId} accepted\n`);
    // Following, the API is long-polled in short slices, so node progress prints as it happens.
    const doc = await client.wait(runId, Infinity, {
      sliceMs: options.follow ? 500 : 30_000,
      ...(options.follow ? { onProgress: progress } : {}),
    });
    if (options.follow) progress(doc);
    process.stdout.write(`${JSON.stringify(doc, null, 2)}\n`);
    return doc.status === 'succeeded' ? 0 : 1;
  } catch (err) {
    const said = describeFailure(err, 'TETRALOOP_API_KEY');
    if (said === undefined) throw err;
    process.stderr.write(`${said}\n`);
    return 1;
  }
}
