import { describe, expect, it } from 'vitest';
import { verifyWebhookSignature } from './signature.js';
import {
  DEFAULT_WEBHOOK_DELIVERY,
  deliveryIdOf,
  deliveryRequest,
  judgeAttempt,
  runFinishedData,
  EVENT_OUTPUT_MAX_BYTES,
} from './delivery-rules.js';

const settings = DEFAULT_WEBHOOK_DELIVERY;
const half = () => 0.5;

describe('judgeAttempt', () => {
  it('delivers on 2xx, retries 5xx, 429 and transport failures, gives up on the rest', () => {
    expect(judgeAttempt({ status: 204 }, 1, settings)).toMatchObject({ outcome: 'delivered' });
    expect(judgeAttempt({ status: 503 }, 1, settings, half)).toEqual({
      outcome: 'retrying',
      status: 503,
      error: 'server',
      delayMs: 2000,
    });
    expect(judgeAttempt({ error: 'timeout' }, 2, settings, half)).toMatchObject({ delayMs: 4000 });
    expect(judgeAttempt({ status: 404 }, 1, settings)).toMatchObject({
      outcome: 'rejected',
      error: 'client',
    });
    expect(judgeAttempt({ status: 302 }, 1, settings)).toMatchObject({
      outcome: 'rejected',
      error: 'redirect',
    });
    expect(judgeAttempt({ error: 'egress_denied' }, 1, settings)).toMatchObject({ outcome: 'refused' });
    expect(judgeAttempt({ error: 'no_secret' }, 1, settings)).toMatchObject({ outcome: 'no_secret' });
    expect(judgeAttempt({ status: 500 }, settings.attempts, settings)).toMatchObject({
      outcome: 'exhausted',
    });
  });

  it("honours a 429's Retry-After when it is longer than the backoff", () => {
    expect(judgeAttempt({ status: 429, retryAfterMs: 60_000 }, 1, settings, half)).toMatchObject({
      outcome: 'retrying',
      error: 'rate_limited',
      delayMs: 60_000,
    });
  });
});

describe('deliveries', () => {
  it('have ids that depend on run, target, type and key only', () => {
    const a = deliveryIdOf('r1', { kind: 'run' }, 'run.finished', 'k');
    expect(a).toMatch(/^whd_[0-9a-f]{32}$/);
    expect(deliveryIdOf('r1', { kind: 'run' }, 'run.finished', 'k')).toBe(a);
    expect(deliveryIdOf('r1', { kind: 'subscription', id: 'whk_1' }, 'run.finished', 'k')).not.toBe(a);
    expect(deliveryIdOf('r1', { kind: 'run' }, 'node.failed', 'k')).not.toBe(a);
  });

  it('are signed over the exact body sent', () => {
    const event = { id: 'whd_1', type: 'run.finished' as const, createdAt: 'now', data: { runId: 'r' } };
    const { body, headers } = deliveryRequest(event, 'whsec_x', 1000);
    expect(headers['x-tetraloop-event']).toBe('run.finished');
    expect(headers['x-tetraloop-delivery']).toBe('whd_1');
    const check = verifyWebhookSignature(headers['x-tetraloop-signature'], 'whsec_x', body, {
      nowSeconds: 1000,
      toleranceSeconds: 1,
    });
    expect(check.ok).toBe(true);
  });

  it("carry a run's output only when it is small", () => {
    const run = {
      runId: 'r',
      agentId: 'main',
      sessionKey: null,
      status: 'succeeded',
      error: null,
      usage: {},
      createdAt: 'a',
      finishedAt: 'b',
    };
    expect(runFinishedData({ ...run, output: { a: 1 } })).toMatchObject({ output: { a: 1 } });
    const large = runFinishedData({ ...run, output: { a: 'x'.repeat(EVENT_OUTPUT_MAX_BYTES) } });
    expect(large).toMatchObject({ output: null, outputOmitted: true });
  });
});
