/** What tests read back from a stack to check what it kept: its whole keyspace, one metric. */
import type { RedisClient } from '@tetraloop/core/runtime';

/** Every key under `prefix` and its value, whatever its type, as text: what a scan for a leak reads. */
export async function keyspaceText(redis: RedisClient, prefix: string): Promise<string> {
  const parts: string[] = [];
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
    cursor = next;
    for (const key of keys) {
      const type = await redis.type(key);
      parts.push(key);
      if (type === 'string') parts.push((await redis.get(key)) ?? '');
      else if (type === 'hash') parts.push(JSON.stringify(await redis.hgetall(key)));
      else if (type === 'list') parts.push(JSON.stringify(await redis.lrange(key, 0, -1)));
      else if (type === 'set') parts.push(JSON.stringify(await redis.smembers(key)));
      else if (type === 'zset') parts.push(JSON.stringify(await redis.zrange(key, '0', '-1', 'WITHSCORES')));
      else if (type === 'stream') parts.push(JSON.stringify(await redis.xrange(key, '-', '+')));
      else parts.push(`<${type}>`);
    }
  } while (cursor !== '0');
  return parts.join('\n');
}

/** The value of one series of `/metrics` at `url` (`name{labels}`), 0 when it is not there. */
export async function metricValue(url: string, series: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line ? Number(line.split(' ')[1]) : 0;
}
