/**
 * Tetraloop's Prometheus metrics: one `tetraloop_` prefix, base units, `_total` only on counters,
 * and labels with bounded values only (never run, node or session ids; agent and tenant ids only on
 * the cost counter, each held to {@link COST_LABEL_VALUES} values per process). One registry per process;
 * every process exposes it (`/metrics` on the API, `--metrics-port` on workers) with the default
 * process metrics, and Prometheus sums across processes.
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

export const registry = new Registry();
collectDefaultMetrics({ register: registry });

/** Buckets from 5 ms to past the 600 s run limit (the prom-client default stops at 10 s). */
const SECONDS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1200];

export const metrics = {
  configInfo: new Gauge({
    name: 'tetraloop_config_info',
    help: "1, labelled with the configuration's version tag (TETRALOOP_CONFIG_VERSION, the config file's version:).",
    labelNames: ['version'] as const,
    registers: [registry],
  }),
  runsStarted: new Counter({
    name: 'tetraloop_runs_started_total',
    help: 'Runs that started executing, by how they were given.',
    labelNames: ['kind'] as const,
    registers: [registry],
  }),
  runsFinished: new Counter({
    name: 'tetraloop_runs_finished_total',
    help: 'Runs that settled, by outcome.',
    labelNames: ['status'] as const,
    registers: [registry],
  }),
  runDuration: new Histogram({
    name: 'tetraloop_run_duration_seconds',
    help: 'From a run being accepted to it settling.',
    labelNames: ['status'] as const,
    buckets: SECONDS,
    registers: [registry],
  }),
  nodeDuration: new Histogram({
    name: 'tetraloop_node_duration_seconds',
    help: 'Duration of a node execution (one attempt), by node kind and tool.',
    labelNames: ['kind', 'tool'] as const,
    buckets: SECONDS,
    registers: [registry],
  }),
  nodeAttempts: new Counter({
    name: 'tetraloop_node_attempts_total',
    help: 'Node executions, by kind, tool and outcome (an error code, or ok).',
    labelNames: ['kind', 'tool', 'outcome'] as const,
    registers: [registry],
  }),
  triggerEvents: new Counter({
    name: 'tetraloop_events_total',
    help: 'Events sent to trigger runs (POST /v1/events, signed webhook sources), by outcome (accepted, duplicate).',
    labelNames: ['outcome'] as const,
    registers: [registry],
  }),
  triggerMatches: new Counter({
    name: 'tetraloop_trigger_matches_total',
    help: 'Events a trigger listened for, by what became of them (fired, debounced, batched, filtered, dropped: its batch was full).',
    labelNames: ['outcome'] as const,
    registers: [registry],
  }),
  triggerRuns: new Counter({
    name: 'tetraloop_trigger_runs_total',
    help: 'Runs triggers started, by mode (each, debounce, batch) and outcome (started, repeated: a redelivered firing found its run, rejected: the request no longer passes its checks).',
    labelNames: ['mode', 'outcome'] as const,
    registers: [registry],
  }),
  webhookDeliveries: new Counter({
    name: 'tetraloop_webhook_deliveries_total',
    help: 'Outbound webhook delivery attempts, by outcome (delivered, retrying, exhausted, rejected, refused, no_secret).',
    labelNames: ['outcome'] as const,
    registers: [registry],
  }),
  nodesExpired: new Counter({
    name: 'tetraloop_nodes_expired_total',
    help: 'Nodes not started before their TTL, by what they did (skip, fail, downgrade).',
    labelNames: ['onExpire'] as const,
    registers: [registry],
  }),
  nodeHandoffs: new Counter({
    name: 'tetraloop_node_handoffs_total',
    help: 'Released nodes a node job ran itself (ran), and handed-off nodes that moved to a job of their own for a retry (retry) or to wait (own_job).',
    labelNames: ['outcome'] as const,
    registers: [registry],
  }),
  nodeRetries: new Counter({
    name: 'tetraloop_node_retries_total',
    help: 'Failed attempts handed back for a retry, by error code.',
    labelNames: ['code'] as const,
    registers: [registry],
  }),
  backoffDelay: new Histogram({
    name: 'tetraloop_backoff_delay_seconds',
    help: 'Delay before a retry, by error code.',
    labelNames: ['code'] as const,
    buckets: [0.1, 0.5, 1, 2, 4, 8, 16, 30, 60],
    registers: [registry],
  }),
  flowThrottled: new Counter({
    name: 'tetraloop_flow_throttled_total',
    help: 'Calls flow control held back, by limit (the first counter they waited on).',
    labelNames: ['limit'] as const,
    registers: [registry],
  }),
  flowWait: new Histogram({
    name: 'tetraloop_flow_wait_seconds',
    help: 'How long a held-back call waited before it went, by limit.',
    labelNames: ['limit'] as const,
    buckets: SECONDS,
    registers: [registry],
  }),
  flowPenalties: new Counter({
    name: 'tetraloop_flow_penalties_total',
    help: 'Times a service answered 429 (or said a limit is used up) and its counters were cut or paused, by limit.',
    labelNames: ['limit'] as const,
    registers: [registry],
  }),
  httpRequests: new Counter({
    name: 'tetraloop_http_requests_total',
    help: 'API requests answered, by route (its name in the route table), method and status.',
    labelNames: ['route', 'method', 'status'] as const,
    registers: [registry],
  }),
  httpDuration: new Histogram({
    name: 'tetraloop_http_request_duration_seconds',
    help: 'From an API request arriving to its answer ending (event streams and waits included), by route.',
    labelNames: ['route', 'method'] as const,
    buckets: SECONDS,
    registers: [registry],
  }),
  httpErrors: new Counter({
    name: 'tetraloop_http_errors_total',
    help: 'API requests answered with an error, by route and error code (invalid_graph, body_too_large, …).',
    labelNames: ['route', 'code'] as const,
    registers: [registry],
  }),
  modelCallDuration: new Histogram({
    name: 'tetraloop_model_call_duration_seconds',
    help: 'Latency of successful model calls (node calls and planner calls), by model.',
    labelNames: ['model'] as const,
    buckets: SECONDS,
    registers: [registry],
  }),
  modelCallErrors: new Counter({
    name: 'tetraloop_model_call_errors_total',
    help: 'Model calls of nodes that failed, by model and error code.',
    labelNames: ['model', 'code'] as const,
    registers: [registry],
  }),
  agentTokens: new Counter({
    name: 'tetraloop_agent_tokens_total',
    help: 'Model tokens of node calls by agent (the first 200 agent ids a process sees; then "other") and type.',
    labelNames: ['agent', 'type'] as const,
    registers: [registry],
  }),
  runActions: new Counter({
    name: 'tetraloop_run_actions_total',
    help: 'Runs replanned, resumed and cancelled (action: replan, resume, cancel).',
    labelNames: ['action'] as const,
    registers: [registry],
  }),
  jobsStalled: new Counter({
    name: 'tetraloop_jobs_stalled_total',
    help: 'Jobs a worker found stalled (their worker died or missed its lock) and moved back to run again, by queue.',
    labelNames: ['queue'] as const,
    registers: [registry],
  }),
  jobsDeferred: new Counter({
    name: 'tetraloop_jobs_deferred_total',
    help: 'Jobs that failed because Redis was away and went back to their queue without using up an attempt, by queue.',
    labelNames: ['queue'] as const,
    registers: [registry],
  }),
  sourcePolls: new Counter({
    name: 'tetraloop_source_polls_total',
    help: 'Polls of configured sources, by source and outcome (ok, error).',
    labelNames: ['source', 'outcome'] as const,
    registers: [registry],
  }),
  lanesBusy: new Gauge({
    name: 'tetraloop_lanes_busy',
    help: 'Session lanes running a run (read by the API at each scrape).',
    registers: [registry],
  }),
  laneWaiting: new Gauge({
    name: 'tetraloop_lane_waiting_items',
    help: 'Runs and messages waiting in busy session lanes (read by the API at each scrape, up to 1,000 lanes).',
    registers: [registry],
  }),
  queueJobs: new Gauge({
    name: 'tetraloop_queue_jobs',
    help: 'Jobs in each loop queue, by state (and shard, when the run queues are sharded).',
    labelNames: ['queue', 'shard', 'state'] as const,
    registers: [registry],
  }),
  queueStalled: new Gauge({
    name: 'tetraloop_queue_stalled',
    help: '1 when a queue has had pending work and no progress for 6 consecutive checks.',
    labelNames: ['queue', 'shard'] as const,
    registers: [registry],
  }),
  redisUp: new Gauge({
    name: 'tetraloop_redis_up',
    help: '1 when the last queue check could read Redis, 0 when it could not.',
    registers: [registry],
  }),
  lessons: new Gauge({
    name: 'tetraloop_lessons',
    help: "Lessons across every agent's memory, by kind and status (read by the API at each scrape).",
    labelNames: ['kind', 'status'] as const,
    registers: [registry],
  }),
  laneWait: new Histogram({
    name: 'tetraloop_lane_wait_seconds',
    help: 'How long a session run waited in its lane before it started.',
    buckets: SECONDS,
    registers: [registry],
  }),
  scheduleFirings: new Counter({
    name: 'tetraloop_schedule_firings_total',
    help: 'Schedule firings by outcome: started, skipped_overlap, missed (catchUp none after downtime), refused.',
    labelNames: ['outcome'] as const,
    registers: [registry],
  }),
  scheduleLag: new Histogram({
    name: 'tetraloop_schedule_lag_seconds',
    help: 'From a schedule firing’s due time to its run being accepted.',
    buckets: SECONDS,
    registers: [registry],
  }),
  acceptsUnconfirmed: new Counter({
    name: 'tetraloop_accepts_unconfirmed_total',
    help: 'Accepted runs answered 503 because replicas (not_replicated) or the AOF fsync (not_persisted) did not confirm them in time.',
    labelNames: ['code'] as const,
    registers: [registry],
  }),
  laneFailures: new Counter({
    name: 'tetraloop_lane_failures_total',
    help: 'Session lanes the sweep could not move on, and freed.',
    registers: [registry],
  }),
  modelCalls: new Counter({
    name: 'tetraloop_model_calls_total',
    help: 'Model calls, by model.',
    labelNames: ['model'] as const,
    registers: [registry],
  }),
  modelTokens: new Counter({
    name: 'tetraloop_model_tokens_total',
    help: 'Model tokens, by model and type (prompt or completion).',
    labelNames: ['model', 'type'] as const,
    registers: [registry],
  }),
  modelCost: new Counter({
    name: 'tetraloop_model_cost_usd_total',
    help: 'What model calls cost in USD, priced by the price table, by model, agent and tenant (past 100 values per label in a process: other).',
    labelNames: ['model', 'agent', 'tenant'] as const,
    registers: [registry],
  }),
  modelUnpricedCalls: new Counter({
    name: 'tetraloop_model_unpriced_calls_total',
    help: 'Model calls of models without a price (not in tetraloop_model_cost_usd_total), by model.',
    labelNames: ['model'] as const,
    registers: [registry],
  }),
  planRejections: new Counter({
    name: 'tetraloop_plan_rejections_total',
    help: 'Plans that were rejected, by reason.',
    labelNames: ['reason'] as const,
    registers: [registry],
  }),
  planCache: new Counter({
    name: 'tetraloop_plan_cache_total',
    help: 'First plans looked up in the plan cache, by outcome: hit (no planner call), miss, or stale (found but no longer valid; removed).',
    labelNames: ['outcome'] as const,
    registers: [registry],
  }),
  loopSuspicions: new Counter({
    name: 'tetraloop_loop_suspicions_total',
    help: 'Nodes stopped as suspected loops.',
    registers: [registry],
  }),
  budgetExhaustions: new Counter({
    name: 'tetraloop_budget_exhaustions_total',
    help: 'Nodes that ended because the run used up a budget, by budget.',
    labelNames: ['budget'] as const,
    registers: [registry],
  }),
  eventsIngested: new Counter({
    name: 'tetraloop_events_ingested_total',
    help: 'Events that entered the sense loop, by source kind.',
    labelNames: ['kind'] as const,
    registers: [registry],
  }),
  eventsDeduplicated: new Counter({
    name: 'tetraloop_events_deduplicated_total',
    help: 'Events dropped as duplicates, by source kind.',
    labelNames: ['kind'] as const,
    registers: [registry],
  }),
  sourceEventsRefused: new Counter({
    name: 'tetraloop_source_events_refused_total',
    help: 'Source events dropped before reaching a session, by reason (invalid_session_key: a session key the API would refuse).',
    labelNames: ['reason'] as const,
    registers: [registry],
  }),
  reflections: new Counter({
    name: 'tetraloop_reflections_total',
    help: 'Reflections of an agent by the reflect loop.',
    registers: [registry],
  }),
  reflectionDuration: new Histogram({
    name: 'tetraloop_reflection_duration_seconds',
    help: 'Duration of one reflection.',
    buckets: SECONDS,
    registers: [registry],
  }),
  lessonApplications: new Counter({
    name: 'tetraloop_lesson_applications_total',
    help: 'Lessons applied, by kind: hard (a call refused), template (a call changed), soft (a plan or prompt told).',
    labelNames: ['kind'] as const,
    registers: [registry],
  }),
  longRequestsOpen: new Gauge({
    name: 'tetraloop_long_requests_open',
    help: 'Long requests the API process holds open now, by kind: events (server-sent event streams) or wait (GET /v1/runs/:id/wait).',
    labelNames: ['kind'] as const,
    registers: [registry],
  }),
  longRequestsRefused: new Counter({
    name: 'tetraloop_long_requests_refused_total',
    help: 'Long requests refused by a cap, by kind (events, wait) and scope (tenant: 429, process: 503).',
    labelNames: ['kind', 'scope'] as const,
    registers: [registry],
  }),
  mcpServerConnected: new Gauge({
    name: 'tetraloop_mcp_server_connected',
    help: "1 while this process's connection to an MCP server is up, 0 while it is down and being retried; only processes that run the tool pool connect.",
    labelNames: ['server'] as const,
    registers: [registry],
  }),
  toolWorkers: new Gauge({
    name: 'tetraloop_tool_workers',
    help: 'Live worker processes serving a custom tool on its queue, as the tool catalog in Redis has them (0: its nodes wait in the queue until one starts).',
    labelNames: ['tool', 'queue'] as const,
    registers: [registry],
  }),
  toolNotServedHere: new Counter({
    name: 'tetraloop_tool_jobs_not_served_here_total',
    help: 'Node jobs of a custom tool this worker process has no code for, put back in their queue for a process that has it.',
    labelNames: ['tool', 'queue'] as const,
    registers: [registry],
  }),
  blobBytes: new Counter({
    name: 'tetraloop_blob_bytes_total',
    help: 'Bytes of large node outputs kept as blobs: stored anew, or deduplicated (already stored).',
    labelNames: ['outcome'] as const,
    registers: [registry],
  }),
};

