/**
 * `tetraloop <command>`: dev | api | worker | run | runs | explain | agent | lessons | schedules |
 * keys | triggers | events | mcp | openapi | archive | config. Every command first reads the config file
 * (`--config` or TETRALOOP_CONFIG) into the environment where the environment sets nothing.
 * Each process type also runs alone against a shared REDIS_URL, so pools scale as separate
 * processes; `run`, `runs`, `explain`, `lessons`, `schedules`, `triggers` and `events` are clients of the API at
 * TETRALOOP_API_URL (with TETRALOOP_API_KEY as their bearer key when set); `keys` manages API keys
 * through the API with the root token, or in Redis directly; `openapi` prints the API's OpenAPI
 * document.
 */
import { parseArgs } from 'node:util';
import type { Pool } from '@tetraloop/core/queues';
import { takeConfigFlag } from './config-flag.js';

// Each command's modules load when it runs (the API's and the workers' are most of a process's
// start): `tetraloop --help` or a client command does not pay for the server's code.

const usage = (POOLS: readonly string[]): string => `usage: tetraloop <command>

  dev                                   API + every worker pool; embedded Redis when REDIS_URL is unset
                                        (redis-server, or a redis:7 container with Docker); a secret
                                        key of its own in TETRALOOP_DATA_DIR when TETRALOOP_SECRET_KEY
                                        is unset
  api                                   the HTTP API alone
  worker --pool <${POOLS.join('|')}|all> [--concurrency N] [--metrics-port P]
         [--tools <module>]... [--queues <q1,q2>]
                                        one worker pool (or all of them); the tool pool serves
                                        the custom tools of --tools on --queues (default: default)
  run <graph.json> [--follow] [--model <m>] [--thinking <effort>]
                                        submit a run to TETRALOOP_API_URL and wait for it; --follow
                                        shows each node's status and elapsed time as it runs;
                                        --model/--thinking set the request's model and reasoning
                                        effort (minimal|low|medium|high)
  runs list [--status <status>] [--since <1h|ISO time>] [--until …] [--agent <id>] [--session <key>]
            [--tag <tag>] [--schedule <id>] [--trigger <id>] [--limit N] [--cursor <c>] [--json]
                                        the runs, newest first, as a table
  runs show <runId> [--json]            one run and its nodes
  explain <runId> [--json]              where a run's time went, its critical path marked
  agent --message <text> [--session <key>] [--agent <id>] [--model <m>] [--thinking <effort>]
        [--wait] [--json]
                                        say something to an agent: into a session's lane, or as a
                                        one-off loop run; --wait prints its reply
  lessons list <agentId> [--status probation|active|pinned|retired] [--json]
                                        an agent's lessons, as a table (from TETRALOOP_API_URL)
  lessons show <lessonId>               one lesson, as JSON
  lessons retire|pin|activate <lessonId>
                                        override a lesson's status
  schedules list [--json]               the tenant's schedules: cadence, paused, next firing, last
                                        outcome, firings by outcome
  schedules create --name <name> (--cron <pattern> [--timezone <zone>] | --every <ms>)
                   (--request <file.json> | --task <text>) [--agent <id>] [--overlap …]
                   [--catch-up …] [--paused] [--json]
                                        make a schedule (tetraloop schedules help: every flag)
  schedules pause|resume|delete|trigger <scheduleId>
                                        stop or restart its firings, delete it, or run it now
  keys create --scopes <scope,…> [--tenant <tenant>] [--name <name>] [--expires-at <ISO time>] [--json]
                                        make an API key; its secret is printed once
  keys list [--tenant <tenant>] [--json]
                                        API keys and their scopes (never their secrets)
  keys revoke <keyId>                   revoke an API key at once
  triggers list|create <file.json>|delete <triggerId>
                                        the tenant's triggers: events that start runs
  events send <name> [--payload <json>] [--id <id>] [--key <key>]
                                        send an event to the tenant's triggers
  openapi [--out <file>]                the API's OpenAPI 3.1 document (the defaults' limits), on stdout
                                        or into a file
  mcp                                   Tetraloop as an MCP server on stdio (run_graph, run_task,
                                        get_run), a client of TETRALOOP_API_URL
  archive export --since <time> [--until <time>] [--kind runs|transcripts] [--tenant <t>] [--dir <d>]
                                        the archived runs and transcripts (TETRALOOP_ARCHIVE_DIR),
                                        as JSON Lines
  config check|print [--process api|workers|dev|client|all] [--json]
                                        check the whole configuration (exit 1 naming every bad
                                        field), or print the effective settings and their sources
  config docs [--out <file>]            the settings reference (docs/configuration.md)

Every command takes --config <file> (or TETRALOOP_CONFIG): a YAML file of settings in groups
(tetraloop.example.yaml); a variable set in the environment wins over it.

run, runs, explain, agent, lessons, schedules, triggers, events and mcp send TETRALOOP_API_KEY as their bearer key when it is set. keys uses the API at
TETRALOOP_API_URL with TETRALOOP_ADMIN_TOKEN (the root token) when that is set, else (or with
--redis) Redis directly at REDIS_URL under TETRALOOP_PREFIX, to make the first key.`;

