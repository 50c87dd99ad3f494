/**
 * A graph of the example's custom tools, written with `graph()` of `@tetraloop/client`, submitted
 * to a running Tetraloop; prints each node's result.
 *
 *   npx tsx --conditions=tetraloop-source examples/custom-tools/graph.ts [email]
 *
 * TETRALOOP_API_URL (default http://localhost:3000); TETRALOOP_API_KEY when the API requires keys.
 */
import { pathToFileURL } from 'node:url';
import { graph, RunWaitTimeoutError, TetraloopClient, type Graph } from '@tetraloop/client';
import { lookupCustomer, slug } from './tools.js';

/**
 * customer (crm.lookup) → page (text.slug) → card (json): the references are typed from the tools'
 * zod schemas (`customer.out.nmae` does not compile), and the edges follow from them.
 */
export function welcomeGraph(): Graph {
  const g = graph<{ email: string }>();
  const customer = g.tool('customer', lookupCustomer, { email: g.input('email') });
  const page = g.tool('page', slug, { text: g.text`welcome ${customer.out.name}`, maxLength: 40 });
  g.tool('card', 'json', {
    value: {
      name: customer.out.name,
      plan: customer.out.plan,
      url: g.text`https://example.org/${page.out.slug}`,
    },
  });
  return g.build();
}

async function main(): Promise<void> {
  const email = process.argv[2] ?? 'ada@example.com';
  const tl = new TetraloopClient({
    baseUrl: process.env.TETRALOOP_API_URL ?? 'http://localhost:3000',
    token: process.env.TETRALOOP_API_KEY,
  });
  const { runId } = await tl.submit({ graph: welcomeGraph(), input: { email } });
  console.log(`run ${runId} accepted`);
  try {
    const doc = await tl.wait(runId, 60_000, { sliceMs: 10_000 });
    for (const [id, node] of Object.entries(doc.nodes)) {
      const result = 'output' in node ? node.output : 'error' in node ? node.error : undefined;
      console.log(`${id}: ${node.status}${result === undefined ? '' : ` ${JSON.stringify(result)}`}`);
    }
    console.log(`run ${doc.status}`);
    process.exitCode = doc.status === 'succeeded' ? 0 : 1;
  } catch (err) {
    if (!(err instanceof RunWaitTimeoutError)) throw err;
    // A node of a known tool waits `queued` until a worker serves the tool's queue.
    console.error(`run still ${err.last.status} after 60 s: is a worker serving crm.lookup running?`);
    process.exitCode = 1;
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) await main();
