/** `tetraloop run <graph.json>`: submit a run to the API and wait for it, optionally printing progress. */
import { readFile } from 'node:fs/promises';
import type { RunDocument } from '@tetraloop/core';

export async function runGraphFile(file: string, options: { follow: boolean }): Promise<number> {
  const apiUrl = process.env.TETRALOOP_API_URL ?? 'http://localhost:3000';
  const parsed = JSON.parse(await readFile(file, 'utf8')) as Record<string, unknown>;
  // A file may hold a whole run request (a graph or a task) or just a graph.
  const body = 'graph' in parsed || 'task' in parsed ? parsed : { graph: parsed };
  const accepted = await fetch(`${apiUrl}/v1/runs`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const answer = (await accepted.json()) as { runId?: string };
  if (accepted.status !== 202 || !answer.runId) {
    process.stderr.write(`${JSON.stringify(answer, null, 2)}\n`);
    return 1;
  }
  process.stderr.write(`run ${answer.runId} accepted\n`);
  const seen = new Map<string, string>();
  for (;;) {
    // Long-poll in short slices when following, so node progress prints as it happens.
    const res = await fetch(
      `${apiUrl}/v1/runs/${answer.runId}/wait?timeoutMs=${options.follow ? 500 : 30_000}`,
    );
    const doc = (await res.json()) as RunDocument;
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
}
