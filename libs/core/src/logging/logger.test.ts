import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createLogger } from './logger.js';

function capture(): { stream: Writable; lines: () => Record<string, unknown>[] } {
  const chunks: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      chunks.push(chunk.toString());
      done();
    },
  });
  return {
    stream,
    lines: () =>
      chunks
        .join('')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as Record<string, unknown>),
  };
}

describe('logs', () => {
  it('are JSON with the layer and the ids of child loggers, and redact secrets', () => {
    const out = capture();
    const log = createLogger({ level: 'info', layer: 'tool', redact: ['*.customerCard'] }, out.stream);
    log.child({ runId: 'r1', nodeId: 'n1', attempt: 2 }).info(
      {
        headers: { authorization: 'Bearer sk-live' },
        config: { apiKey: 'sk-123', OPENAI_API_KEY: 'sk-456' },
        payment: { customerCard: '4111' },
        request: { Headers: { 'X-Api-Key': 'sk-789', Authorization: 'Bearer sk-abc' } },
      },
      'node attempt',
    );
    const [line] = out.lines();
    expect(line).toMatchObject({ layer: 'tool', runId: 'r1', nodeId: 'n1', attempt: 2, msg: 'node attempt' });
    const text = JSON.stringify(line);
    for (const secret of ['sk-live', 'sk-123', 'sk-456', '4111', 'sk-789', 'sk-abc'])
      expect(text).not.toContain(secret);
    expect(text).toContain('[redacted]');
  });

  it('follow the configured level', () => {
    const out = capture();
    const log = createLogger({ level: 'warn', layer: 'api' }, out.stream);
    log.info('quiet');
    log.warn('loud');
    expect(out.lines().map((l) => l.msg)).toEqual(['loud']);
  });
});
