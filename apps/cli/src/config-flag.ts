/** `--config <file>`, which every command takes: read before anything else is loaded. */

/** `argv` without `--config <file>` (or `--config=<file>`), and the file it named. */
export function takeConfigFlag(argv: readonly string[]): { argv: string[]; config: string | undefined } {
  const rest: string[] = [];
  let config: string | undefined;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === '--config') config = argv[++i];
    else if (arg.startsWith('--config=')) config = arg.slice('--config='.length);
    else rest.push(arg);
  }
  return { argv: rest, config };
}
