/**
 * `tetraloop run <graph.json> [--follow] [--model <m>] [--thinking <effort>]`: submit a run to the
 * API and wait for it; `--model` and `--thinking` set the request's model and reasoning effort. With `--follow` it shows
 * live progress on stderr from the run's event stream — a line per node with its status and elapsed
 * time, redrawn in place on a terminal, a line per change otherwise. Sends `TETRALOOP_API_KEY` as
 * its bearer key when set (it needs `runs:write` and `runs:read`). Prints the final run document on
 * stdout. Exit codes: 0 the run succeeded, 1 it did not, or the API refused or was unreachable; 2 a
 * flag's value is wrong.
 */
import { readFile } from 'node:fs/promises';
import type { RunRequest, TetraloopClient } from '@tetraloop/client';
import { apiTargetFromEnv, clientOf, describeFailure, type ApiTarget } from './api-client.js';
import { UsageError, modelFlags, type ModelFlags } from './cli-args.js';
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
/** Times a stream the API ended before the run finished is opened again. */
const REOPENS = 5;

export async function runGraphFile(
  file: string,
  options: {
    follow: boolean;
    target?: ApiTarget;
    io?: RunIo;
    /** `--model` and `--thinking` as given. */
    call?: { model?: string | undefined; thinking?: string | undefined };
  },
): Promise<number> {
  const io = options.io ?? processIo();
  let call: ModelFlags;
  try {
    call = modelFlags(options.call ?? {});
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    io.stderr(`run: ${err.message}\n`);
    return 2;
  }
  const client = clientOf(options.target ?? apiTargetFromEnv());
  const parsed = JSON.parse(await readFile(file, 'utf8')) as Record<string, unknown>;
  // A file may hold a whole run request (a graph or a task) or just a graph; the API checks it.
  // `--model` and `--thinking` win over the file's.
  const body = {
    ...('graph' in parsed || 'task' in parsed ? parsed : { graph: parsed }),
    ...call,
  } as RunRequest;
  try {
    const { runId } = await client.submit(body);
    io.stderr(`run ${runId} accepted\n`);
    if (options.follow) await follow(client, runId, io);
    const doc = await client.wait(runId);
    io.stdout(`${JSON.stringify(doc, null, 2)}\n`);
    return doc.status === 'succeeded' ? 0 : 1;
  } catch (err) {
    const said = describeFailure(err, 'TETRALOOP_API_KEY');
    if (said === undefined) throw err;
    io.stderr(`${said}\n`);
    return 1;
  }
}

/**
 * Shows the run's progress until its event stream ends after the run finished. The client reopens
 * a stream that breaks after the last event seen; one that the API ends before the run finished
 * (its process shutting down) is opened again here, as often as `REOPENS`.
 */
async function follow(client: TetraloopClient, runId: string, io: RunIo): Promise<void> {
  const progress = new RunProgress(runId);
  const seed = async (): Promise<void> => progress.seed((await client.get(runId)).nodes);
  await seed();
  const view = io.tty ? new TerminalView(io, progress) : undefined;
  const timer = view ? setInterval(() => view.draw(), REDRAW_MS) : undefined;
  let after: number | undefined;
  try {
    for (let opened = 0; ; opened++) {
      let finished = false;
      for await (const event of client.events(runId, after === undefined ? {} : { lastEventId: after })) {
        if ('seq' in event) after = event.seq;
        finished = event.type === 'run.finished';
        // A (re)plan names its nodes: they show as pending from then on.
        if (event.type === 'plan') await seed();
        const changed = progress.apply(event);
        if (view) view.draw();
        else if (changed === 'run') io.stderr(`${progress.headline(Date.now())}\n`);
        else if (changed) io.stderr(`${progress.line(changed, Date.now())}\n`);
      }
      if (finished || opened >= REOPENS) return;
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
