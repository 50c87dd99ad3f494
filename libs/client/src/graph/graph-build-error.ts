/** Why `g.build()` refused a graph: every problem found, each at its path, as the API reports them. */
import type { ApiIssue, Graph } from '../types.js';

/** A graph the API would refuse (`400 invalid_graph`): `issues` has each problem with its path. */
export class GraphBuildError extends Error {
  /** The code the API would answer with. */
  readonly code = 'invalid_graph';

  constructor(
    /** Each problem, its path inside the graph (`nodes.1.args.email`; empty for the graph itself). */
    readonly issues: readonly ApiIssue[],
    /** The graph as it would have been sent, for a look at what the paths point to. */
    readonly graph: Graph,
  ) {
    super(`the graph is invalid: ${issues.map((i) => `${i.path || '(graph)'}: ${i.message}`).join('; ')}`);
    this.name = 'GraphBuildError';
  }
}
