/**
 * A tenant's triggers: made (the run request checked whole, as a submit would check it), listed,
 * read and deleted. Over `TriggerStore`, which keeps the records as JSON.
 */
import type { RunService } from '../runs/run-service.js';
import { GraphRejectedError, RequestRefusedError } from '../runs/run-service.js';
import type { TriggerStore } from '../state/trigger-store.js';
import { hasEventRefs } from './event-refs.js';
import { newTriggerId, Trigger, type TriggerRequest } from './trigger-model.js';

/** The tenant already holds its most triggers. */
export class TriggerLimitError extends Error {
  readonly code = 'too_many_triggers';
  constructor(max: number) {
    super(`a tenant holds at most ${max} triggers (TETRALOOP_TRIGGERS_MAX); delete one first`);
    this.name = 'TriggerLimitError';
  }
}

const under = (path: string): string => (path === '' ? 'request' : `request.${path}`);

export class TriggerBook {
  constructor(
    private readonly store: TriggerStore,
    private readonly runs: Pick<RunService, 'check'>,
  ) {}

  /**
   * Makes a trigger once its run request passes every check a submit makes (an input that reads
   * the event is checked again at each firing, filled in). A refusal names the field under
   * `request.`.
   */
  async create(tenant: string, request: TriggerRequest, now = new Date()): Promise<Trigger> {
    try {
      await this.runs.check(request.request, { tenant, inputKnown: !hasEventRefs(request.request.input) });
    } catch (err) {
      if (err instanceof GraphRejectedError)
        throw new GraphRejectedError(err.issues.map((i) => ({ ...i, path: under(i.path) })));
      if (err instanceof RequestRefusedError)
        throw new RequestRefusedError(err.issues.map((i) => ({ ...i, path: under(i.path) })));
      throw err;
    }
    const trigger = Trigger.parse({ ...request, id: newTriggerId(), createdAt: now.toISOString() });
    if (!(await this.store.add(tenant, trigger.id, JSON.stringify(trigger))))
      throw new TriggerLimitError(this.store.options.maxPerTenant);
    return trigger;
  }

  /** The tenant's triggers, oldest first. */
  async list(tenant: string): Promise<Trigger[]> {
    const all = (await this.store.list(tenant)).map((raw) => Trigger.parse(JSON.parse(raw)));
    return all.sort((a, b) => a.createdAt.localeCompare(b.createdAt) || a.id.localeCompare(b.id));
  }

  /** The tenant's triggers that listen for an event of this name. */
  async listening(tenant: string, eventName: string): Promise<Trigger[]> {
    return (await this.list(tenant)).filter((t) => t.event === eventName);
  }

  async get(tenant: string, id: string): Promise<Trigger | null> {
    const raw = await this.store.get(tenant, id);
    return raw === null ? null : Trigger.parse(JSON.parse(raw));
  }

  /** False when the tenant had none of that id. Its waiting debounce and batch jobs then start nothing. */
  delete(tenant: string, id: string): Promise<boolean> {
    return this.store.delete(tenant, id);
  }
}
