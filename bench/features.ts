/**
 * What each optional feature costs a node, in Redis commands: the throughput benchmark's graph
 * (10 `json` nodes: one source, 8 in parallel, one join) in a batch of runs profiled under MONITOR
 * (`support/redis-profile.ts`), once with every feature off and once with each one on alone:
 *
 * - all off: the default tenant, no flow limits, the reflect loop off (no memory writes), no
 *   webhook subscription;
 * - flow limits: a limit per tool that never binds (concurrency 100,000);
 * - a tenant: the runs belong to a tenant other than the default one, as an API key of it submits them;
 * - memory writes: the reflect loop on (`TETRALOOP_REFLECT=on`, the default): each settled run is
 *   recorded in its agent's memory;
 * - webhooks: the tenant subscribed to `run.finished`, delivered to a local receiver by the sense pool.
 *
 * Each setup has its stack of its own (Redis, the API and the plan and tool pools in this process);
 * a warm-up batch loads the scripts first. Command counts do not depend on the machine's speed, so
 * they hold on a busy machine where times would not.
 */
import { startWebhookReceiver } from '../test/support/webhook-receiver.js';
import { libraryDriver } from './support/library-driver.js';
import {
  profileDelta,
  profileRedis,
  profileTable,
  profileTotal,
  type ProfileDelta,
  type ProfileRow,
} from './support/redis-profile.js';
import { startBenchStack } from './support/stack.js';
import { NODES_PER_RUN, batch } from './throughput.js';

const RUNS = 50;
const WARM_UP_RUNS = 20;
const TENANT = 'bench-tenant';
/** 32 bytes as hex: webhook signing secrets are kept encrypted under it. */
const SECRET_KEY = 'ab'.repeat(32);

export interface FeatureRow {
  setup: string;
  /** Redis commands per node. */
  commands: number;
  /** Against "all off": the sources whose commands per node differ. */
  delta: ProfileDelta[];
  profile: ProfileRow[];
}

export interface FeaturesResult {
  rows: FeatureRow[];
  settings: Record<string, unknown>;
}

interface Setup {
  readonly name: string;
  readonly env: Record<string, string>;
  readonly tenant?: string;
  /** Webhooks: a subscription of the default tenant, delivered to a local receiver. */
  readonly webhooks?: boolean;
}

const OFF = { TETRALOOP_REFLECT: 'off' };

const SETUPS: readonly Setup[] = [
  { name: 'all off', env: OFF },
  {
    name: 'flow limits (a limit per tool that never binds)',
    env: {
      ...OFF,
      TETRALOOP_LIMITS: JSON.stringify([{ name: 'unbound', key: 'tool', concurrency: 100_000 }]),
    },
  },
  { name: `a tenant (\`${TENANT}\`)`, env: OFF, tenant: TENANT },
  { name: 'memory writes (TETRALOOP_REFLECT=on)', env: { TETRALOOP_REFLECT: 'on' } },
  { name: 'webhooks (a subscription to run.finished)', env: OFF, webhooks: true },
];

async function profileSetup(setup: Setup, log: (line: string) => void): Promise<ProfileRow[]> {
  const receiver = setup.webhooks ? await startWebhookReceiver() : undefined;
  const stack = await startBenchStack(
    { ...setup.env, ...(receiver ? { TETRALOOP_SECRET_KEY: SECRET_KEY } : {}) },
    { pools: receiver ? ['plan', 'tool', 'sense'] : ['plan', 'tool'] },
  );
  try {
    if (receiver) {
      const res = await fetch(`${stack.url}/v1/webhooks`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ url: `${receiver.url}/hook`, events: ['run.finished'] }),
      });
      if (res.status !== 201) throw new Error(`webhook subscription answered ${res.status}`);
    }
    const driver = libraryDriver(stack.api, setup.tenant === undefined ? {} : { tenant: setup.tenant });
    await batch(driver, WARM_UP_RUNS, stack);
    // Every delivery of the warm-up made before the profile starts, and every one of the batch within it.
    await receiver?.until('/hook', WARM_UP_RUNS);
    log(`features: ${setup.name}`);
    const { rows } = await profileRedis(stack.env.REDIS_URL!, RUNS * NODES_PER_RUN, async () => {
      await batch(driver, RUNS, stack);
      await receiver?.until('/hook', WARM_UP_RUNS + RUNS);
    });
    return rows;
  } finally {
    await stack.close();
    await receiver?.close();
  }
}

export async function runFeatures(log: (line: string) => void = console.log): Promise<FeaturesResult> {
  const profiles: ProfileRow[][] = [];
  for (const setup of SETUPS) profiles.push(await profileSetup(setup, log));
  const base = profiles[0]!;
  return {
    rows: SETUPS.map((setup, i) => ({
      setup: setup.name,
      commands: profileTotal(profiles[i]!),
      delta: profileDelta(base, profiles[i]!),
      profile: profiles[i]!,
    })),
    settings: {
      runs: RUNS,
      nodesPerRun: NODES_PER_RUN,
      graph: 'src → 8 parallel → join, all json tool nodes',
      processes: 'the API and the plan and tool pools (and the sense pool with webhooks) in this process',
    },
  };
}

const signed = (n: number): string => (n > 0 ? `+${n}` : `${n}`);

const deltaCell = (delta: readonly ProfileDelta[]): string =>
  delta.length === 0
    ? 'none'
    : delta
        .map((d) => {
          const ran = Object.entries(d.ran)
            .map(([c, n]) => `${c} ${signed(n)}`)
            .join(', ');
          return `${d.source} ${signed(d.commands)}${ran ? ` (${ran})` : ''}`;
        })
        .join('; ');

export function featuresTable(result: FeaturesResult): string {
  const base = result.rows[0]!;
  return [
    `Redis commands per node, read with MONITOR over a batch of ${RUNS} runs × ${NODES_PER_RUN} nodes after a warm-up, every command Redis ran counted (a script's call and each command inside it). The delta is against "all off", by what sent the commands (a script, with the commands inside it that changed, or a plain command).`,
    '',
    '| setup | commands per node | Δ against all off | where the Δ is, per node |',
    '|---|---:|---:|---|',
    ...result.rows.map(
      (r) =>
        `| ${r.setup} | ${r.commands.toFixed(1)} | ${r === base ? '' : signed(Number((r.commands - base.commands).toFixed(2)))} | ${r === base ? '' : deltaCell(r.delta)} |`,
    ),
    '',
    'The profile with every feature off:',
    '',
    profileTable(base.profile, 'node'),
  ].join('\n');
}
