/**
 * Two custom tools, served by a worker process started with this module:
 *
 *   tetraloop worker --pool tool --tools ./examples/custom-tools/tools.ts --queues crm,default
 *
 * `crm.lookup` calls the loopback CRM (crm-server.ts at CRM_URL) with the secret CRM_TOKEN, on a
 * queue of its own (`crm`); `text.slug` is pure code on the shared node queue (`default`).
 */
import { z } from 'zod';
import { ToolError, defineTool } from '@tetraloop/sdk';

const crmUrl = (): string => process.env.CRM_URL ?? 'http://127.0.0.1:4100';

const Customer = z.object({
  id: z.string(),
  name: z.string(),
  plan: z.enum(['free', 'pro']),
  since: z.string(),
});

export const lookupCustomer = defineTool({
  name: 'crm.lookup',
  description: "Find a customer in the CRM by e-mail address: the customer's id, name, plan and start date",
  input: z.object({ email: z.email() }),
  output: Customer,
  queue: 'crm',
  version: '1',
  timeoutMs: 5_000,
  // The CRM's 5xx and 429 are worth retrying; a node's own `retry` still wins.
  retry: { server: 3, rate_limited: 5 },
  concurrency: 8,
  secrets: ['CRM_TOKEN'],
  async run(input, ctx) {
    const token = await ctx.secret('CRM_TOKEN');
    const res = await fetch(`${crmUrl()}/customers?email=${encodeURIComponent(input.email)}`, {
      headers: { authorization: `Bearer ${token}`, 'idempotency-key': ctx.idempotencyKey },
      signal: ctx.signal,
    });
    // Each failure gets the class that decides whether it is retried.
    if (res.status === 401 || res.status === 403)
      throw new ToolError('auth', `the CRM refused the token (${res.status})`, { status: res.status });
    if (res.status === 404)
      throw new ToolError('validation', `no customer with e-mail ${input.email}`, { status: 404 });
    if (res.status === 429) {
      const seconds = Number(res.headers.get('retry-after'));
      throw new ToolError('rate_limited', 'the CRM is busy', {
        status: 429,
        ...(Number.isFinite(seconds) && seconds > 0 ? { retryAfterMs: seconds * 1000 } : {}),
      });
    }
    if (res.status >= 500)
      throw new ToolError('server', `the CRM answered ${res.status}`, { status: res.status });
    ctx.progress(1, 'customer found');
    ctx.log.info({ attempt: ctx.attempt }, 'crm lookup');
    // The harness checks what `run` answers against `output` (a wrong shape fails `validation`).
    return (await res.json()) as z.infer<typeof Customer>;
  },
});

export const slug = defineTool({
  name: 'text.slug',
  description:
    'Make a URL slug of a text: lower-case ASCII words joined by dashes, at most maxLength characters',
  input: z.object({ text: z.string().max(2_000), maxLength: z.number().int().min(8).max(200).optional() }),
  output: z.object({ slug: z.string() }),
  run(input) {
    const words = input.text
      .normalize('NFKD')
      .replace(/[\u0300-\u036f]/g, '')
      .toLowerCase()
      .split(/[^a-z0-9]+/)
      .filter((w) => w !== '');
    let out = '';
    for (const word of words) {
      const next = out === '' ? word : `${out}-${word}`;
      if (next.length > (input.maxLength ?? 60)) break;
      out = next;
    }
    return { slug: out };
  },
});
