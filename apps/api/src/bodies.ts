/** The API's own request schemas beyond the run request: path parameters and session bodies. */
import { LANE_MODES, QUEUE_ARGUMENTS, SessionKey, parseQueueCommand } from '@tetraloop/core';
import { z } from 'zod';

export { SessionKey };

/** The `Idempotency-Key` header of `POST /v1/runs` and of session messages. */
export const IdempotencyKey = z.string().min(1).max(255).optional();

/** Body of `POST /v1/sessions/:sessionKey/messages`. */
export const MessageBody = z.strictObject({
  text: z
    .string()
    .min(1)
    .max(20_000)
    .refine((text) => parseQueueCommand(text) !== 'invalid', {
      message: `/queue takes one of: ${QUEUE_ARGUMENTS.join(', ')}`,
    }),
  mode: z.enum(LANE_MODES).optional(),
  eventId: z.string().min(1).max(256).optional(),
  metadata: z.record(z.string(), z.unknown()).optional(),
});
export type MessageBody = z.infer<typeof MessageBody>;

export const SourceName = z.string().regex(/^[A-Za-z0-9_.-]{1,64}$/, 'must match [A-Za-z0-9_.-]{1,64}');