export async function main(args: string[]): Promise<void> {
  const { argv, config } = takeConfigFlag(args);
  const [command, ...rest] = argv;
  if (!isCommand(command)) {
    const { POOLS } = await import('@tetraloop/core/queues');
    return fail(usage(POOLS));
  }
  try {
    // The config file fills what the environment leaves unset, before any command reads its settings.
    const { applyConfig, configCommand } = await import('./config-command.js');
    if (command === 'config') {
      process.exitCode = configCommand(config === undefined ? rest : [...rest, '--config', config]);
      return;
    }
    applyConfig(config, (line) => process.stderr.write(`${line}\n`));
    switch (command) {
      case 'dev':
        return await (await import('./processes.js')).runDev();
      case 'api':
        return await (await import('./processes.js')).runApi();
      case 'worker': {
        const { values } = parseArgs({
          args: rest,
          options: {
            pool: { type: 'string' },
            concurrency: { type: 'string' },
            'metrics-port': { type: 'string' },
            tools: { type: 'string', multiple: true },
            queues: { type: 'string' },
          },
        });
        // The flags add to the settings they stand for (a config file or the environment).
        if (values.tools?.length)
          process.env.TETRALOOP_TOOL_MODULES = [process.env.TETRALOOP_TOOL_MODULES, ...values.tools]
            .filter((m) => m !== undefined && m !== '')
            .join(',');
        if (values.queues !== undefined) process.env.TETRALOOP_TOOL_QUEUES = values.queues;
        const pools = await parsePools(values.pool);
        const concurrency = values.concurrency === undefined ? undefined : Number(values.concurrency);
        if (concurrency !== undefined && (!Number.isInteger(concurrency) || concurrency < 1)) {
          return fail('--concurrency must be a positive integer');
        }
        const metricsPort = values['metrics-port'] === undefined ? undefined : Number(values['metrics-port']);
        if (
          metricsPort !== undefined &&
          (!Number.isInteger(metricsPort) || metricsPort < 0 || metricsPort > 65_535)
        ) {
          return fail('--metrics-port must be a port number');
        }
        const { runWorker } = await import('./processes.js');
        return await runWorker(pools, concurrency, metricsPort);
      }
      case 'run': {
        const { values, positionals } = parseArgs({
          args: rest,
          options: {
            follow: { type: 'boolean', default: false },
            model: { type: 'string' },
            thinking: { type: 'string' },
          },
          allowPositionals: true,
        });
        const file = positionals[0];
        if (!file) return fail('run needs a graph file: tetraloop run <graph.json>');
        const { runGraphFile } = await import('./run-command.js');
        process.exitCode = await runGraphFile(file, {
          follow: values.follow ?? false,
          call: { model: values.model, thinking: values.thinking },
        });
        return;
      }
      case 'runs':
        process.exitCode = await (await import('./runs-command.js')).runsCommand(rest);
        return;
      case 'explain':
        process.exitCode = await (await import('./runs-command.js')).explainCommand(rest);
        return;
      case 'agent':
        process.exitCode = await (await import('./agent-command.js')).agentCommand(rest);
        return;
      case 'lessons':
        process.exitCode = await (await import('./lessons-command.js')).lessonsCommand(rest);
        return;
      case 'schedules':
        process.exitCode = await (await import('./schedules-command.js')).schedulesCommand(rest);
        return;
      case 'keys':
        process.exitCode = await (await import('./keys-command.js')).keysCommand(rest);
        return;
      case 'triggers':
        process.exitCode = await (await import('./triggers-command.js')).triggersCommand(rest);
        return;
      case 'events':
        process.exitCode = await (await import('./triggers-command.js')).eventsCommand(rest);
        return;
      case 'openapi': {
        const { values } = parseArgs({ args: rest, options: { out: { type: 'string' } } });
        await (await import('./openapi-command.js')).writeOpenApiDocument(values.out);
        return;
      }
      case 'mcp':
        return await (await import('./mcp-command.js')).runMcpServer();
      case 'archive':
        process.exitCode = await (await import('./archive-command.js')).archiveCommand(rest);
        return;
      default:
        return command satisfies never;
    }
  } catch (err) {
    if (await stopsWithItsMessage(err)) return fail((err as Error).message);
    // node:util parseArgs: an unknown option or a missing value is a usage error.
    if (isParseArgsError(err)) return fail(`${command}: ${err.message}`);
    throw err;
  }
}

