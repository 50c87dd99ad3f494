import { describe, expect, it } from 'vitest';
import { OpenSlots } from './open-slots.js';

describe('OpenSlots', () => {
  it('refuses past the tenant cap, then past the process cap, and frees a slot once on release', () => {
    const slots = new OpenSlots({ perProcess: 3, perTenant: 2 });
    const a1 = slots.take('a');
    const a2 = slots.take('a');
    expect(a1.ok && a2.ok).toBe(true);
    expect(slots.take('a')).toEqual({ ok: false, scope: 'tenant', limit: 2 });
    const b1 = slots.take('b');
    expect(b1.ok).toBe(true);
    expect(slots.take('c')).toEqual({ ok: false, scope: 'process', limit: 3 });
    // A tenant at its own cap hears about its cap even when the process is full.
    expect(slots.take('a')).toMatchObject({ scope: 'tenant' });
    if (!a1.ok) throw new Error('unreachable');
    a1.release();
    a1.release();
    expect(slots.held()).toBe(2);
    expect(slots.held('a')).toBe(1);
    expect(slots.take('c').ok).toBe(true);
    expect(slots.take('c')).toMatchObject({ ok: false, scope: 'process' });
  });

  it('forgets a tenant that holds nothing', () => {
    const slots = new OpenSlots({ perProcess: 10, perTenant: 1 });
    const grant = slots.take('t');
    if (!grant.ok) throw new Error('refused');
    grant.release();
    expect(slots.held('t')).toBe(0);
    expect(slots.held()).toBe(0);
    expect(slots.take('t').ok).toBe(true);
  });
});
