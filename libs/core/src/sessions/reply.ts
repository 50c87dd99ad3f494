/**
 * What a session run says back: the assistant text (the agent's final answer, or the text of the
 * graph's sink outputs) with a short summary of the tools it used, and the tool calls and results
 * as transcript entries. Pure.
 */
import { truncate } from '../model/prompt-render.js';
import type { RunDocument, RunEvent } from '../domain/run-model.js';
import { toolOf, type Graph } from '../nodes/index.js';

export interface Reply {
  /** Null when the run did not succeed or produced no text. */
  readonly text: string | null;
  /** The model's reasoning summary, when the run asked for it (`thinking.summary`) and got one. */
  readonly reasoning?: string;
  /** e.g. "http×2, json×1"; empty when no tool ran. */
  readonly toolSummary: string;
  readonly toolEntries: readonly unknown[];
}

interface Turn {
  assistant: { tool_calls?: { id: string; function: { name: string; arguments: string } }[] };
  toolResults: { tool_call_id: string; name: string; content: string }[];
}

const RESULT_CHARS = 2000;

export function replyOf(doc: RunDocument, events: readonly RunEvent[]): Reply {
  const entries: unknown[] = [];
  const used: string[] = [];
  for (const e of events) {
    const turn = e.type === 'node.iteration' ? (e.data as { turn?: Turn } | undefined)?.turn : undefined;
    if (!turn) continue;
    for (const call of turn.assistant.tool_calls ?? []) {
      used.push(call.function.name);
      entries.push({
        type: 'tool_call',
        runId: doc.runId,
        id: call.id,
        name: call.function.name,
        arguments: call.function.arguments,
      });
    }
    for (const r of turn.toolResults) {
      entries.push({
        type: 'tool_result',
        runId: doc.runId,
        id: r.tool_call_id,
        name: r.name,
        content: truncate(r.content, RESULT_CHARS),
      });
    }
  }
  // The stored graph was validated: its nodes are nodes of known kinds.
  for (const node of (doc.graph as Graph | null)?.nodes ?? []) {
    const tool = toolOf(node);
    if (tool === undefined) continue;
    const view = doc.nodes[node.id];
    if (!view || view.status === 'pending' || view.status === 'skipped' || view.status === 'cancelled')
      continue;
    used.push(tool);
    entries.push({ type: 'tool_call', runId: doc.runId, nodeId: node.id, name: tool });
    const output = 'output' in view ? view.output : undefined;
    entries.push({
      type: 'tool_result',
      runId: doc.runId,
      nodeId: node.id,
      name: tool,
      status: view.status,
      content: truncate(JSON.stringify(output ?? null), RESULT_CHARS),
    });
  }
  const counts = new Map<string, number>();
  for (const name of used) counts.set(name, (counts.get(name) ?? 0) + 1);
  const toolSummary = [...counts].map(([name, n]) => `${name}×${n}`).join(', ');
  const reasoning = doc.status === 'succeeded' ? reasoningOf(doc) : null;
  return {
    text: doc.status === 'succeeded' ? textOf(doc) : null,
    ...(reasoning ? { reasoning } : {}),
    toolSummary,
    toolEntries: entries,
  };
}

/** The reasoning of the sink outputs that carry one (`{text, reasoning}`), joined by blank lines. */
function reasoningOf(doc: RunDocument): string | null {
  const texts = Object.values(doc.output ?? {}).flatMap((o) =>
    o && typeof o === 'object' && 'reasoning' in o && typeof o.reasoning === 'string' && o.reasoning
      ? [o.reasoning]
      : [],
  );
  return texts.length > 0 ? texts.join('\n\n') : null;
}

function textOf(doc: RunDocument): string | null {
  const outputs = Object.values(doc.output ?? {});
  const texts = outputs
    .map((o) => {
      if (o && typeof o === 'object' && 'text' in o && typeof o.text === 'string')
        return (o as { text: string }).text;
      return typeof o === 'string' ? o : JSON.stringify(o);
    })
    .filter((t) => t.length > 0);
  return texts.length > 0 ? texts.join('\n\n') : null;
}
