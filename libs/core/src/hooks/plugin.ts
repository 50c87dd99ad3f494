/** What a plugin is: a function that registers hooks, given the registry's `on` and its settings. */
import type { Logger } from 'pino';
import type { HookRegistry } from './hook-registry.js';

export interface PluginApi {
  readonly on: HookRegistry['on'];
  /** The process environment, for plugins' own settings. */
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly logger: Logger | undefined;
}

export type Plugin = (api: PluginApi) => void | Promise<void>;
