/**
 * Caps on long requests held open at once (event streams, waits): one per process and one per
 * tenant, counted in the memory of one process. Pure: no I/O; the API takes a slot when such a
 * request starts and gives it back when it ends. A per-tenant cap is per process: with several
 * API processes a tenant may hold that many in each.
 */

/** Which cap refused a slot: the process's (all tenants together) or the tenant's own. */
export type SlotScope = 'process' | 'tenant';

export interface SlotLimits {
  /** Slots held at once in this process. */
  readonly perProcess: number;
  /** Slots one tenant holds at once in this process. */
  readonly perTenant: number;
}

export type SlotGrant =
  | { readonly ok: true; readonly release: () => void }
  | { readonly ok: false; readonly scope: SlotScope; readonly limit: number };

export class OpenSlots {
  private total = 0;
  private readonly byTenant = new Map<string, number>();

  constructor(readonly limits: SlotLimits) {}

  /** Slots held now, in all or by one tenant. */
  held(tenant?: string): number {
    return tenant === undefined ? this.total : (this.byTenant.get(tenant) ?? 0);
  }

  /**
   * Takes a slot for `tenant`, or says which cap is full (the tenant's first: a tenant at its own
   * cap is told so even when the process is full too). `release` gives it back, once.
   */
  take(tenant: string): SlotGrant {
    const mine = this.held(tenant);
    if (mine >= this.limits.perTenant) return { ok: false, scope: 'tenant', limit: this.limits.perTenant };
    if (this.total >= this.limits.perProcess) {
      return { ok: false, scope: 'process', limit: this.limits.perProcess };
    }
    this.total += 1;
    this.byTenant.set(tenant, mine + 1);
    let released = false;
    return {
      ok: true,
      release: () => {
        if (released) return;
        released = true;
        this.total -= 1;
        const left = this.held(tenant) - 1;
        if (left > 0) this.byTenant.set(tenant, left);
        else this.byTenant.delete(tenant);
      },
    };
  }
}
