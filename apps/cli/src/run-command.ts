/**
 * `tetraloop run <graph.json>`: submit a run to the API and wait for it. With `--follow` it shows
 * live progress on stderr from the run's event stream — a line per node with its status and elapsed
 * time, redrawn in place on a terminal, a line per change otherwise. Sends `TETRALOOP_API_KEY` as
 * its bearer key when set (it needs `runs:write` and `runs:read`). Prints the final run document on
 * stdout. Exit codes: 0 the run succeeded, 1 it did not, or the API refused or was unreachable.
 */
import { readFile } from 'node:fs/promises';
import type { RunDocument } from '@tetraloop/core';
import {
  ApiNotJsonError,
  ApiRefusedError,
  ApiUnreachableError,
  apiTargetFromEnv,
  describeApiError,
  getRun,
  runEvents,
  submitRun,
  waitForRun,
  type ApiTarget,
} from './api-client.js';
import { RunProgress } from './run-progress.js';

/** Where a run command writes, and whether stderr is a terminal (progress is redrawn in place). */
export interface RunIo {
  readonly stdout: (text: string) => void;
  readonly stderr: (text: string) => void;
  readonly tty: boolean;
  /** Terminal rows, to keep a redrawn view within the screen. */
  readonly rows?: number;
}

const processIo = (): RunIo => ({
  stdout: (text) => void process.stdout.write(text),
  stderr: (text) => void process.stderr.write(text),
  tty: process.stderr.isTTY === true,
  ...(process.stderr.rows ? { rows: process.stderr.rows } : {}),
});

/** How often a terminal view is redrawn for the elapsed times to move. */
const REDRAW_MS = 250;
/** Times a broken event stream is opened again (from the last event seen) before giving up. */
const RECONNECTS = 5;

export async function runGraphFile(
  file: string,
  options: { follow: boolean; target?: ApiTarget; io?: RunIo },
): Promise<number> {
  const target = options.target ?? apiTargetFromEnv();
  const io = options.io ?? processIo();
  const parsed = JSON.parse(await readFile(file, 'utf8')) as Record<string, unknown>;
  // A file may hold a whole run request (a graph or a task) or just a graph.
  const body = 'graph' in parsed || 'task' in parsed ? parsed : { graph: parsed };
  try {
    const accepted = await submitRun(target, body);
    const runId = (accepted.body as { runId?: string } | null)?.runId;
    if (accepted.status !== 202 || !runId) {
      io.stderr(`${describeApiError(accepted, 'TETRALOOP_API_KEY')}\n`);
      return 1;
    }
    io.stderr(`run ${runId} accepted\n`);
    if (options.follow) await follow(target, runId, io);
    for (;;) {
      const res = await waitForRun(target, runId, 30_000);
      if (res.status !== 200 && res.status !== 202) {
        io.stderr(`${describeApiError(res, 'TETRALOOP_API_KEY')}\n`);
        return 1;
      }
      if (res.status === 200) {
        const doc = res.body as RunDocument;
        io.stdout(`${JSON.stringify(doc, null, 2)}\n`);
        return doc.status === 'succeeded' ? 0 : 1;
      }
    }
  } catch (err) {
    if (err instanceof ApiRefusedError) {
      io.stderr(`${describeApiError(err.answer, 'TETRALOOP_API_KEY')}\n`);
      return 1;
    }
    if (err instanceof ApiUnreachableError || err instanceof ApiNotJsonError) {
      io.stderr(`${err.message}\n`);
      return 1;
    }
    throw err;
  }
}

/**
 * Shows the run's progress until its event stream closes after the run finished. A stream that
 * breaks, or closes before that (an API process shutting down), is opened again after the last
 * event seen.
 */
async function follow(target: ApiTarget, runId: string, io: RunIo): Promise<void> {
  const progress = new RunProgress(runId);
  const seed = async (): Promise<void> => {
    const doc = await getRun(target, runId);
    if (doc.status === 200) progress.seed((doc.body as RunDocument).nodes);
  };
  await seed();
  const view = io.tty ? new TerminalView(io, progress) : undefined;
  const timer = view ? setInterval(() => view.draw(), REDRAW_MS) : undefined;
  let after = 0;
  try {
    for (let attempt = 0; ; attempt++) {
      let finished = false;
      try {
        for await (const event of runEvents(target, runId, after)) {
          if (event.seq !== undefined) after = event.seq;
          finished = event.type === 'run.finished';
          // A (re)plan names its nodes: they show as pending from then on.
          if (event.type === 'plan') await seed();
          const changed = progress.apply(event);
          if (view) view.draw();
          else if (changed === 'run') io.stderr(`${progress.headline(Date.now())}\n`);
          else if (changed) io.stderr(`${progress.line(changed, Date.now())}\n`);
        }
        // The stream ends after the run's run.finished; otherwise its API process went away.
        if (finished || attempt >= RECONNECTS) return;
      } catch (err) {
        if (!(err instanceof ApiUnreachableError) || attempt >= RECONNECTS) throw err;
      }
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
  } finally {
    if (timer) clearInterval(timer);
    view?.draw();
  }
}

/** The progress redrawn in place on a terminal: the cursor goes back up over the last drawing. */
class TerminalView {
  private drawn = 0;

  constructor(
    private readonly io: RunIo,
    private readonly progress: RunProgress,
  ) {}

  draw(): void {
    const lines = this.progress.render(Date.now(), Math.max(5, (this.io.rows ?? 40) - 2));
    // Up to the first line drawn, each line cleared and written, then anything below cleared.
    const up = this.drawn > 0 ? `\x1b[${this.drawn}F` : '';
    this.io.stderr(`${up}${lines.map((l) => `\x1b[2K${l}\n`).join('')}\x1b[J`);
    this.drawn = lines.length;
  }
}
