import { expect, it } from 'vitest';
import { containerName, mappedPort } from './redis-container.js';

it('names a container after its data directory, the same for the same directory however written', () => {
  expect(containerName('/srv/app/.tetraloop/redis')).toMatch(/^tetraloop-redis-[0-9a-f]{12}$/);
  expect(containerName('/srv/app/.tetraloop/redis')).toBe(
    containerName('/srv/app/.tetraloop/../.tetraloop/redis'),
  );
  expect(containerName('/srv/app/.tetraloop/redis')).not.toBe(containerName('/srv/other/.tetraloop/redis'));
});

it("reads the host port from docker port's answer, one line per address", () => {
  expect(mappedPort('127.0.0.1:49153\n')).toBe(49153);
  expect(mappedPort('0.0.0.0:32768\n[::]:32768\n')).toBe(32768);
  expect(mappedPort('')).toBeUndefined();
});
