/**
 * The classic tool-calling agent as a loop body: each iteration is one model call with the whole
 * conversation so far, then the tools it asked for. The harness, not the model, ends the loop:
 * when an answer asks for no tool, or at maxIterations. Each iteration's messages are recorded,
 * so a redelivered job rebuilds the conversation instead of asking the model again.
 */
import { nowIso } from '../domain/clock.js';
import { usdFromNano } from '../cost/price-table.js';
import { isUntrustedData } from '../model/untrusted-data.js';
import { z } from 'zod';
import type { NodeBase } from '../graph/schema.js';
import type { ChatMessage } from '../model/model-client.js';
import { Thinking, thinkingOptions } from '../model/thinking.js';
import { renderPrompt, truncate } from '../model/prompt-render.js';
import { findSecretRefs, SecretName } from '../secrets/secret-ref.js';
import { isToolUnavailable } from '../tools/custom-tool.js';
import { functionNames } from '../tools/function-names.js';
import { toolCatalog } from '../tools/tool-catalog.js';
import type { ToolOutcome } from '../tools/tool.js';
import type { NodeRun } from './kind.js';
import { NodeEnded, type AgentTurn, type Iteration, type IterationRunner } from './loop-iteration.js';

/**
 * A loop body that is the classic tool-calling agent: each iteration one model call, then the
 * tools it asked for; the harness stops when the model asks for none or maxIterations is reached.
 */
export const AgentBody = z.strictObject({
  agent: z.strictObject({
    prompt: z.string().min(1).max(200_000),
    system: z.string().max(200_000).optional(),
    /**
     * Tools the agent may call; all the agent's allowed tools when omitted. At most 128, what
     * OpenAI's API takes in one request (MCP servers bring many).
     */
    tools: z.array(z.string().min(1).max(128)).max(128).optional(),
    model: z.string().min(1).max(200).optional(),
    /** How hard a reasoning model thinks, and whether its reasoning is kept (see model/thinking.ts). */
    thinking: Thinking.optional(),
    /**
     * The tenant secrets the agent's tool calls may reference (`{"$secret": "NAME"}` in the args the
     * model writes), each still only where its scope allows; none when omitted.
     */
    secrets: z.array(SecretName).max(100).optional(),
  }),
});
export type AgentBody = z.infer<typeof AgentBody>;

/**
 * Steering messages before turn `n`: the user's own as user messages `[steer] <text>`; outside
 * data (a source event, delimited by `untrustedData`) never as a user message, but as the result
 * of a `session_environment` call, the role a model reads as data.
 */
export function steeringMessages(texts: readonly string[], n: number): ChatMessage[] {
  const messages: ChatMessage[] = [];
  texts.forEach((text, i) => {
    if (!isUntrustedData(text)) {
      messages.push({ role: 'user', content: `[steer] ${text}` });
      return;
    }
    const id = `env_${n}_${i}`;
    messages.push(
      {
        role: 'assistant',
        content: null,
        tool_calls: [{ id, type: 'function', function: { name: 'session_environment', arguments: '{}' } }],
      },
      { role: 'tool', tool_call_id: id, content: text },
    );
  });
  return messages;
}

