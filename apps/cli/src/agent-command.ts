/**
 * `tetraloop agent --message "…" [--session <key>] [--agent <agentId>] [--model <m>] [--thinking <effort>]
 * [--wait] [--json]`: talk to an agent through the API at `TETRALOOP_API_URL`. With `--session` the
 * message goes into that session's lane, as any client's message would (so it sees the session's
 * history); without, it is a one-off task run of the agent in loop mode. Either way the agent's
 * prompt is made from its workspace (skills, bootstrap files, lessons), and `--model`/`--thinking`
 * choose the model and its reasoning effort for that run. With `--wait` the command waits for the run and
 * prints the agent's reply; without, it prints the run id (or the lane's decision) at once.
 * Exit codes: 0 answered (or accepted), 1 the run did not succeed or the API said no, 2 a usage
 * error.
 */
import { parseArgs } from 'node:util';
import type { MessageAnswer, RunDocument, RunRequest, TetraloopClient } from '@tetraloop/client';
import { THINKING_EFFORTS } from '@tetraloop/core/domain';
import { replyOf } from '@tetraloop/core/sessions';
import { clientOf, describeFailure, processClientIo, type ClientIo } from './api-client.js';
import { MODEL_OPTIONS, UsageError, modelFlags, parsing, type ModelFlags } from './cli-args.js';

export const AGENT_USAGE = `usage: tetraloop agent --message <text> [--session <key>] [--agent <agentId>]
                       [--model <model>] [--thinking <effort>] [--wait] [--json]

  --message <text>    what to say (required)
  --session <key>     send it into this session's lane (it sees the session's history); without,
                      a one-off task run of the agent in loop mode
  --agent <agentId>   the agent of a one-off run (default "main")
  --model <model>     the model of this run (instead of the deployment's)
  --thinking <effort> the reasoning effort of this run: ${THINKING_EFFORTS.join(', ')}
  --wait              wait for the run and print the reply
  --json              print the API's answer (with --wait, the run document) as JSON`;

export type AgentIo = ClientIo;

const processIo = processClientIo;

/** Runs `tetraloop agent <args>`; answers the exit code. */
export async function agentCommand(args: readonly string[], io: AgentIo = processIo()): Promise<number> {
  try {
    const { values, positionals } = parsing('agent', () =>
      parseArgs({
        args: [...args],
        options: {
          message: { type: 'string', short: 'm' },
          session: { type: 'string' },
          agent: { type: 'string' },
          ...MODEL_OPTIONS,
          wait: { type: 'boolean', default: false },
          json: { type: 'boolean', default: false },
        },
        allowPositionals: true,
        strict: true,
      }),
    );
    if (positionals.length > 0) throw new UsageError(`agent takes no arguments, got '${positionals[0]}'`);
    const message = values.message?.trim();
    if (!message) throw new UsageError(`agent needs --message <text>\n\n${AGENT_USAGE}`);
    if (values.session !== undefined && values.agent !== undefined) {
      throw new UsageError('agent: --agent names the agent of a one-off run; a session has its own');
    }
    const call = modelFlags(values);
    const client = clientOf(io.target);
    const runId =
      values.session !== undefined
        ? await sendToSession(client, values.session, { text: message, ...call }, io, values.json ?? false)
        : await startTask(
            client,
            { task: message, mode: 'loop', ...(values.agent ? { agentId: values.agent } : {}), ...call },
            io,
            values.json ?? false,
            values.wait ?? false,
          );
    if (!values.wait || runId === undefined) return 0;
    return await answerOf(client, runId, io, values.json ?? false);
  } catch (err) {
    if (err instanceof UsageError) {
      io.stderr(`${err.message}\n`);
      return 2;
    }
    const said = describeFailure(err, 'TETRALOOP_API_KEY');
    if (said === undefined) throw err;
    io.stderr(`${said}\n`);
    return 1;
  }
}

/** The lane's decision; the run the message made, when it made one (a command or a duplicate does not). */
async function sendToSession(
  client: TetraloopClient,
  sessionKey: string,
  message: { text: string } & ModelFlags,
  io: AgentIo,
  json: boolean,
): Promise<string | undefined> {
  const answer: MessageAnswer = await client.sessions.send(sessionKey, message);
  const runId = 'runId' in answer && typeof answer.runId === 'string' ? answer.runId : undefined;
  if (json) io.stdout(`${JSON.stringify(answer, null, 2)}\n`);
  else io.stderr(runId ? `run ${runId} in session ${sessionKey}\n` : `${JSON.stringify(answer)}\n`);
  return runId;
}

async function startTask(
  client: TetraloopClient,
  request: RunRequest,
  io: AgentIo,
  json: boolean,
  wait: boolean,
): Promise<string> {
  const accepted = await client.submit(request);
  if (json && !wait) io.stdout(`${JSON.stringify(accepted, null, 2)}\n`);
  else io.stderr(`run ${accepted.runId} accepted\n`);
  return accepted.runId;
}

/** Waits for the run and prints what the agent said: 0 when it succeeded with a reply. */
async function answerOf(client: TetraloopClient, runId: string, io: AgentIo, json: boolean): Promise<number> {
  const doc: RunDocument = await client.wait(runId);
  if (json) {
    io.stdout(`${JSON.stringify(doc, null, 2)}\n`);
    return doc.status === 'succeeded' ? 0 : 1;
  }
  // The same reply a session's transcript gets: the agent's final answer, or the sinks' text.
  const reply = replyOf(doc, []);
  if (doc.status !== 'succeeded') {
    io.stderr(`run ${runId} ${doc.status}${doc.error ? `: ${doc.error.code}: ${doc.error.message}` : ''}\n`);
    return 1;
  }
  io.stdout(`${reply.text ?? ''}\n`);
  return 0;
}
