import { z } from 'zod';

/** Node ids are short, URL- and key-safe names; a dot never appears, so `runId.nodeId` is unambiguous. */
export const NodeId = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'must match [A-Za-z0-9_-]{1,64}');
export type NodeId = z.infer<typeof NodeId>;

/** Kinds that later parts of the runtime add; named here so the error can say so. */
export const PLANNED_KINDS = ['llm', 'loop', 'wait', 'graph'] as const;

export const OnError = z.enum(['fail', 'continue']);
export type OnError = z.infer<typeof OnError>;

const Retries = z.number().int().min(0).max(10);

/** Per-node override of how many times a failure of each class is retried. */
export const NodeRetry = z.strictObject({
  network: Retries.optional(),
  timeout: Retries.optional(),
  rate_limited: Retries.optional(),
  server: Retries.optional(),
  auth: Retries.optional(),
  validation: Retries.optional(),
  internal: Retries.optional(),
});
export type NodeRetry = z.infer<typeof NodeRetry>;

export const ToolNode = z.strictObject({
  id: NodeId,
  kind: z.literal('tool'),
  tool: z.string().min(1).max(128),
  args: z.record(z.string(), z.unknown()).default({}),
  timeoutMs: z.number().int().positive().max(600_000).optional(),
  retry: NodeRetry.optional(),
  onError: OnError.optional(),
});
export type ToolNode = z.infer<typeof ToolNode>;

const KnownKind = z.enum(['tool', ...PLANNED_KINDS]);

export const GraphNode = z
  .object({ kind: KnownKind })
  .passthrough()
  .superRefine((node, ctx) => {
    if ((PLANNED_KINDS as readonly string[]).includes(node.kind)) {
      ctx.addIssue({
        code: 'custom',
        path: ['kind'],
        message: `kind "${node.kind}" is not supported yet; only "tool" nodes can run`,
      });
    }
  })
  .pipe(ToolNode);
export type GraphNode = ToolNode;

export const Edge = z.tuple([NodeId, NodeId]);
export type Edge = z.infer<typeof Edge>;

export const Graph = z.strictObject({
  nodes: z.array(GraphNode).min(1, 'a graph needs at least one node'),
  edges: z.array(Edge).default([]),
});
export type Graph = z.infer<typeof Graph>;