export function agentIteration(
  run: NodeRun<NodeBase>,
  body: AgentBody,
  history: readonly Iteration[],
): IterationRunner {
  const max = run.modelInputChars;
  const messages: ChatMessage[] = [];
  if (body.agent.system)
    messages.push({ role: 'system', content: renderPrompt(body.agent.system, run.scope, max) });
  messages.push({ role: 'user', content: renderPrompt(body.agent.prompt, run.scope, max) });
  for (const it of history) {
    const turn = it.turn;
    if (!turn) continue;
    messages.push(...steeringMessages(turn.steered ?? [], it.iteration));
    messages.push(turn.assistant);
    for (const r of turn.toolResults)
      messages.push({ role: 'tool', tool_call_id: r.tool_call_id, content: r.content });
  }
  // Steering messages (a session's `steer` mode) join the conversation before the next turn.
  let steered = history.reduce((n, it) => n + (it.turn?.steered?.length ?? 0), 0);
  // The body's tools (every tool when it names none), always within the agent's allowlist: a body
  // naming none is offered only what the agent may use, and an allowlist narrowed since the run was
  // checked holds too.
  const agentMay = run.allowedTools();
  const allowed = body.agent.tools
    ? new Set(body.agent.tools.filter((name) => !agentMay || agentMay.has(name)))
    : agentMay;
  const catalog = toolCatalog(run.tools, allowed);
  // Tools go by function names a model's API accepts (`mcp.a.b` as `mcp__a__b`); calls map back.
  const names = functionNames(catalog.tools.map((t) => t.name));
  const functions = catalog.tools.map((t) => ({ ...t, name: names.toFunction(t.name) }));
  const thinking = thinkingOptions(body.agent.thinking);

  return async (n, usage) => {
    const startedAt = nowIso();
    const started = performance.now();
    const steering = (await run.steering()).slice(steered);
    steered += steering.length;
    messages.push(...steeringMessages(steering, n));
    const outcome = await run.callModel(
      {
        ...(body.agent.model ? { model: body.agent.model } : {}),
        ...(thinking ? { thinking } : {}),
        messages,
        tools: functions,
      },
      usage,
    );
    if (!outcome.ok) throw new NodeEnded(outcome.error);
    const { result, costNanoUsd } = outcome;
    const assistant: ChatMessage = {
      role: 'assistant',
      content: result.text || null,
      ...(result.toolCalls.length
        ? {
            tool_calls: result.toolCalls.map((c) => ({
              id: c.id,
              type: 'function' as const,
              function: { name: c.name, arguments: c.arguments },
            })),
          }
        : {}),
    };
    const { budget } = run;
    if (budget.toolCalls !== undefined && usage.toolCalls + result.toolCalls.length > budget.toolCalls) {
      throw new NodeEnded({
        code: 'budget_exhausted',
        message: `the run used its ${budget.toolCalls} tool calls`,
        budget: 'toolCalls',
      });
    }
    // The tools of one answer run in parallel, each under the usual limits.
    const toolStarted = performance.now();
    // An agent's args come from the model: they get only the secrets the agent was granted.
    const granted = new Set(body.agent.secrets ?? []);
    const agentCall = async (
      args: unknown,
      call: (secrets: ReturnType<typeof findSecretRefs>) => Promise<ToolOutcome>,
    ): Promise<ToolOutcome> => {
      const refs = findSecretRefs(args);
      const ungranted = refs.find((r) => !granted.has(r.name));
      if (ungranted === undefined) return call(refs);
      return {
        ok: false,
        error: {
          code: 'validation',
          reason: 'secret_not_allowed',
          message: `secret "${ungranted.name}" is not granted to this agent`,
        },
      };
    };
    const toolResults = await Promise.all(
      result.toolCalls.map(async (c, i) => {
        const name = names.toTool(c.name);
        const tool = run.tools.get(name);
        let content: string;
        if (!tool || (allowed && !allowed.has(name))) {
          content = JSON.stringify({
            error: { code: 'validation', message: `tool "${c.name}" is not available` },
          });
        } else {
          let args: unknown;
          try {
            args = JSON.parse(c.arguments || '{}') as unknown;
          } catch {
            args = undefined;
          }
          // The model's arguments, as it wrote them (a client shows the call as it is made).
          await run.event('tool.start', { tool: name, callId: c.id, args: c.arguments });
          const before = args === undefined ? undefined : await run.beforeToolCall(name, args, `turn-${n}`);
          const out: ToolOutcome =
            before === undefined
              ? { ok: false, error: { code: 'validation', message: 'arguments are not JSON' } }
              : !before.ok
                ? before
                : await agentCall(before.args, (secrets) =>
                    run.callTool(tool, before.args, usage.toolTimeMs, {
                      index: `${n}.${i}`,
                      callId: c.id,
                      secrets,
                    }),
                  );
          if (before?.ok) await run.afterToolCall(name, before.args, out);
          await run.event('tool.result', {
            tool: name,
            callId: c.id,
            ok: out.ok,
            ...(out.ok ? {} : { error: out.error }),
          });
          // A custom tool no process can run (no live worker serves its queue) is a deployment
          // fault the model cannot mend: it ends the node rather than reaching the conversation.
          if (!out.ok && (out.error.code === 'aborted' || isToolUnavailable(out.error)))
            throw new NodeEnded(out.error);
          content = truncate(JSON.stringify(out.ok ? out.output : { error: out.error }), run.modelInputChars);
        }
        return { tool_call_id: c.id, name: c.name, content };
      }),
    );
    const toolTimeMs = result.toolCalls.length ? Math.round(performance.now() - toolStarted) : 0;
    const turn: AgentTurn = {
      assistant,
      toolResults,
      usage: result.usage,
      ...(costNanoUsd !== undefined ? { costUsd: usdFromNano(costNanoUsd) } : {}),
      ...(steering.length ? { steered: steering } : {}),
      ...(result.reasoning ? { reasoning: result.reasoning } : {}),
    };
    messages.push(assistant);
    for (const r of toolResults)
      messages.push({ role: 'tool', tool_call_id: r.tool_call_id, content: r.content });
    return {
      iteration: {
        iteration: n,
        status: 'succeeded',
        output: { text: result.text, toolCalls: result.toolCalls.map((c) => names.toTool(c.name)) },
        turn,
        startedAt,
        finishedAt: nowIso(),
        durationMs: Math.round(performance.now() - started),
      },
      charge: {
        toolCalls: result.toolCalls.length,
        toolTimeMs,
        promptTokens: result.usage.promptTokens,
        completionTokens: result.usage.completionTokens,
        modelCalls: result.calls,
        ...(costNanoUsd !== undefined ? { costNanoUsd } : { unpricedModelCalls: result.calls }),
      },
      final: result.toolCalls.length === 0,
    };
  };
}
