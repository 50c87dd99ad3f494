/**
 * Caps on the long requests of one API process: open event streams (`GET /v1/runs/:id/events`)
 * and waits (`GET /v1/runs/:id/wait`), per process and per tenant, counted in this process
 * (`OpenSlots`). Past the tenant's cap: `429`; past the process's: `503`; both with `Retry-After`.
 */
import type { Response } from 'express';
import { OpenSlots, type SlotLimits } from '@tetraloop/core/ceilings';
import { metrics } from '@tetraloop/core/telemetry';
import { callerOf } from './auth.js';
import { HttpError } from './http-errors.js';

export type LongRequestKind = 'events' | 'wait';

/** Seconds a refused client is asked to wait: long requests end on their own within seconds or minutes. */
export const LONG_REQUEST_RETRY_AFTER_SECONDS = 5;

export interface LongRequestLimits {
  readonly events: SlotLimits;
  readonly wait: SlotLimits;
}

const NAMES: Record<LongRequestKind, { what: string; tenant: string; process: string }> = {
  events: { what: 'event streams', tenant: 'too_many_streams', process: 'streams_at_capacity' },
  wait: { what: 'waits', tenant: 'too_many_waits', process: 'waits_at_capacity' },
};

export class LongRequests {
  private readonly slots: Record<LongRequestKind, OpenSlots>;

  constructor(limits: LongRequestLimits) {
    this.slots = { events: new OpenSlots(limits.events), wait: new OpenSlots(limits.wait) };
    // Both series exist from the start (at 0); several APIs in one process share the gauge.
    for (const kind of Object.keys(this.slots) as LongRequestKind[])
      metrics.longRequestsOpen.inc({ kind }, 0);
  }

  /** Held now, in all or by one tenant. */
  held(kind: LongRequestKind, tenant?: string): number {
    return this.slots[kind].held(tenant);
  }

  /**
   * Takes a slot for the caller of `res`, given back by the function it returns or when the
   * response closes, whichever comes first; throws the `429`/`503` (with `Retry-After` set on
   * `res`) when a cap is full.
   */
  admit(kind: LongRequestKind, res: Response): () => void {
    try {
      const release = this.hold(kind, callerOf(res).tenant);
      res.on('close', release);
      return release;
    } catch (err) {
      if (err instanceof HttpError) res.set('Retry-After', String(LONG_REQUEST_RETRY_AFTER_SECONDS));
      throw err;
    }
  }

  /**
   * Takes a slot for `tenant`, given back by the function it returns (once, however often it is
   * called); throws the `429`/`503` when a cap is full. For a long wait inside a request that is
   * not one of its own (an MCP tool call): `admit` is for a whole request.
   */
  hold(kind: LongRequestKind, tenant: string): () => void {
    const grant = this.slots[kind].take(tenant);
    const names = NAMES[kind];
    if (!grant.ok) {
      metrics.longRequestsRefused.inc({ kind, scope: grant.scope });
      throw grant.scope === 'tenant'
        ? new HttpError(
            429,
            names.tenant,
            `tenant "${tenant}" has ${grant.limit} ${names.what} open on this API process, its most; close one or retry in ${LONG_REQUEST_RETRY_AFTER_SECONDS} s`,
          )
        : new HttpError(
            503,
            names.process,
            `this API process holds ${grant.limit} ${names.what}, its most; retry in ${LONG_REQUEST_RETRY_AFTER_SECONDS} s`,
          );
    }
    metrics.longRequestsOpen.inc({ kind });
    let held = true;
    return (): void => {
      if (!held) return;
      held = false;
      grant.release();
      metrics.longRequestsOpen.dec({ kind });
    };
  }
}
