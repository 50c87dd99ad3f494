/** What the CLI's commands share about their command lines. */

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
