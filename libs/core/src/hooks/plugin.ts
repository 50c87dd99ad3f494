/** What a plugin is: a function that registers hooks, given the registry's `on` and its settings. */
import type { Logger } from 'pino';
import type { CredentialRefresh, HookRegistry } from './hook-registry.js';

export interface PluginApi {
  readonly on: HookRegistry['on'];
  /**
   * Renews credentials when a model or tool call fails `auth`: the call is retried once after it.
   * May answer `{modelApiKey}`, the key the worker's model client uses from then on.
   */
  readonly refreshCredentials: (refresh: CredentialRefresh) => void;
  /** The process environment, for plugins' own settings. */
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly logger: Logger | undefined;
}

export type Plugin = (api: PluginApi) => void | Promise<void>;
