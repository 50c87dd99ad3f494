/**
 * A whole Tetraloop whose planner is a scripted OpenAI-compatible server, beside a loopback tool
 * server: the setup the planner suites share, so each says only its settings and its plans.
 */
import {
  scriptedModelEnv,
  startModelServer,
  type ChatRequest,
  type ModelServer,
  type ScriptedReply,
} from './model-server.js';
import { startStack, type Stack } from './stack.js';
import { startToolServer, type ToolServer } from './tool-server.js';

/** The structured-output schema a planner call asks for: `graph` in task runs, `window` in window mode. */
export type PlannerSchema = 'graph' | 'window';

/** Answers one planner call; `index` counts the planner calls since it was set. */
export type Planner = (request: ChatRequest, index: number) => ScriptedReply;
/** Answers a model call that is not the planner's (a model or agent node). */
export type OtherModelCall = (request: ChatRequest) => ScriptedReply | Promise<ScriptedReply>;

export interface PlannerStackOptions {
  /** The schemas whose calls the planner script answers; every other call goes to `setOther`'s. */
  schemas: readonly PlannerSchema[];
  /** Settings beyond {@link scriptedModelEnv}'s. */
  env?: Record<string, string>;
}

export interface PlannerStack {
  readonly stack: Stack;
  readonly model: ModelServer;
  readonly server: ToolServer;
  /** Whether a request is a planner call (it asks for one of the stack's schemas). */
  isPlannerCall(request: ChatRequest): boolean;
  /** Answers the planner calls from now on with `planner`, counting them from 0 again. */
  setPlanner(planner: Planner): void;
  /** Answers the n-th planner call from now on with `answers[n]` (the last repeats), see {@link planReply}. */
  plan(...answers: unknown[]): void;
  /** Answers the other model calls from now on. @defaultValue `{ content: 'ok' }` */
  setOther(other: OtherModelCall): void;
  /** The planner calls the model received after its first `before` requests. */
  plannerRequests(before: number): ChatRequest[];
  close(): Promise<void>;
}

/** A planner's answer: `answer` as JSON, with a fixed usage a test can add up. */
export const planReply = (answer: unknown): ScriptedReply => ({
  content: JSON.stringify(answer),
  usage: { promptTokens: 100, completionTokens: 50 },
});

/** The name of the JSON schema a model request asks its answer in, if any. */
const schemaOf = (request: ChatRequest): string | undefined =>
  (request.response_format as { json_schema?: { name?: string } } | undefined)?.json_schema?.name;

/** Starts the tool server, the scripted model and a stack planning through it (closed in that order's reverse). */
export async function startPlannerStack(options: PlannerStackOptions): Promise<PlannerStack> {
  const isPlannerCall = (request: ChatRequest): boolean =>
    options.schemas.some((schema) => schema === schemaOf(request));
  let planner: Planner = () => ({ content: '{}' });
  let plannerCalls = 0;
  let other: OtherModelCall = () => ({ content: 'ok' });
  const server = await startToolServer();
  const model = await startModelServer({
    script: (request) => (isPlannerCall(request) ? planner(request, plannerCalls++) : other(request)),
  });
  const stack = await startStack({
    env: { ...scriptedModelEnv(model), ...options.env },
  }).catch(async (error: unknown) => {
    await model.close();
    await server.close();
    throw error;
  });
  const setPlanner = (next: Planner): void => {
    plannerCalls = 0;
    planner = next;
  };
  return {
    stack,
    model,
    server,
    isPlannerCall,
    setPlanner,
    plan: (...answers) =>
      setPlanner((_request, index) => planReply(answers[Math.min(index, answers.length - 1)])),
    setOther: (next) => {
      other = next;
    },
    plannerRequests: (before) => model.requests.slice(before).filter(isPlannerCall),
    async close() {
      await stack.close();
      await model.close();
      await server.close();
    },
  };
}
