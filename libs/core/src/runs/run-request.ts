import { z } from 'zod';
import { Budget } from './run-model.js';

/** Body of `POST /v1/runs`. The graph is validated separately so every problem gets a path. */
export const RunRequest = z.strictObject({
  graph: z.unknown().refine((g) => g !== undefined, 'graph is required'),
  input: z.unknown().optional(),
  /** Run deadline. @defaultValue 600 */
  timeoutSeconds: z.number().int().positive().max(86_400).default(600),
  /** Execution budget; unset fields take the deployment's defaults. */
  budget: Budget.optional(),
  metadata: z.record(z.string(), z.unknown()).optional(),
});
export type RunRequest = z.infer<typeof RunRequest>;
