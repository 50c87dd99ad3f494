/**
 * Typed hooks. Observing hooks run in parallel; modifying hooks run one at a time, highest
 * priority first, each seeing what the previous one made. Every hook has a timeout; a hook that
 * throws or times out is logged and skipped — it never breaks the run or the other hooks.
 */
import type { Logger } from 'pino';
import type { NodeErrorData } from '../errors/node-error.js';
import { capHeadTail, type WorkspaceFile } from '../workspace/workspace.js';

export interface ToolCallContext {
  readonly runId: string;
  readonly nodeId: string;
  readonly tool: string;
  readonly args: unknown;
  readonly sessionKey?: string;
}

/** Hooks that may change what happens, and what each may answer. */
export interface ModifyingHooks {
  /**
   * The agent's bootstrap files (AGENTS.md, SOUL.md, …) before a prompt is assembled from them: a
   * session run's system prompt, or a planner's prompt (`runId` then, no `sessionKey`). May answer
   * the files to use instead (add, drop, rewrite); the next hook sees them.
   */
  'agent:bootstrap': {
    ctx: { agentId: string; files: readonly WorkspaceFile[]; runId?: string; sessionKey?: string };
    result: { files?: readonly WorkspaceFile[] };
  };
  /** May add context for the agent. */
  before_agent_start: {
    ctx: { runId: string; agentId: string; task: string; sessionKey?: string };
    result: { context?: string };
  };
  /** May add context to the system prompt. */
  before_prompt_build: { ctx: { agentId: string; sessionKey?: string }; result: { context?: string } };
  /** May rewrite the args, block the call with a reason, or require approval (a wait for a signal). */
  before_tool_call: {
    ctx: ToolCallContext;
    result: { args?: unknown; block?: string; requireApproval?: string };
  };
  /** May rewrite the reply or cancel it. */
  message_sending: {
    ctx: { sessionKey: string; runId: string; text: string };
    result: { text?: string; cancel?: boolean };
  };
}

/** Hooks that only watch. */
export interface ObservingHooks {
  after_tool_call: ToolCallContext & { ok: boolean; output?: unknown; error?: unknown };
  message_received: { sessionKey: string; text: string; eventId?: string };
  /** Every run, once, when it has settled (a session run: after its reply is written). */
  agent_end: { runId: string; status: string; agentId?: string; sessionKey?: string };
  session_start: { sessionKey: string; contextId: number };
  session_end: { sessionKey: string; contextId: number };
  'command:new': { sessionKey: string };
  'command:reset': { sessionKey: string };
  'command:stop': { sessionKey: string; cancelled: string[] };
  /** `mode` null: back to the deployment's default. */
  'command:queue': { sessionKey: string; mode: string | null };
}

export type ModifyingHookName = keyof ModifyingHooks;
export type ObservingHookName = keyof ObservingHooks;
export type HookName = ModifyingHookName | ObservingHookName;

type ModifyingHandler<N extends ModifyingHookName> = (
  ctx: ModifyingHooks[N]['ctx'],
) => ModifyingHooks[N]['result'] | void | Promise<ModifyingHooks[N]['result'] | void>;
type ObservingHandler<N extends ObservingHookName> = (ctx: ObservingHooks[N]) => void | Promise<void>;

export interface HookOptions {
  /** Modifying hooks run highest first. @defaultValue 0 */
  readonly priority?: number;
  /** @defaultValue 5000 */
  readonly timeoutMs?: number;
  /** Shown in logs. */
  readonly name?: string;
}

interface Registered {
  readonly handler: (ctx: never) => unknown;
  readonly priority: number;
  readonly timeoutMs: number;
  readonly name: string;
}

const MODIFYING = new Set<HookName>([
  'agent:bootstrap',
  'before_agent_start',
  'before_prompt_build',
  'before_tool_call',
  'message_sending',
]);

class HookTimeout extends Error {}

/**
 * Renews credentials before an `auth` failure of a model or tool call is retried (once). It may
 * answer a new API key for the worker's model client (`modelApiKey`), used from then on.
 */
export type CredentialRefresh = (context: {
  runId: string;
  nodeId: string;
  tool: string;
  error: NodeErrorData;
}) => Promise<void | { modelApiKey?: string }> | void | { modelApiKey?: string };

/**
 * The files an `agent:bootstrap` hook answered, kept to what a prompt can hold: entries with a
 * string `name` and `content`, each capped like a workspace file. Pure.
 */
export function bootstrapFilesOf(files: unknown, maxChars: number): WorkspaceFile[] | undefined {
  if (!Array.isArray(files)) return undefined;
  return files.flatMap((f: unknown) => {
    const { name, content } = (f ?? {}) as { name?: unknown; content?: unknown };
    return typeof name === 'string' && typeof content === 'string'
      ? [{ name: name.slice(0, 200), content: capHeadTail(content, maxChars) }]
      : [];
  });
}

