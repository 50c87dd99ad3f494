import { describe, expect, it } from 'vitest';
import { hostMatches, secretRefusal, SecretHost, SecretScope } from './secret-scope.js';

describe('a secret scope', () => {
  it.each([
    ['api.example.com', 'api.example.com', '443', true, true],
    ['api.example.com', 'api.example.com', '8443', true, true],
    // Named without a port: never in clear.
    ['api.example.com', 'api.example.com', '80', false, false],
    ['api.example.com', 'API.example.com.', '443', true, false], // hosts arrive lower case, without the dot
    ['api.example.com', 'evil.example.com', '443', true, false],
    ['api.example.com', 'api.example.com.evil.net', '443', true, false],
    ['*.example.com', 'api.example.com', '443', true, true],
    ['*.example.com', 'a.b.example.com', '443', true, true],
    ['*.example.com', 'example.com', '443', true, false],
    ['*.example.com', 'badexample.com', '443', true, false],
    ['api.example.com:8443', 'api.example.com', '8443', true, true],
    ['api.example.com:8443', 'api.example.com', '443', true, false],
    ['127.0.0.1:4000', '127.0.0.1', '4000', false, true],
    ['[::1]:4000', '::1', '4000', false, true],
    ['[::1]', '::1', '9', true, true],
    ['*', 'anything.example', '1', false, true],
  ])('%s admits %s:%s (tls: %s) → %s', (entry, host, port, secure, admitted) => {
    expect(hostMatches(entry, host, port, secure)).toBe(admitted);
  });

  it('lets a secret go only to an allowed host, or to a tool it names', () => {
    const scope = SecretScope.parse({ hosts: ['api.example.com'], tools: ['mcp.crm.lookup'] });
    const to = (url: string) => ({ tool: 'http', url: new URL(url) });
    expect(secretRefusal('T', scope, to('https://api.example.com/x?y=1'))).toBeUndefined();
    expect(secretRefusal('T', scope, to('https://api.example.com:443/'))).toBeUndefined();
    expect(secretRefusal('T', scope, to('http://api.example.com/'))).toMatch(/admits https only/);
    expect(secretRefusal('T', scope, to('https://127.0.0.1:4000/steal'))).toMatch(
      /secret "T" may not be sent to https:\/\/127\.0\.0\.1:4000 \(its hosts: api\.example\.com;/,
    );
    expect(secretRefusal('T', scope, { tool: 'mcp.crm.lookup' })).toBeUndefined();
    expect(secretRefusal('T', scope, { tool: 'json' })).toMatch(/may not be given to tool "json"/);
    // A tool that reaches a URL is decided by hosts alone, whatever `tools` says.
    const anyTool = SecretScope.parse({ tools: ['mcp.crm.lookup'] });
    expect(secretRefusal('T', anyTool, to('https://api.example.com/'))).toMatch(/its hosts: none/);
  });

  it('takes hosts as names, wildcards, addresses and "*", and nothing else', () => {
    for (const ok of [
      'api.example.com',
      '*.example.com',
      '10.0.0.1:8080',
      '[::1]:80',
      '*',
      'Api.Example.com',
    ])
      expect(SecretHost.safeParse(ok).success, ok).toBe(true);
    for (const bad of ['', 'https://api.example.com', 'api.example.com/path', '*.*.com', 'a b', 'api.*.com'])
      expect(SecretHost.safeParse(bad).success, bad).toBe(false);
    expect(SecretScope.safeParse({ tools: ['http'] }).success).toBe(false);
  });
});
