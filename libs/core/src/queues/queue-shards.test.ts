import { describe, expect, it } from 'vitest';
import { SLOT_COUNT, keySlot } from '../state/key-slot.js';
import { queueLayout, shardOfRunId, shardTag } from './queue-shards.js';

describe('queueLayout', () => {
  it('keeps the bare prefix on one Redis with one shard', () => {
    expect(queueLayout('tetraloop', { clustered: false, shards: 1 })).toEqual({
      sense: 'tetraloop',
      reflect: 'tetraloop',
      shards: ['tetraloop'],
    });
  });

  it('gives every queue a hash tag on a cluster, each shard in its own Nth of the slots', () => {
    const layout = queueLayout('tl', { clustered: true, shards: 3 });
    expect(layout.sense).toBe('tl:{tl-sense}');
    expect(layout.reflect).toBe('tl:{tl-reflect}');
    layout.shards.forEach((prefix, i) => {
      expect(prefix.startsWith(`tl:{tl-${i}`)).toBe(true);
      const slot = keySlot(`${prefix}:tool:wait`);
      expect(slot).toBeGreaterThanOrEqual(Math.floor((i * SLOT_COUNT) / 3));
      expect(slot).toBeLessThan(Math.floor(((i + 1) * SLOT_COUNT) / 3));
      expect(keySlot(`${prefix}:plan:wait`)).toBe(slot);
    });
  });

  it('shards one Redis too, leaving the other queues as they are', () => {
    const layout = queueLayout('tl', { clustered: false, shards: 2 });
    expect(layout.sense).toBe('tl');
    expect(layout.shards).toEqual([`tl:{${shardTag('tl', 0, 2)}}`, `tl:{${shardTag('tl', 1, 2)}}`]);
  });
});

describe('shardOfRunId', () => {
  it('is 0 with one shard and spreads runs over several', () => {
    expect(shardOfRunId('any', 1)).toBe(0);
    const counts = [0, 0, 0];
    for (let i = 0; i < 3000; i++) counts[shardOfRunId(`run-${i}`, 3)]! += 1;
    for (const c of counts) expect(c).toBeGreaterThan(850);
  });
});
