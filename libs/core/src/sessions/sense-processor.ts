/** The sense pool's (L1) job processor: messages, source events, bursts, lanes and polls. */
import type { Job } from 'bullmq';
import { z } from 'zod';
import type { Services } from '../runtime/services.js';
import { QUEUE_ARGUMENTS, parseQueueCommand } from './commands.js';
import { SENSE_JOB } from './sense-jobs.js';
import { InboundEvent, type PolledSource } from './source-service.js';
import { LANE_MODES } from '../state/session-store.js';

export const SessionKey = z.string().regex(/^[A-Za-z0-9:_.@-]{1,128}$/, 'must match [A-Za-z0-9:_.@-]{1,128}');

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

export async function executeSenseJob(
  services: Services,
  polled: ReadonlyMap<string, PolledSource>,
  job: Job,
): Promise<unknown> {
  const data = job.data as Record<string, unknown>;
  switch (job.name) {
    case SENSE_JOB.message:
      return services.sessions.handleMessage(
        SessionKey.parse(data.sessionKey),
        MessageBody.parse(data.message),
      );
    case SENSE_JOB.event:
      return services.sources.ingest(
        z.string().parse(data.source),
        InboundEvent.parse(data.event),
        'webhook',
      );
    case SENSE_JOB.burstFlush:
      return services.sources.flush(z.string().parse(data.key));
    case SENSE_JOB.laneAdvance:
      return services.sessions.advance(SessionKey.parse(data.sessionKey), z.string().parse(data.finished));
    case SENSE_JOB.laneSweep:
      return services.sessions.sweep();
    case SENSE_JOB.poll: {
      const source = polled.get(z.string().parse(data.source));
      return source ? services.sources.poll(source) : undefined;
    }
    default:
      throw new Error(`no handler for sense job "${job.name}"`);
  }
}
