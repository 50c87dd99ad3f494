import { describe, expect, it } from 'vitest';
import { checkLiteralAddress, isAllowlisted, isPublicAddress, parseAllowHosts } from './egress-policy.js';

describe('egress policy', () => {
  it('classifies addresses', () => {
    for (const a of ['8.8.8.8', '2001:4860::1']) expect(isPublicAddress(a)).toBe(true);
    for (const a of [
      '127.0.0.1',
      '10.0.0.1',
      '192.168.1.1',
      '169.254.169.254',
      '::1',
      '::ffff:127.0.0.1',
      'fd00:ec2::254',
      '0.0.0.0',
      '100.100.100.200',
    ]) {
      expect(isPublicAddress(a), a).toBe(false);
    }
  });

  it('matches allowlist entries by host or host:port', () => {
    const policy = parseAllowHosts(' LocalHost:3000, 10.0.0.5 ,[::1]:8080');
    expect(isAllowlisted(policy, 'localhost', '3000')).toBe(true);
    expect(isAllowlisted(policy, 'localhost', '3001')).toBe(false);
    expect(isAllowlisted(policy, '10.0.0.5', '443')).toBe(true);
    expect(isAllowlisted(policy, '[::1]', '8080')).toBe(true);
  });

  it('refuses private IP literals', () => {
    expect(() => checkLiteralAddress('169.254.169.254')).toThrow(/refused/);
    expect(() => checkLiteralAddress('[::1]')).toThrow(/refused/);
    expect(() => checkLiteralAddress('93.184.215.14')).not.toThrow();
  });
});