export class HookRegistry {
  private readonly hooks = new Map<HookName, Registered[]>();
  private readonly refreshers: { name: string; refresh: CredentialRefresh }[] = [];

  constructor(private readonly logger?: Logger) {}

  /** Adds a credential refresh (a plugin's `refreshCredentials`); they run in registration order. */
  onRefreshCredentials(
    refresh: CredentialRefresh,
    name = `refreshCredentials#${this.refreshers.length + 1}`,
  ): void {
    this.refreshers.push({ name, refresh });
  }

  /**
   * The registered credential refreshes as one: each runs in turn; the last `modelApiKey` answered
   * wins. A refresh that throws fails the whole (the call is then not retried). Undefined when none
   * is registered: `auth` failures are then not retried.
   */
  credentialRefresh():
    ((context: Parameters<CredentialRefresh>[0]) => Promise<{ modelApiKey?: string }>) | undefined {
    if (this.refreshers.length === 0) return undefined;
    return async (context) => {
      let modelApiKey: string | undefined;
      for (const { name, refresh } of this.refreshers) {
        const answer = await refresh(context);
        if (answer && typeof answer.modelApiKey === 'string' && answer.modelApiKey !== '') {
          modelApiKey = answer.modelApiKey;
        }
        this.logger?.info(
          { refresh: name, runId: context.runId, tool: context.tool },
          'credentials refreshed',
        );
      }
      return modelApiKey === undefined ? {} : { modelApiKey };
    };
  }

  on<N extends ModifyingHookName>(name: N, handler: ModifyingHandler<N>, options?: HookOptions): void;
  on<N extends ObservingHookName>(name: N, handler: ObservingHandler<N>, options?: HookOptions): void;
  on(name: HookName, handler: (ctx: never) => unknown, options: HookOptions = {}): void {
    const list = this.hooks.get(name) ?? [];
    list.push({
      handler,
      priority: options.priority ?? 0,
      timeoutMs: options.timeoutMs ?? 5000,
      name: options.name ?? `${name}#${list.length + 1}`,
    });
    // Stable sort: equal priorities keep registration order.
    list.sort((a, b) => b.priority - a.priority);
    this.hooks.set(name, list);
  }

  has(name: HookName): boolean {
    return (this.hooks.get(name)?.length ?? 0) > 0;
  }

  /** Runs observing hooks in parallel; resolves when all have finished, failed or timed out. */
  async emit<N extends ObservingHookName>(name: N, ctx: ObservingHooks[N]): Promise<void> {
    await Promise.all((this.hooks.get(name) ?? []).map((h) => this.call(name, h, ctx)));
  }

  /**
   * Runs modifying hooks one by one. `merge` folds each answer into the context the next hook
   * sees; `stop` ends the chain early (a block, a cancel). Returns the merged answers.
   */
  async run<N extends ModifyingHookName>(
    name: N,
    ctx: ModifyingHooks[N]['ctx'],
    merge: (ctx: ModifyingHooks[N]['ctx'], result: ModifyingHooks[N]['result']) => ModifyingHooks[N]['ctx'],
    stop: (result: ModifyingHooks[N]['result']) => boolean = () => false,
  ): Promise<{ ctx: ModifyingHooks[N]['ctx']; results: ModifyingHooks[N]['result'][] }> {
    if (!MODIFYING.has(name)) throw new Error(`${name} is not a modifying hook`);
    const results: ModifyingHooks[N]['result'][] = [];
    let current = ctx;
    for (const h of this.hooks.get(name) ?? []) {
      const result = (await this.call(name, h, current)) as ModifyingHooks[N]['result'] | undefined;
      if (!result) continue;
      results.push(result);
      current = merge(current, result);
      if (stop(result)) break;
    }
    return { ctx: current, results };
  }

  private async call(name: HookName, hook: Registered, ctx: unknown): Promise<unknown> {
    let timer: NodeJS.Timeout | undefined;
    try {
      return await Promise.race([
        Promise.resolve().then(() => hook.handler(ctx as never)),
        new Promise((_, reject) => {
          timer = setTimeout(
            () => reject(new HookTimeout(`timed out after ${hook.timeoutMs} ms`)),
            hook.timeoutMs,
          );
        }),
      ]);
    } catch (err) {
      this.logger?.warn(
        { hook: hook.name, event: name, err: err instanceof Error ? err.message : String(err) },
        'hook failed; skipped',
      );
      return undefined;
    } finally {
      clearTimeout(timer);
    }
  }
}
