/**
 * Blobs as the harness handles them: a node's own large output is stored as a blob before its
 * snapshot (holding the stub) is written; the blobs behind the outputs a node reads are loaded
 * (one MGET) before its references are resolved, so references and prompts see the content.
 */
import { isBlobStub, type BlobStub } from '../domain/blob.js';
import type { SnapshotSizes } from '../domain/fingerprint.js';
import type { NodeSnapshot } from '../domain/run-model.js';
import type { NodeErrorData } from '../errors/node-error.js';
import { findReferences } from '../graph/references.js';
import { referenceFields, type ExecutableNode } from '../nodes/index.js';
import type { BeginNodeResult } from '../state/runs/node-state.js';
import type { ExecutorDeps } from './deps.js';

export interface BlobReads {
  /** The dependencies' snapshots, with the outputs the node reads loaded from their blobs. */
  readonly snapshots: ReadonlyMap<string, NodeSnapshot>;
  /** A blob the node reads is no longer stored: the node fails with this instead of running. */
  readonly error?: NodeErrorData;
}

/** The nodes whose `output` the node's references read. */
function outputReads(node: ExecutableNode): Set<string> {
  return new Set(
    referenceFields(node)
      .flatMap(({ value }) => findReferences(value))
      .filter((r) => r.root !== 'input' && (r.path.length === 0 || r.path[0] === 'output'))
      .map((r) => r.root),
  );
}

/**
 * The snapshots `begin` read, with each output that is a stub and that the node reads replaced by
 * its content. Only for a node that is about to run; nothing is read otherwise.
 */
export async function readBlobs(
  deps: Pick<ExecutorDeps, 'store'>,
  tenant: string,
  node: ExecutableNode,
  begin: BeginNodeResult,
): Promise<BlobReads> {
  if (begin.existing || begin.status !== 'running') return { snapshots: begin.reads };
  const stubbed = [...begin.reads].filter(([, s]) => isBlobStub(s.output));
  if (stubbed.length === 0) return { snapshots: begin.reads };
  const wanted = outputReads(node);
  const needed = stubbed.filter(([id]) => wanted.has(id)) as [string, NodeSnapshot & { output: BlobStub }][];
  if (needed.length === 0) return { snapshots: begin.reads };
  const contents = await deps.store.blobs.contents(
    tenant,
    needed.map(([, s]) => s.output),
  );
  const snapshots = new Map(begin.reads);
  for (const [id, snapshot] of needed) {
    const stub = snapshot.output;
    if (!contents.has(stub.$blob)) {
      return {
        snapshots: begin.reads,
        error: {
          code: 'validation',
          message: `the output of "${id}" (blob ${stub.$blob}, ${stub.bytes} bytes) is no longer stored: it expired or was deleted`,
        },
      };
    }
    snapshots.set(id, { ...snapshot, output: contents.get(stub.$blob) });
  }
  return { snapshots };
}

/**
 * The snapshot as it is written: an output larger than the threshold becomes a stub, its blob
 * stored first (a crash in between leaves a blob with a TTL, never a stub without its blob).
 */
export async function withOutputBlob(
  deps: Pick<ExecutorDeps, 'store' | 'blobMinBytes'>,
  plan: { readonly tenant: string; readonly timeoutSeconds: number },
  snapshot: NodeSnapshot,
  /** The values' JSON sizes when already known (`withFingerprints`). */
  sizes: SnapshotSizes = {},
): Promise<NodeSnapshot> {
  const externalize = (value: unknown, bytes: number | undefined): Promise<unknown> =>
    value === undefined
      ? Promise.resolve(undefined)
      : deps.store.blobs.externalize(plan.tenant, value, deps.blobMinBytes, plan.timeoutSeconds, bytes);
  const [input, output] = await Promise.all([
    externalize(snapshot.input, sizes.input),
    externalize(snapshot.output, sizes.output),
  ]);
  if (input === snapshot.input && output === snapshot.output) return snapshot;
  return {
    ...snapshot,
    ...(input !== undefined ? { input } : {}),
    ...(output !== undefined ? { output } : {}),
  };
}

/**
 * Raises the TTL of every blob a run's snapshots hold to what the run's own keys get, before it
 * settles (or resumes), so no blob expires before a run that references it.
 */
export function retainBlobs(
  deps: Pick<ExecutorDeps, 'store'>,
  tenant: string,
  snapshots: Iterable<NodeSnapshot>,
  timeoutSeconds: number,
): Promise<void> {
  return deps.store.blobs.retain(
    tenant,
    [...snapshots].flatMap((s) => [s.input, s.output]),
    timeoutSeconds,
  );
}
