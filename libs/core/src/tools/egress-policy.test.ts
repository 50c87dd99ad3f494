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

  it.each([
    ['IPv4-compatible loopback', '::127.0.0.1'],
    ['IPv4-compatible loopback, as a URL writes it', '::7f00:1'],
    ['IPv4-compatible private', '::10.0.0.1'],
    ['IPv4-compatible metadata', '::169.254.169.254'],
    ['IPv4-compatible public (all of ::/96 is reserved)', '::8.8.8.8'],
    ['IPv4-mapped private', '::ffff:10.0.0.1'],
    ['IPv4-mapped metadata', '::ffff:a9fe:a9fe'],
    ['IPv4-translated loopback', '::ffff:0:127.0.0.1'],
    ['NAT64 loopback', '64:ff9b::127.0.0.1'],
    ['NAT64 private', '64:ff9b::10.0.0.1'],
    ['NAT64 metadata', '64:ff9b::a9fe:a9fe'],
    ['NAT64 local-use prefix', '64:ff9b:1::a00:1'],
    ['6to4 of loopback', '2002:7f00:1::1'],
    ['6to4 of a private address', '2002:c0a8:101::1'],
    ['6to4 of metadata', '2002:a9fe:a9fe::'],
    ['Teredo', '2001:0:4136:e378:8000:63bf:3fff:fdd2'],
    ['Teredo, a private client', '2001::f5ff:fffe'],
    ['reserved, outside global unicast', '::1:0:0:1'],
    ['discard-only', '100::1'],
  ])('refuses an IPv6 address that can lead to a private IPv4: %s (%s)', (_name, address) => {
    expect(isPublicAddress(address)).toBe(false);
    expect(() => checkLiteralAddress(`[${address}]`)).toThrow(/refused/);
  });

  it('refuses the IPv4-compatible loopback as a URL carries it', () => {
    const { hostname } = new URL('http://[::127.0.0.1]:8080/');
    expect(() => checkLiteralAddress(hostname)).toThrow(/refused/);
  });

  it('allows public IPv6, and a public IPv4 mapped into IPv6', () => {
    for (const a of ['2606:4700:4700::1111', '2a00:1450:4001::200e', '::ffff:8.8.8.8']) {
      expect(isPublicAddress(a), a).toBe(true);
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
