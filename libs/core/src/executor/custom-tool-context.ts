/**
 * What a custom tool's `run` gets beside the call's signal and idempotency key: the attempt, the
 * run's tenant and agent, its logger, `secret(name)` (only a secret the tool declares and whose
 * scope names the tool) and `progress(fraction, message)` (a `node.progress` event, a bounded
 * number per node: its attempts share the bound, whichever workers ran them). Every secret value
 * it read is remembered, so the call's output and errors are masked of it like of a `{"$secret"}`
 * argument.
 */
import { ToolError } from '../errors/node-error.js';
import { scrubSecrets } from '../secrets/secret-ref.js';
import { secretRefusal, unscopedSecretMessage } from '../secrets/secret-scope.js';
import { SECRETS_OFF_MESSAGE, SecretStoreError } from '../state/secret-store.js';
import type { CustomTool, CustomToolContext } from '../tools/custom-tool.js';
import type { ToolContext } from '../tools/tool.js';
import type { Logger } from 'pino';
import type { SecretStore } from '../state/secret-store.js';
import type { RunStore } from '../state/runs/run-store.js';

/** The call a custom tool's context is made for: its run, node and attempt, and where it writes. */
export interface CustomCall {
  readonly runId: string;
  readonly nodeId: string;
  readonly tenant: string;
  readonly agentId: string;
  readonly attempt: number;
  readonly log: Logger;
  readonly secrets?: SecretStore;
  readonly events: Pick<RunStore, 'appendEvent'>;
}

/**
 * `node.progress` events one node may append in its run, over all its attempts; later ones are
 * dropped. Counted in Redis beside the run (the event's script), so a retry on another worker does
 * not start over; a node that never reports progress costs nothing.
 */
export const MAX_PROGRESS_EVENTS = 100;
/** A progress message is cut to this many characters. */
export const MAX_PROGRESS_MESSAGE = 500;

const secretError = (message: string): ToolError =>
  new ToolError('validation', message, { reason: 'secret_not_allowed' });

export function customToolContext(
  call: CustomCall,
  tool: CustomTool,
  base: Omit<ToolContext, 'signal'>,
  /** Filled with the values `secret()` read. */
  read: Map<string, string>,
): Omit<CustomToolContext, 'signal'> {
  const name = tool.name;
  // Set once the run's count says the node reached the bound: later reports make no round trip.
  let progressFull = false;
  const log = call.log.child({ tool: name, toolVersion: tool.custom.version });
  return {
    ...base,
    attempt: call.attempt,
    tenant: call.tenant,
    agentId: call.agentId,
    log,
    async secret(secret) {
      if (!tool.custom.secrets.includes(secret))
        throw secretError(
          `tool "${name}" reads secret "${secret}" it does not declare (add it to the tool's secrets)`,
        );
      const store = call.secrets;
      if (!store?.configured)
        throw new ToolError('validation', `tool "${name}" reads a secret, but ${SECRETS_OFF_MESSAGE}`);
      let resolved;
      try {
        resolved = await store.resolve(call.tenant, [secret]);
      } catch (err) {
        if (err instanceof SecretStoreError) throw new ToolError('validation', err.message);
        throw err;
      }
      const value = resolved.values.get(secret);
      if (value === undefined)
        throw new ToolError(
          'validation',
          `no secret "${secret}" for tenant "${call.tenant}" (write it with PUT /v1/secrets/${secret})`,
        );
      const scope = resolved.scopes.get(secret) ?? null;
      const refused =
        scope === null ? unscopedSecretMessage(secret) : secretRefusal(secret, scope, { tool: name });
      if (refused !== undefined) throw secretError(refused);
      read.set(secret, value);
      return value;
    },
    progress(fraction, message) {
      if (progressFull) return;
      const f = Number.isFinite(fraction) ? Math.min(1, Math.max(0, fraction)) : 0;
      // A secret the tool read never reaches an event, in any form the masking knows.
      const cut = typeof message === 'string' ? message.slice(0, MAX_PROGRESS_MESSAGE) : undefined;
      const text = cut !== undefined && read.size > 0 ? scrubSecrets(cut, read.values()) : cut;
      call.events
        .appendEvent(
          call.runId,
          'node.progress',
          call.nodeId,
          { fraction: f, ...(text !== undefined ? { message: text } : {}), attempt: call.attempt },
          { maxPerNode: MAX_PROGRESS_EVENTS },
        )
        .then((appended) => {
          progressFull ||= !appended;
        })
        .catch((err: Error) => log.warn({ err: err.message }, 'node.progress event not appended'));
    },
  };
}
