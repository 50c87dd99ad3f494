/**
 * Submits runs and waits for them through the library, as the API's handlers do, without HTTP in
 * between: the API's own run service and waiter, in the process that embeds it. The Tetraloop
 * counterpart of a BullMQ producer calling `Queue.addBulk`.
 */
import type { ApiHandle } from '@tetraloop/api';
import { RunRequest } from '@tetraloop/core/runs';

export interface LibraryDriver {
  submit(body: unknown): Promise<string>;
  /** Resolves once the run has settled, with its status. */
  settle(runId: string): Promise<string>;
}

/** `tenant`: the tenant the runs belong to, as an API key of that tenant submits them; the default one when absent. */
export function libraryDriver(api: ApiHandle, options: { tenant?: string } = {}): LibraryDriver {
  const submitOptions = options.tenant === undefined ? {} : { tenant: options.tenant };
  return {
    async submit(body) {
      return (await api.runs.submit(RunRequest.parse(body), undefined, submitOptions)).runId;
    },
    async settle(runId) {
      while (!(await api.waiter.wait(runId, 60_000, async () => (await api.runs.settled(runId)) === true)));
      return (await api.runs.status(runId)) ?? 'unknown';
    },
  };
}
