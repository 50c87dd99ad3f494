/**
 * Plugins are plain modules listed in config (TETRALOOP_PLUGINS, comma-separated). Each exports
 * `register(api)` (or a default function) and registers hooks through the api. A built-in plugin
 * is named by its bare name (`deny-http`); anything else is a module path or package name.
 */
import { isAbsolute, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Logger } from 'pino';
import { HookRegistry, type CredentialRefresh } from './hook-registry.js';
import type { Plugin } from './plugin.js';

export type { Plugin, PluginApi } from './plugin.js';

const BUILT_IN: Record<string, () => Promise<{ register: Plugin }>> = {
  'deny-http': () => import('./deny-http-plugin.js'),
};

async function loadModule(spec: string): Promise<Plugin> {
  const builtIn = BUILT_IN[spec];
  if (builtIn) return (await builtIn()).register;
  const target = spec.startsWith('.') || isAbsolute(spec) ? pathToFileURL(resolve(spec)).href : spec;
  const mod = (await import(target)) as { register?: Plugin; default?: Plugin };
  const plugin = mod.register ?? mod.default;
  if (typeof plugin !== 'function') throw new Error(`plugin ${spec} exports no register function`);
  return plugin;
}

/** A registry with the listed plugins registered. A plugin that fails to load stops the process. */
export async function loadPlugins(
  specs: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
  logger?: Logger,
): Promise<HookRegistry> {
  const registry = new HookRegistry(logger);
  for (const spec of specs) {
    const plugin = await loadModule(spec);
    const on: HookRegistry['on'] = (name: never, handler: never, options?: never) =>
      registry.on(name, handler, options);
    const refreshCredentials = (refresh: CredentialRefresh): void =>
      registry.onRefreshCredentials(refresh, `${spec}:refreshCredentials`);
    await plugin({ on, refreshCredentials, env, logger });
    logger?.info({ plugin: spec }, 'plugin loaded');
  }
  return registry;
}
