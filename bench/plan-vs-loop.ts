/**
 * Plan once into a DAG vs the classic tool-calling loop vs the rolling plan window, on the same
 * scripted model (fixed latency and completion tokens per call; prompt tokens counted from what is
 * actually sent) and the same loopback tool server. Four tasks: the report task (6 fetches → analyze → report), a
 * ParallelQA-style task (4 lookups → combine), a 3-step sequential chain where each step needs
 * the model, and a two-hop comparison.
 *
 * The loop agent is scripted as a ReAct agent: one tool call per turn, then a final answer. The
 * window planner answers the task's DAG cut into windows of at most WINDOW nodes, in the graph's
 * (topological) order, observing what each window leaves by default.
 */
import { startModelServer, type ChatRequest, type ScriptedReply } from '../test/support/model-server.js';
import { startToolServer } from '../test/support/tool-server.js';
import { median, startBenchStack, timedRun } from './support/stack.js';

const MODEL_LATENCY_MS = 300;
const COMPLETION_TOKENS = 120;
const FETCH_MS = 200;
const FETCH_BYTES = 1500;
const REPEATS = 3;
/** Window mode's window size: the deployment default. */
const WINDOW = 5;

interface TaskSpec {
  readonly name: string;
  readonly description: string;
  /** The graph the planner answers with. */
  readonly graph: (tools: string) => { nodes: Record<string, unknown>[]; edges: [string, string][] };
  /** The URLs the loop agent fetches, one per turn, before its final answer. */
  readonly loopFetches: (tools: string) => string[];
}

const fetchUrl = (tools: string, node: string): string =>
  `${tools}/work?node=${node}&ms=${FETCH_MS}&bytes=${FETCH_BYTES}`;
const http = (tools: string, id: string, node = id) => ({
  id,
  kind: 'tool',
  tool: 'http',
  args: { url: fetchUrl(tools, node) },
});
const llm = (id: string, prompt: string) => ({ id, kind: 'llm', prompt });

const TASKS: TaskSpec[] = [
  {
    name: 'report',
    description: '6 independent fetches → analyze → report',
    graph: (t) => {
      const fetches = ['sales', 'competitors', 'reviews', 'pricing', 'support', 'social'];
      return {
        nodes: [
          ...fetches.map((f) => http(t, f)),
          llm(
            'analyze',
            `Analyze these sources:\n${fetches.map((f) => `${f}: {{${f}.output.body}}`).join('\n')}`,
          ),
          llm('report', 'Write the quarterly report from this analysis: {{analyze.output.text}}'),
        ],
        edges: [...fetches.map((f) => [f, 'analyze'] as [string, string]), ['analyze', 'report']],
      };
    },
    loopFetches: (t) =>
      ['sales', 'competitors', 'reviews', 'pricing', 'support', 'social'].map((f) => fetchUrl(t, f)),
  },
  {
    name: 'parallel-qa',
    description: '4 independent lookups → combine',
    graph: (t) => {
      const lookups = ['q1', 'q2', 'q3', 'q4'];
      return {
        nodes: [
          ...lookups.map((q) => http(t, q)),
          llm('combine', `Answer from: ${lookups.map((q) => `{{${q}.output.body}}`).join(' | ')}`),
        ],
        edges: lookups.map((q) => [q, 'combine'] as [string, string]),
      };
    },
    loopFetches: (t) => ['q1', 'q2', 'q3', 'q4'].map((q) => fetchUrl(t, q)),
  },
  {
    name: 'chain',
    description: '3 sequential steps, each needing the model (no parallelism possible)',
    graph: (t) => ({
      nodes: [
        http(t, 's1'),
        llm('x1', 'Which record comes next? {{s1.output.body}}'),
        {
          id: 's2',
          kind: 'tool',
          tool: 'http',
          args: { url: `${fetchUrl(t, 's2')}&after={{x1.output.text}}` },
        },
        llm('x2', 'Which record comes next? {{s2.output.body}}'),
        {
          id: 's3',
          kind: 'tool',
          tool: 'http',
          args: { url: `${fetchUrl(t, 's3')}&after={{x2.output.text}}` },
        },
        llm('answer', 'Answer from the last record: {{s3.output.body}}'),
      ],
      edges: [
        ['s1', 'x1'],
        ['x1', 's2'],
        ['s2', 'x2'],
        ['x2', 's3'],
        ['s3', 'answer'],
      ],
    }),
    loopFetches: (t) => ['s1', 's2', 's3'].map((s) => fetchUrl(t, s)),
  },
  {
    name: 'two-hop',
    description: 'two entities, each a lookup then its details → compare',
    graph: (t) => ({
      nodes: [
        http(t, 'findA'),
        http(t, 'findB'),
        {
          id: 'detailA',
          kind: 'tool',
          tool: 'http',
          args: { url: `${fetchUrl(t, 'detailA')}&of={{findA.output.body.node}}` },
        },
        {
          id: 'detailB',
          kind: 'tool',
          tool: 'http',
          args: { url: `${fetchUrl(t, 'detailB')}&of={{findB.output.body.node}}` },
        },
        llm('compare', 'Compare {{detailA.output.body}} with {{detailB.output.body}}'),
      ],
      edges: [
        ['findA', 'detailA'],
        ['findB', 'detailB'],
        ['detailA', 'compare'],
        ['detailB', 'compare'],
      ],
    }),
    loopFetches: (t) => ['findA', 'detailA', 'findB', 'detailB'].map((s) => fetchUrl(t, s)),
  },
];

