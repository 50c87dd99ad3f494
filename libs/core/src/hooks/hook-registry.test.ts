import { describe, expect, it } from 'vitest';
import { HookRegistry, bootstrapFilesOf } from './hook-registry.js';
import { loadPlugins } from './plugins.js';

const ctx = { runId: 'r', nodeId: 'n', tool: 'http', args: { url: 'https://a.example/x' } };
const mergeArgs = <C extends { args: unknown }>(c: C, r: { args?: unknown }): C =>
  r.args !== undefined ? { ...c, args: r.args } : c;

describe('HookRegistry', () => {
  it('runs modifying hooks one at a time by priority, each seeing the previous rewrite', async () => {
    const hooks = new HookRegistry();
    const seen: string[] = [];
    hooks.on(
      'before_tool_call',
      (c) => {
        seen.push(`low:${(c.args as { url: string }).url}`);
        return undefined;
      },
      { priority: 1 },
    );
    hooks.on('before_tool_call', () => ({ args: { url: 'https://b.example/y' } }), { priority: 10 });
    const { ctx: after } = await hooks.run('before_tool_call', ctx, mergeArgs);
    expect(after.args).toEqual({ url: 'https://b.example/y' });
    expect(seen).toEqual(['low:https://b.example/y']);
  });

  it('stops the chain at a block', async () => {
    const hooks = new HookRegistry();
    let later = false;
    hooks.on('before_tool_call', () => ({ block: 'no' }), { priority: 5 });
    hooks.on('before_tool_call', () => {
      later = true;
    });
    const { results } = await hooks.run('before_tool_call', ctx, mergeArgs, (r) => r.block !== undefined);
    expect(results).toEqual([{ block: 'no' }]);
    expect(later).toBe(false);
  });

  it('runs observing hooks in parallel and isolates a throwing or hanging hook', async () => {
    const hooks = new HookRegistry();
    const order: string[] = [];
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    hooks.on('agent_end', async () => {
      await gate;
      order.push('slow');
    });
    hooks.on('agent_end', () => {
      order.push('fast');
      release();
    });
    hooks.on('agent_end', () => {
      throw new Error('boom');
    });
    hooks.on('agent_end', () => new Promise<void>(() => undefined), { timeoutMs: 50 });
    await hooks.emit('agent_end', { runId: 'r', status: 'succeeded' });
    // The slow hook finished after the fast one: they ran side by side; the others were skipped.
    expect(order).toEqual(['fast', 'slow']);
  });
});

describe('agent:bootstrap and credential refreshes', () => {
  it('keeps what a bootstrap hook answers to well-formed, capped files', () => {
    expect(bootstrapFilesOf('nope', 100)).toBeUndefined();
    const files = bootstrapFilesOf([{ name: 'A.md', content: 'x'.repeat(500) }, { name: 1 }, null], 100)!;
    expect(files).toHaveLength(1);
    expect(files[0]!.content.length).toBeLessThanOrEqual(100);
  });

  it("runs plugins' refreshes in turn, the last model key answered winning", async () => {
    const registry = new HookRegistry();
    expect(registry.credentialRefresh()).toBeUndefined();
    const order: string[] = [];
    registry.onRefreshCredentials(() => {
      order.push('a');
      return { modelApiKey: 'k1' };
    });
    registry.onRefreshCredentials(() => {
      order.push('b');
      return Promise.resolve();
    });
    const refresh = registry.credentialRefresh()!;
    const error = { code: 'auth' as const, message: 'model API 401' };
    expect(await refresh({ runId: 'r', nodeId: 'n', tool: 'llm', error })).toEqual({ modelApiKey: 'k1' });
    expect(order).toEqual(['a', 'b']);
  });
});

describe('the deny-http plugin', () => {
  it('blocks http calls whose URL matches the pattern', async () => {
    const hooks = await loadPlugins(['deny-http'], { TETRALOOP_HTTP_DENY_PATTERN: '^https://evil\\.' });
    const blocked = await hooks.run(
      'before_tool_call',
      { ...ctx, args: { url: 'https://evil.example/' } },
      mergeArgs,
      (r) => !!r.block,
    );
    expect(blocked.results[0]?.block).toMatch(/deny pattern/);
    const allowed = await hooks.run('before_tool_call', ctx, mergeArgs, (r) => !!r.block);
    expect(allowed.results).toEqual([]);
  });

  it('matches the normalised host: percent-encoding, case and IDNA do not get past it', async () => {
    const hooks = await loadPlugins(['deny-http'], { TETRALOOP_HTTP_DENY_PATTERN: 'evil\\.com|bücher\\.de' });
    for (const url of [
      'https://evil%2Ecom/',
      'https://EVIL.COM/',
      'https://sub.Evil.Com:8443/x',
      'https://xn--bcher-kva.de/',
      'https://BÜCHER.de/',
    ]) {
      const r = await hooks.run('before_tool_call', { ...ctx, args: { url } }, mergeArgs, (x) => !!x.block);
      expect(r.results[0]?.block, url).toMatch(/deny pattern/);
    }
    const fine = await hooks.run(
      'before_tool_call',
      { ...ctx, args: { url: 'https://good.org/' } },
      mergeArgs,
      (x) => !!x.block,
    );
    expect(fine.results).toEqual([]);
  });

  it('runs the pattern in linear time and refuses one RE2 cannot run', async () => {
    const hooks = await loadPlugins(['deny-http'], { TETRALOOP_HTTP_DENY_PATTERN: '^https://(a+)+$' });
    const url = `https://${'a'.repeat(60)}.org/`;
    const r = await hooks.run('before_tool_call', { ...ctx, args: { url } }, mergeArgs, (x) => !!x.block);
    expect(r.results).toEqual([]);
    await expect(loadPlugins(['deny-http'], { TETRALOOP_HTTP_DENY_PATTERN: '(a)\\1' })).rejects.toThrow();
  });
});
