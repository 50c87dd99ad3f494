import { describe, expect, it } from 'vitest';
import { SettledNodes } from './settled-nodes.js';

describe('SettledNodes', () => {
  it('reports each settled node once, strictly increasing, with the graph size', () => {
    const tally = new SettledNodes(2);
    expect(tally.read({ type: 'node.started', nodeId: 'a' })).toBeUndefined();
    expect(tally.read({ type: 'node.succeeded', nodeId: 'a' })).toEqual({
      progress: 1,
      total: 2,
      message: 'node a succeeded',
    });
    // A resumed run settles a node again: it is not counted twice.
    expect(tally.read({ type: 'node.failed', nodeId: 'a' })).toBeUndefined();
    expect(tally.read({ type: 'node.skipped', nodeId: 'b' })).toMatchObject({ progress: 2, total: 2 });
  });

  it("learns a task's size from its plan, and never reports a total below the progress", () => {
    const tally = new SettledNodes();
    expect(tally.read({ type: 'node.reused', nodeId: 'x' })).toEqual({
      progress: 1,
      message: 'node x reused',
    });
    expect(tally.read({ type: 'plan', data: { nodes: 1 } })).toBeUndefined();
    expect(tally.read({ type: 'node.succeeded', nodeId: 'y' })).toMatchObject({ progress: 2, total: 2 });
  });

  it('ignores events without a node', () => {
    expect(new SettledNodes().read({ type: 'node.succeeded' })).toBeUndefined();
  });
});