export interface PlanVsLoopRow {
  task: string;
  description: string;
  mode: 'dag' | 'loop' | 'window';
  wallMs: number;
  criticalPathMs: number | null;
  modelCalls: number;
  promptTokens: number;
  completionTokens: number;
}

/** Longest path through the planned graph, weighting fetches and model calls, plus the planner call. */
function criticalPath(graph: ReturnType<TaskSpec['graph']>): number {
  const weight = (n: Record<string, unknown>): number => (n.kind === 'llm' ? MODEL_LATENCY_MS : FETCH_MS);
  const byId = new Map(graph.nodes.map((n) => [n.id as string, n]));
  const memo = new Map<string, number>();
  const finish = (id: string): number => {
    const known = memo.get(id);
    if (known !== undefined) return known;
    const parents = graph.edges.filter(([, to]) => to === id).map(([from]) => from);
    const value = weight(byId.get(id)!) + Math.max(0, ...parents.map(finish));
    memo.set(id, value);
    return value;
  };
  return MODEL_LATENCY_MS + Math.max(...[...byId.keys()].map(finish));
}

type PlannedGraph = ReturnType<TaskSpec['graph']>;

/**
 * The `index`-th window of `graph` cut into windows of `size` nodes in the graph's order: each edge
 * goes with its target's window (from a node of an earlier window it is a carried dependency).
 */
function windowOf(graph: PlannedGraph, size: number, index: number): Record<string, unknown> {
  const nodes = graph.nodes.slice(index * size, (index + 1) * size);
  const ids = new Set(nodes.map((n) => n.id as string));
  return {
    nodes,
    edges: graph.edges.filter(([, to]) => ids.has(to)),
    goalReached: (index + 1) * size >= graph.nodes.length,
  };
}

