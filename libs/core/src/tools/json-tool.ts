import { z } from 'zod';
import { getPath } from '../graph/references.js';
import { defineTool } from './tool.js';

const JsonInput = z.strictObject({
  value: z.unknown(),
  /** Dot path into `value`, e.g. `items.0.name`. */
  pick: z.string().min(1).optional(),
});

/** Passes a value on, optionally picking a path: the way to reshape data between nodes. */
export const jsonTool = defineTool({
  name: 'json',
  description: 'Pass a value on, optionally picking a dot path out of it.',
  input: JsonInput,
  output: z.unknown(),
  run: (args) =>
    Promise.resolve(args.pick === undefined ? args.value : getPath(args.value, args.pick.split('.'))),
});
