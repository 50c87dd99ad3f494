/** Loads the Lua scripts next to this file as ioredis commands (EVALSHA with EVAL fallback). */
import { readFileSync } from 'node:fs';
import type { Redis } from 'ioredis';

const SCRIPTS = ['start-run-4', 'begin-node-4', 'complete-node-4', 'decide-run-4', 'settle-run-4'] as const;
type ScriptName = (typeof SCRIPTS)[number];

const sources = new Map<ScriptName, { lua: string; numberOfKeys: number }>(
  SCRIPTS.map((name) => [
    name,
    {
      lua: readFileSync(new URL(`./lua/${name}.lua`, import.meta.url), 'utf8'),
      numberOfKeys: Number(name.slice(name.lastIndexOf('-') + 1)),
    },
  ]),
);

const commandName = (name: ScriptName): string => `tetraloop_${name.replaceAll('-', '_')}`;

export type ScriptRunner = (
  name: ScriptName,
  keys: readonly string[],
  args: readonly (string | number)[],
) => Promise<unknown>;

/** Defines every script on `redis` and returns a typed caller. */
export function loadScripts(redis: Redis): ScriptRunner {
  for (const [name, { lua, numberOfKeys }] of sources) {
    redis.defineCommand(commandName(name), { lua, numberOfKeys });
  }
  return (name, keys, args) => {
    const command = (redis as unknown as Record<string, (...a: unknown[]) => Promise<unknown>>)[
      commandName(name)
    ];
    if (!command) throw new Error(`script ${name} is not loaded`);
    return command.call(redis, ...keys, ...args);
  };
}
