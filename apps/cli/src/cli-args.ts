/** What the CLI's commands share about their command lines. */
import { THINKING_EFFORTS, type ThinkingEffort } from '@tetraloop/core/domain';

/** A mistake in the command line: the command exits 2. */
export class UsageError extends Error {}

/** The API could not be asked or said no: the command exits 1. */
export class CommandError extends Error {}

/**
 * Runs a command to its exit code, printing a usage error (exit 2) or a command error (exit 1) to
 * `stderr`; `describe` may name another failure (exit 1). The one exit-code rule of the API commands.
 */
export async function exitCodeOf(
  stderr: (text: string) => void,
  run: () => Promise<number>,
  describe: (err: unknown) => string | undefined = () => undefined,
): Promise<number> {
  try {
    return await run();
  } catch (err) {
    if (err instanceof UsageError || err instanceof CommandError) {
      stderr(`${err.message}\n`);
      return err instanceof UsageError ? 2 : 1;
    }
    const said = describe(err);
    if (said === undefined) throw err;
    stderr(`${said}\n`);
    return 1;
  }
}

/**
 * Answers a subcommand no case of `tetraloop <command>` took: `help`, `--help` and `-h` print
 * `help` (exit 0); none, or an unknown one, is a usage error. Every command's subcommands end here.
 */
export function otherSubcommand(
  subcommand: string | undefined,
  of: { readonly command: string; readonly usage: string; readonly help?: string },
  stdout: (text: string) => void,
): number {
  if (subcommand === 'help' || subcommand === '--help' || subcommand === '-h') {
    stdout(`${of.help ?? of.usage}\n`);
    return 0;
  }
  if (subcommand === undefined) throw new UsageError(of.usage);
  throw new UsageError(`unknown ${of.command} command '${subcommand}'\n\n${of.usage}`);
}

/**
 * Runs node:util's parseArgs for `<prefix>`; its complaints (an unknown option, a missing value)
 * become usage errors.
 */
export function parsing<T>(prefix: string, parse: () => T): T {
  try {
    return parse();
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    if (typeof code === 'string' && code.startsWith('ERR_PARSE_ARGS_')) {
      throw new UsageError(`${prefix}: ${(err as Error).message}`);
    }
    throw err;
  }
}

/** `--model` and `--thinking` as a run request or a session message takes them. */
export interface ModelFlags {
  readonly model?: string;
  readonly thinking?: ThinkingEffort;
}

/**
 * The model and the reasoning effort `--model` and `--thinking` ask for (each absent when not
 * given); a usage error names what `--thinking` takes.
 */
export function modelFlags(values: {
  model?: string | undefined;
  thinking?: string | undefined;
}): ModelFlags {
  const model = values.model?.trim();
  if (values.model !== undefined && !model) throw new UsageError('--model needs a model name');
  const thinking = values.thinking;
  if (thinking !== undefined && !(THINKING_EFFORTS as readonly string[]).includes(thinking)) {
    throw new UsageError(`--thinking takes one of ${THINKING_EFFORTS.join(', ')}, not '${thinking}'`);
  }
  return {
    ...(model ? { model } : {}),
    ...(thinking !== undefined ? { thinking: thinking as ThinkingEffort } : {}),
  };
}

/** The parseArgs options of `--model` and `--thinking`. */
export const MODEL_OPTIONS = {
  model: { type: 'string' },
  thinking: { type: 'string' },
} as const;