/** The Prometheus text exposition of this process's metrics. */
export async function metricsText(): Promise<{ contentType: string; body: string }> {
  return { contentType: registry.contentType, body: await registry.metrics() };
}

/**
 * A label value from a set callers choose (agent ids): the first `max` distinct values a process
 * sees keep their name, later ones are counted as "other", so a series count stays bounded.
 */
export function cappedLabel(seen: Set<string>, value: string, max = 200): string {
  if (seen.has(value)) return value;
  if (seen.size >= max) return 'other';
  seen.add(value);
  return value;
}
const agentsSeen = new Set<string>();

/** Distinct values a process gives each label of the cost counters; later ones are counted as `other`. */
export const COST_LABEL_VALUES = 100;

const costLabels = { model: new Set<string>(), agent: new Set<string>(), tenant: new Set<string>() };
const costLabel = (label: keyof typeof costLabels, value: string): string =>
  cappedLabel(costLabels[label], value, COST_LABEL_VALUES);

/** Counts what a model call cost (`usd`), or, when its model has no price (`usd` undefined), the call. */
export function observeModelCost(
  labels: { model: string; agent: string; tenant: string },
  usd: number | undefined,
  calls = 1,
): void {
  const model = costLabel('model', labels.model);
  if (usd === undefined) {
    metrics.modelUnpricedCalls.inc({ model }, calls);
    return;
  }
  metrics.modelCost.inc(
    { model, agent: costLabel('agent', labels.agent), tenant: costLabel('tenant', labels.tenant) },
    usd,
  );
}

/** Counts a model call's requests, tokens and latency by model (and its tokens by agent, for node calls). */
export function observeModelCall(
  result: {
    model: string;
    calls: number;
    usage: { promptTokens: number; completionTokens: number };
    latencyMs?: number;
  },
  agent?: string,
): void {
  if (result.latencyMs !== undefined)
    metrics.modelCallDuration.observe({ model: result.model }, result.latencyMs / 1000);
  if (agent !== undefined) {
    const label = cappedLabel(agentsSeen, agent);
    metrics.agentTokens.inc({ agent: label, type: 'prompt' }, result.usage.promptTokens);
    metrics.agentTokens.inc({ agent: label, type: 'completion' }, result.usage.completionTokens);
  }
  metrics.modelCalls.inc({ model: result.model }, result.calls);
  metrics.modelTokens.inc({ model: result.model, type: 'prompt' }, result.usage.promptTokens);
  metrics.modelTokens.inc({ model: result.model, type: 'completion' }, result.usage.completionTokens);
}
