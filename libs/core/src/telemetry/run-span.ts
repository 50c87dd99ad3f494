/**
 * A run's `invoke_agent` span (the OpenTelemetry GenAI conventions' agent span): one per run, from
 * its acceptance to its settle, the parent of every pass of its root job and every node span.
 *
 * A run lives in many jobs, in many processes, over minutes or weeks: no process holds a span open
 * for all of it, and the run's end is known only to the process that settles it. So the span's
 * context is fixed before it is recorded, from what every process already has:
 * - its span id is derived from the run id (`runSpanIds`);
 * - its trace is the trace the run was created in — the `traceparent` of the request (or job) that
 *   made it, stored with the run (`trace`) — or, for a run made outside any trace, one derived
 *   from the run id as well.
 * Node jobs carry a span of the run's trace in their data, so a node replaces its span id with
 * the run's and is the run span's child without reading anything; a root job's pass reads the
 * stored trace (a resumed run's root job was enqueued in the resume request's trace). The process
 * that settles the run records the span once, with those ids (`SpanIds.withIds`), the run's
 * acceptance time as its start and the settle as its end. A run that never settles (its data
 * deleted) leaves its spans with a parent that was never recorded.
 */
import { createHash } from 'node:crypto';
import { ROOT_CONTEXT, SpanStatusCode, propagation } from '@opentelemetry/api';
import {
  ATTR_ERROR_TYPE,
  ATTR_GEN_AI_AGENT_ID,
  ATTR_GEN_AI_AGENT_NAME,
  ATTR_GEN_AI_CONVERSATION_ID,
  ATTR_GEN_AI_OPERATION_NAME,
  ATTR_GEN_AI_PROVIDER_NAME,
  GEN_AI_OPERATION_NAME_VALUE_INVOKE_AGENT,
} from '@opentelemetry/semantic-conventions/incubating';
import { GEN_AI_PROVIDER } from './genai.js';
import { unscopeName } from '../domain/tenant.js';
import { SpanKind, startSpanWithIds, tracingOn, type TraceCarrier } from './tracing.js';

const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/** The ids of a run's span, and of its trace when the run was made outside any trace. */
export function runSpanIds(runId: string): { traceId: string; spanId: string } {
  const digest = createHash('sha256').update(`tetraloop invoke_agent ${runId}`).digest('hex');
  return { traceId: digest.slice(0, 32), spanId: digest.slice(32, 48) };
}

/**
 * The carrier of a run's span, to parent its root job's passes and its nodes: `inTrace` is any
 * span of the run's trace (a node job's carrier, the stored creation context), or nothing for a
 * run made outside any trace.
 */
export function runSpanCarrier(runId: string, inTrace: TraceCarrier | undefined): TraceCarrier {
  const ids = runSpanIds(runId);
  const parsed = inTrace ? TRACEPARENT.exec(inTrace.traceparent) : null;
  if (!parsed) return { traceparent: `00-${ids.traceId}-${ids.spanId}-01` };
  const [, version, traceId, , flags] = parsed;
  return {
    traceparent: `${version}-${traceId}-${ids.spanId}-${flags}`,
    ...(inTrace?.tracestate ? { tracestate: inTrace.tracestate } : {}),
  };
}

/** What is stored with a run for its span (the store's `traceFacts`). */
export interface RunTraceFacts {
  readonly agentId: string;
  /** As stored: tenant-scoped. */
  readonly sessionKey: string | null;
  /** When the run was accepted (ISO 8601). */
  readonly createdAt: string;
  /** The context the run was created in; null for a run made outside any trace. */
  readonly created: TraceCarrier | null;
  readonly status: string;
  readonly error: { readonly code: string } | null;
}

/** What a run's span is made from, read when it settles. */
export interface SettledRun {
  readonly runId: string;
  readonly agentId: string;
  /** The session's id (not tenant-scoped): the conversation. */
  readonly sessionId: string | null;
  /** When the run was accepted (ISO 8601): the span's start. */
  readonly createdAt: string;
  /** The context the run was created in, if any: the span's parent. */
  readonly created: TraceCarrier | null;
  readonly status: string;
  /** The run's error class, when it did not succeed. */
  readonly errorType: string | null;
}

/** Records a settled run's `invoke_agent` span, ending now; a no-op where tracing is off. */
export function recordRunSpan(run: SettledRun): void {
  const parent = run.created ? propagation.extract(ROOT_CONTEXT, run.created) : ROOT_CONTEXT;
  const own = TRACEPARENT.exec(runSpanCarrier(run.runId, run.created ?? undefined).traceparent)!;
  const started = Date.parse(run.createdAt);
  const span = startSpanWithIds(
    { traceId: own[2]!, spanId: own[3]! },
    `invoke_agent ${run.agentId}`,
    {
      // The agent runs in Tetraloop's own processes: an internal span, as the conventions ask.
      kind: SpanKind.INTERNAL,
      ...(Number.isNaN(started) ? {} : { startTime: started }),
      attributes: {
        [ATTR_GEN_AI_OPERATION_NAME]: GEN_AI_OPERATION_NAME_VALUE_INVOKE_AGENT,
        [ATTR_GEN_AI_PROVIDER_NAME]: GEN_AI_PROVIDER,
        // An agent is named by its id (`main`, or one of the configured agents).
        [ATTR_GEN_AI_AGENT_ID]: run.agentId,
        [ATTR_GEN_AI_AGENT_NAME]: run.agentId,
        ...(run.sessionId ? { [ATTR_GEN_AI_CONVERSATION_ID]: run.sessionId } : {}),
        'tetraloop.run.id': run.runId,
        'tetraloop.run.status': run.status,
      },
    },
    parent,
  );
  if (!span) return;
  if (run.errorType) {
    span.setAttribute(ATTR_ERROR_TYPE, run.errorType);
    span.setStatus({ code: SpanStatusCode.ERROR });
  }
  span.end();
}

/**
 * The parent and links of a span of the run (a pass of its root job, a node): the run's span, and
 * the span that enqueued the job (`madeBy`). Nothing where this process does not trace.
 */
export function underRunSpan(
  runId: string,
  inTrace: TraceCarrier | undefined,
  madeBy: TraceCarrier | undefined,
): { parent?: TraceCarrier; links?: TraceCarrier[] } {
  if (!tracingOn()) return {};
  return { parent: runSpanCarrier(runId, inTrace), ...(madeBy ? { links: [madeBy] } : {}) };
}

/**
 * Records the `invoke_agent` span of a run that just settled, from what is stored with it; where
 * this process does not trace, nothing is read. A failed read costs the span, never the settle.
 */
export async function recordSettledRun(
  store: { traceFacts(runId: string): Promise<RunTraceFacts | null> },
  runId: string,
): Promise<void> {
  if (!tracingOn()) return;
  const facts = await store.traceFacts(runId).catch(() => null);
  if (!facts) return;
  recordRunSpan({
    runId,
    agentId: facts.agentId,
    sessionId: facts.sessionKey === null ? null : unscopeName(facts.sessionKey).name,
    createdAt: facts.createdAt,
    created: facts.created,
    status: facts.status,
    errorType: facts.status === 'succeeded' ? null : (facts.error?.code ?? facts.status),
  });
}
