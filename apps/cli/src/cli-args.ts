/** What the CLI's commands share about their command lines. */
import { THINKING_EFFORTS, type ThinkingEffort } from '@tetraloop/core/domain';

/** A mistake in the command line: the command exits 2. */
export class UsageError extends Error {}

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
