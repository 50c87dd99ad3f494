/**
 * What the details panel shows of a node besides its result: its definition in the plan (kind,
 * tool) and the input its call was made with, as the run recorded it on the node's snapshot
 * (`input`): a tool's args after references and hooks, secrets as their `{"$secret"}` references;
 * an llm node's rendered prompts; a blob stub when large. The console shows what ran and resolves
 * nothing itself. A node has no recorded input until its snapshot is written, when it made no call
 * that records one (a wait, a loop, a nested graph) or failed before its call, and in runs from
 * before Tetraloop recorded inputs.
 */
import type { RunDocument } from '@tetraloop/client';

type Json = unknown;

interface PlanGraph {
  readonly nodes: readonly { readonly id: string; readonly graph?: PlanGraph }[];
}

/** The plan's definition of a node, nested ones (`parent/child`) included. */
export function definitionOf(doc: RunDocument, nodeId: string): Record<string, Json> | undefined {
  let graph = doc.graph as PlanGraph | null;
  const parts = nodeId.split('/');
  for (const [i, part] of parts.entries()) {
    const node = graph?.nodes.find((n) => n.id === part);
    if (!node) return undefined;
    if (i === parts.length - 1) return node;
    graph = node.graph ?? null;
  }
  return undefined;
}

/** The fields of a node view this module reads. */
export interface InputFields {
  readonly status: string;
  readonly input?: unknown;
  readonly attempts?: readonly unknown[];
}

/** The recorded input, or why there is none. */
export type NodeInput =
  { readonly recorded: true; readonly value: Json } | { readonly recorded: false; readonly why: string };

/** Statuses of a node whose snapshot is written: only a snapshot carries the input. */
const FINAL = new Set(['succeeded', 'failed', 'skipped', 'cancelled']);

/** The input the node's call was made with, as its snapshot recorded it. */
export function recordedInput(node: InputFields | undefined): NodeInput {
  if (node?.input !== undefined) return { recorded: true, value: node.input };
  if (!node || !FINAL.has(node.status)) {
    return { recorded: false, why: 'Not recorded yet: a node’s input is recorded when it finishes.' };
  }
  if (!node.attempts?.length) return { recorded: false, why: 'Not recorded: the node did not run.' };
  return {
    recorded: false,
    why:
      'Not recorded: the node made no call that records one (a wait, a loop, a nested graph, or a ' +
      'call refused before it was made), or it ran before Tetraloop recorded inputs.',
  };
}
