import { describe, expect, it } from 'vitest';
import { parseAllowHosts } from './egress-policy.js';
import { httpTool, isCredentialHeader } from './http-tool.js';

describe('the http tool', () => {
  it('knows credential headers in any case, but not Idempotency-Key', () => {
    for (const name of ['Authorization', 'COOKIE', 'proxy-authorization', 'X-Api-Key', 'x-auth-token'])
      expect(isCredentialHeader(name), name).toBe(true);
    for (const name of ['Accept', 'Idempotency-Key', 'X-Keyboard', 'Tokens'])
      expect(isCredentialHeader(name), name).toBe(false);
  });

  it('refuses a credential header in clear, allows $secret and references', () => {
    const tool = httpTool(parseAllowHosts(''));
    expect(
      tool.checkArgs?.({
        url: 'https://x.org',
        headers: {
          Authorization: 'Bearer abc',
          'X-Api-Key': { $secret: 'KEY' },
          'X-Session-Token': '{{login.output.body.token}}',
          Cookie: { $ref: 'login.output.body.cookie' },
        },
      }),
    ).toEqual([{ at: ['headers', 'Authorization'], message: expect.stringContaining('$secret') }]);
  });
});
