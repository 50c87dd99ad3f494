/**
 * The named schemas of the OpenAPI document (`components.schemas`): the zod schemas the handlers
 * answer with (converted as their output) and the bodies they validate (converted as their input,
 * where defaults make fields optional). A schema used inside another named one becomes a `$ref`.
 */
import {
  AttemptRecord,
  DocumentGraph,
  MapProgress,
  NodeView,
  PlanningRecord,
  RunDocument,
  RunEvent,
  SkillRefusal,
  SkillsRecord,
  RunListing,
  RunUsage,
  SignalDecision,
  WaitRecord,
  DeliveryAttempt,
  EventRequest,
  RunWebhookView,
  WebhookSubscription,
  WebhookSubscriptionRequest,
} from '@tetraloop/core/domain';
import { NodeErrorData, RunError } from '@tetraloop/core/errors';
import { LimitDefinition, LimitsDocument } from '@tetraloop/core/flow';
import { RunExplain, NodeExplain, MapExplain } from '@tetraloop/core/insight';
import { Lesson, RunSummary } from '@tetraloop/core/memory';
import { GraphBody, SubgraphNode, SubmittedGraph } from '@tetraloop/core/nodes';
import { RunRequest } from '@tetraloop/core/runs';
import { InboundEvent, SourceStatus } from '@tetraloop/core/sessions';
import { ScheduleRequest, SchedulePatch, ScheduleState } from '@tetraloop/core/schedules';
import {
  ApiKeyRecord,
  CostTotal,
  CounterState,
  DailyCost,
  ReflectionState,
  SecretEntry,
  ServiceStats,
  SessionListing,
  SessionView,
} from '@tetraloop/core/state';
import { TriggerRequest } from '@tetraloop/core/triggers';
import { z } from 'zod';
import {
  AgentLessons,
  AgentMemory,
  ApiError,
  ApiIssue,
  EventAccepted,
  EventsTruncated,
  FeedbackAccepted,
  KeyCreated,
  KeyList,
  Liveness,
  LimitsView,
  MessageAnswer,
  Readiness,
  ReflectAccepted,
  RerunAccepted,
  RunAccepted,
  RunPage,
  RunCancelled,
  ScheduleList,
  ScheduleView,
  RunResumed,
  SecretList,
  SessionPage,
  SignalDelivered,
  SignalRepeated,
  SourceEventAccepted,
  SourceList,
  TenantDeleted,
  ToolList,
  TranscriptEntry,
  TriggerList,
  TriggerView,
  TranscriptHeader,
  WebhookCreated,
  WebhookDeliveries,
  WebhookList,
  WebhookSecret,
} from '../answers.js';
import { AguiRunInput } from '../agui/agui-input.js';
import { McpMessage } from '../mcp/mcp-messages.js';
import {
  A2ARequest,
  FeedbackBody,
  KeyBody,
  LessonPatch,
  LimitsBody,
  LimitsList,
  MessageBody,
  RerunBody,
  SecretBody,
  SignalPayload,
} from '../requests.js';
import { LANGGRAPH_ANSWERS, LANGGRAPH_REQUESTS } from './langgraph-operations.js';

/** What the API answers with, by component name. */
export const ANSWER_SCHEMAS = {
  ApiError,
  ApiIssue,
  RunAccepted,
  RerunAccepted,
  RunCancelled,
  RunResumed,
  SignalDelivered,
  SignalRepeated,
  FeedbackAccepted,
  RunPage,
  RunListing,
  RunExplain,
  NodeExplain,
  MapExplain,
  RunDocument,
  DocumentGraph,
  NodeView,
  MapProgress,
  AttemptRecord,
  WaitRecord,
  SignalDecision,
  NodeError: NodeErrorData,
  RunError,
  PlanningRecord,
  SkillsRecord,
  SkillRefusal,
  RunUsage,
  RunEvent,
  EventsTruncated,
  MessageAnswer,
  SessionPage,
  SessionListing,
  SessionView,
  TranscriptHeader,
  TranscriptEntry,
  SourceList,
  SourceStatus,
  SourceEventAccepted,
  ReflectAccepted,
  AgentLessons,
  Lesson,
  AgentMemory,
  RunSummary,
  ServiceStats,
  ReflectionState,
  SecretList,
  SecretEntry,
  ToolList,
  RunWebhook: RunWebhookView,
  WebhookSubscription,
  WebhookCreated,
  WebhookList,
  WebhookDeliveries,
  DeliveryAttempt,
  WebhookSecret,
  ScheduleView,
  ScheduleList,
  ScheduleState,
  EventAccepted,
  Trigger: TriggerView,
  TriggerList,
  KeyCreated,
  KeyList,
  ApiKeyRecord,
  TenantDeleted,
  LimitsView,
  LimitDefinition,
  CounterState,
  DailyCost,
  CostTotal,
  Liveness,
  Readiness,
  ...LANGGRAPH_ANSWERS,
} as const satisfies Record<string, z.ZodType>;

/** What the API reads from request bodies, by component name. */
export const REQUEST_SCHEMAS = {
  RunRequest,
  Graph: SubmittedGraph,
  MessageBody,
  AguiRunInput,
  SourceEvent: InboundEvent,
  FeedbackBody,
  LessonPatch,
  SecretBody,
  WebhookBody: WebhookSubscriptionRequest,
  ScheduleBody: ScheduleRequest,
  SchedulePatch,
  EventBody: EventRequest,
  TriggerBody: TriggerRequest,
  KeyBody,
  LimitsDocument,
  LimitsList,
  LimitsBody,
  RerunBody,
  SignalPayload,
  McpMessage,
  A2ARequest,
  ...LANGGRAPH_REQUESTS,
} as const satisfies Record<string, z.ZodType>;

/**
 * Schemas the routes take as any JSON and validate apart (a graph is checked node by node, so
 * each problem gets its path), shown in the document as the component that describes them: a run
 * request's graph, and the nested graphs of `graph` nodes and loop bodies (recursively).
 */
export const SHOWN_AS: ReadonlyMap<z.core.$ZodType, keyof typeof REQUEST_SCHEMAS> = new Map([
  [RunRequest.shape.graph.unwrap(), 'Graph'],
  [SubgraphNode.shape.graph, 'Graph'],
  [GraphBody.shape.graph, 'Graph'],
]);

export const componentRef = (name: string): { $ref: string } => ({ $ref: `#/components/schemas/${name}` });

/** A registry naming each schema of `schemas`, for `z.toJSONSchema`. */
export function registryOf(schemas: Record<string, z.ZodType>): z.core.$ZodRegistry<{ id: string }> {
  const registry = z.registry<{ id: string }>();
  for (const [id, schema] of Object.entries(schemas)) registry.add(schema, { id });
  return registry;
}