export async function runPlanVsLoop(
  log: (line: string) => void = console.log,
): Promise<{ rows: PlanVsLoopRow[]; settings: Record<string, number> }> {
  const tools = await startToolServer();
  const taskByText = new Map(TASKS.map((t) => [`Task: ${t.name}`, t]));
  const script = (request: ChatRequest): ScriptedReply => {
    const schema = (request.response_format as { json_schema?: { name?: string } } | undefined)?.json_schema
      ?.name;
    const user = request.messages.find((m) => m.role === 'user')?.content ?? '';
    if (schema === 'graph') return { content: JSON.stringify(taskByText.get(user)!.graph(tools.url)) };
    if (schema === 'window') {
      // "Task: <name>\n\nWindow <n> of …": the task's graph, window n.
      const [head = '', where = ''] = user.split('\n\n');
      const index = Number(/^Window (\d+)/.exec(where)?.[1] ?? '1') - 1;
      return { content: JSON.stringify(windowOf(taskByText.get(head)!.graph(tools.url), WINDOW, index)) };
    }
    if (request.tools) {
      // The ReAct agent: the next fetch of its task, one per turn, then the answer.
      const task = TASKS.find((t) => user === t.name)!;
      const done = request.messages.filter((m) => m.role === 'tool').length;
      const urls = task.loopFetches(tools.url);
      if (done < urls.length)
        return { content: '', toolCalls: [{ name: 'http', arguments: { url: urls[done] } }] };
      return { content: `Final answer for ${task.name}.` };
    }
    return { content: 'next' };
  };
  const model = await startModelServer({
    script,
    defaultLatencyMs: MODEL_LATENCY_MS,
    completionTokens: COMPLETION_TOKENS,
  });
  const stack = await startBenchStack({
    OPENAI_BASE_URL: model.url,
    TETRALOOP_MODEL_MAX_RETRIES: '0',
    TETRALOOP_TOOL_CONCURRENCY: '16',
    // Every run asks its planner: a cached DAG plan would make repeats free, and windows are never cached.
    TETRALOOP_PLAN_CACHE: 'off',
  });
  const rows: PlanVsLoopRow[] = [];
  try {
    for (const task of TASKS) {
      for (const mode of ['dag', 'loop', 'window'] as const) {
        const samples: {
          wallMs: number;
          modelCalls: number;
          promptTokens: number;
          completionTokens: number;
        }[] = [];
        for (let i = 0; i < REPEATS; i++) {
          const { doc, wallMs } = await timedRun(stack.url, {
            task: task.name,
            mode,
            ...(mode === 'loop' ? { maxIterations: 20 } : {}),
            ...(mode === 'window' ? { window: WINDOW } : {}),
          });
          if (doc.status !== 'succeeded')
            throw new Error(`${task.name}/${mode} ended ${doc.status}: ${JSON.stringify(doc.error)}`);
          samples.push({ wallMs, ...doc.usage });
        }
        const row: PlanVsLoopRow = {
          task: task.name,
          description: task.description,
          mode,
          wallMs: Math.round(median(samples.map((s) => s.wallMs))),
          criticalPathMs: mode === 'dag' ? criticalPath(task.graph(tools.url)) : null,
          modelCalls: median(samples.map((s) => s.modelCalls)),
          promptTokens: median(samples.map((s) => s.promptTokens)),
          completionTokens: median(samples.map((s) => s.completionTokens)),
        };
        rows.push(row);
        log(
          `  ${task.name.padEnd(12)} ${mode.padEnd(6)} ${String(row.wallMs).padStart(6)} ms  calls ${row.modelCalls}  tokens ${row.promptTokens}+${row.completionTokens}`,
        );
      }
    }
  } finally {
    await stack.close();
    await model.close();
    await tools.close();
  }
  return {
    rows,
    settings: {
      modelLatencyMs: MODEL_LATENCY_MS,
      completionTokensPerCall: COMPLETION_TOKENS,
      fetchMs: FETCH_MS,
      fetchBytes: FETCH_BYTES,
      repeats: REPEATS,
      window: WINDOW,
    },
  };
}

/** The markdown table of a result, with loop ÷ DAG and window ÷ DAG ratios. */
export function planVsLoopTable(rows: readonly PlanVsLoopRow[]): string {
  const lines = [
    '| task | mode | wall ms | critical path ms | model calls | prompt tokens | completion tokens | total tokens |',
    '|---|---|---:|---:|---:|---:|---:|---:|',
  ];
  for (const r of rows) {
    lines.push(
      `| ${r.task} | ${r.mode} | ${r.wallMs} | ${r.criticalPathMs ?? '—'} | ${r.modelCalls} | ${r.promptTokens} | ${r.completionTokens} | ${r.promptTokens + r.completionTokens} |`,
    );
  }
  lines.push(
    '',
    '| task | loop ÷ DAG wall time | loop ÷ DAG model calls | loop ÷ DAG total tokens | window ÷ DAG wall time | window ÷ DAG model calls | window ÷ DAG total tokens | DAG wall ÷ critical path |',
    '|---|---:|---:|---:|---:|---:|---:|---:|',
  );
  const ratio = (a: number, b: number): string => (a / b).toFixed(2);
  const total = (r: PlanVsLoopRow): number => r.promptTokens + r.completionTokens;
  for (const task of new Set(rows.map((r) => r.task))) {
    const dag = rows.find((r) => r.task === task && r.mode === 'dag')!;
    const loop = rows.find((r) => r.task === task && r.mode === 'loop')!;
    const window = rows.find((r) => r.task === task && r.mode === 'window');
    const windowed = window
      ? `${ratio(window.wallMs, dag.wallMs)} | ${ratio(window.modelCalls, dag.modelCalls)} | ${ratio(total(window), total(dag))}`
      : '— | — | —';
    lines.push(
      `| ${task} | ${ratio(loop.wallMs, dag.wallMs)} | ${ratio(loop.modelCalls, dag.modelCalls)} | ${ratio(
        total(loop),
        total(dag),
      )} | ${windowed} | ${ratio(dag.wallMs, dag.criticalPathMs ?? dag.wallMs)} |`,
    );
  }
  return lines.join('\n');
}
