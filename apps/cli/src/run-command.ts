/**
 * `tetraloop run <graph.json>`: submit a run to the API and wait for it, optionally printing
 * progress. Sends `TETRALOOP_API_KEY` as its bearer key when set (it needs `runs:write` and
 * `runs:read`). Exit codes: 0 the run succeeded, 1 it did not, or the API refused or was unreachable.
 */
import { readFile } from 'node:fs/promises';
import type { RunDocument } from '@tetraloop/core';
import {
  ApiNotJsonError,
  ApiUnreachableError,
  apiRequest,
  apiTargetFromEnv,
  describeApiError,
  type ApiTarget,
} from './api-client.js';

export async function runGraphFile(
  file: string,
  options: { follow: boolean; target?: ApiTarget },
): Promise<number> {
  const target = options.target ?? apiTargetFromEnv();
  const parsed = JSON.parse(await readFile(file, 'utf8')) as Record<string, unknown>;
  // A file may hold a whole run request (a graph or a task) or just a graph.
  const body = 'graph' in parsed || 'task' in parsed ? parsed : { graph: parsed };
  try {
    const accepted = await apiRequest(target, 'POST', '/v1/runs', body);
    const runId = (accepted.body as { runId?: string } | null)?.runId;
    if (accepted.status !== 202 || !runId) {
      process.stderr.write(`${describeApiError(accepted, 'TETRALOOP_API_KEY')}\n`);
      return 1;
    }
    process.stderr.write(`run ${runId} accepted\n`);
    const seen = new Map<string, string>();
    for (;;) {
      // Long-poll in short slices when following, so node progress prints as it happens.
      const res = await apiRequest(
        target,
        'GET',
        `/v1/runs/${runId}/wait?timeoutMs=${options.follow ? 500 : 30_000}`,
      );
      if (res.status !== 200 && res.status !== 202) {
        process.stderr.write(`${describeApiError(res, 'TETRALOOP_API_KEY')}\n`);
        return 1;
      }
      const doc = res.body as RunDocument;
      if (options.follow) {
        for (const [id, node] of Object.entries(doc.nodes)) {
          if (seen.get(id) !== node.status) {
            seen.set(id, node.status);
            process.stderr.write(`  ${id}: ${node.status}\n`);
          }
        }
      }
      if (res.status === 200) {
        process.stdout.write(`${JSON.stringify(doc, null, 2)}\n`);
        return doc.status === 'succeeded' ? 0 : 1;
      }
    }
  } catch (err) {
    if (err instanceof ApiUnreachableError || err instanceof ApiNotJsonError) {
      process.stderr.write(`${err.message}\n`);
      return 1;
    }
    throw err;
  }
}
