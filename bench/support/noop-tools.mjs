/**
 * The custom tool of the custom-tool benchmark: passes its value on, as the built-in `json` does.
 * JavaScript, as a team's built module is: the benchmark's `tetraloop` processes run the built
 * command, which loads no TypeScript.
 */
import { z } from 'zod';
import { defineTool } from '@tetraloop/sdk';

export const noop = defineTool({
  name: 'bench.noop',
  description: 'Pass a value on',
  input: z.object({ value: z.unknown() }),
  output: z.unknown(),
  run: (input) => input.value,
});