const COMMANDS = [
  'dev',
  'api',
  'worker',
  'run',
  'runs',
  'explain',
  'agent',
  'lessons',
  'schedules',
  'keys',
  'triggers',
  'events',
  'openapi',
  'mcp',
  'archive',
  'config',
] as const;
type Command = (typeof COMMANDS)[number];
const isCommand = (name: string | undefined): name is Command =>
  (COMMANDS as readonly unknown[]).includes(name);

/** An error of settings, files or the machine: the command stops with its message, no stack. */
async function stopsWithItsMessage(err: unknown): Promise<boolean> {
  const [config, durability, runtime, tools, configCommand, devSecretKey] = await Promise.all([
    import('@tetraloop/core/config'),
    import('@tetraloop/core/durability'),
    import('@tetraloop/core/runtime'),
    import('@tetraloop/core/tools'),
    import('./config-command.js'),
    import('./dev-secret-key.js'),
  ]);
  return (
    err instanceof config.ConfigError ||
    err instanceof configCommand.ConfigFileError ||
    err instanceof durability.AcceptDurabilityError ||
    err instanceof runtime.NoRedisError ||
    err instanceof runtime.DockerCommandError ||
    err instanceof runtime.DataDirLockedError ||
    err instanceof devSecretKey.DevSecretKeyError ||
    err instanceof runtime.ToolModuleError ||
    err instanceof tools.ToolDefinitionError
  );
}

async function parsePools(value: string | undefined): Promise<Pool[]> {
  const { POOLS } = await import('@tetraloop/core/queues');
  if (value === 'all') return [...POOLS];
  if (value !== undefined && (POOLS as readonly string[]).includes(value)) return [value as Pool];
  return fail(`--pool must be one of ${POOLS.join(', ')}, all`);
}

function isParseArgsError(err: unknown): err is Error {
  const code = (err as { code?: unknown } | null)?.code;
  return err instanceof Error && typeof code === 'string' && code.startsWith('ERR_PARSE_ARGS_');
}

function fail(message: string): never {
  process.stderr.write(`${message}\n`);
  process.exit(2);
}
