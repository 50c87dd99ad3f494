/** In-process runs of the `tetraloop` client commands, with what they print kept for the test to read. */
import type { ClientIo } from '@tetraloop/cli';

/** A client command's io against the stack at `url`; `out` and `err` keep every piece it printed. */
export interface RecordedClientIo extends ClientIo {
  readonly out: string[];
  readonly err: string[];
}

/** The io the agent-command suites hand `agentCommand`, so each reads its output without a child process. */
export function recordedClientIo(url: string): RecordedClientIo {
  const out: string[] = [];
  const err: string[] = [];
  return {
    target: { url },
    stdout: (text) => void out.push(text),
    stderr: (text) => void err.push(text),
    out,
    err,
  };
}
