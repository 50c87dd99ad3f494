/**
 * The builder's types: `npm run typecheck` compiles this file, so each `@ts-expect-error` below
 * is a mistake the compiler must refuse (an unused one fails the check), and each `expectTypeOf`
 * a type it must infer. Vitest runs it too; the builds at the end run for real.
 */
import { describe, expectTypeOf, it } from 'vitest';
import { z } from 'zod';
import { graph, type AnyRef, type Ref } from '../index.js';

/** Typed as `defineTool` of `@tetraloop/sdk` types a tool: `CustomTool<I, O>`, schemas `ZodType<I>`. */
const customTool = <I, O>(tool: { name: string; input: z.ZodType<I>; output: z.ZodType<O> }) => tool;

const lookupCustomer = customTool({
  name: 'crm.lookup',
  input: z.object({ email: z.string().email() }),
  output: z.object({
    name: z.string(),
    plan: z.enum(['free', 'pro']),
    address: z.object({ city: z.string() }).optional(),
    orders: z.array(z.object({ id: z.string(), total: z.number() })),
  }),
});

/** A tool-like value that is not a `defineTool` result: its schemas' own types are used. */
const sendMail = {
  name: 'mail.send',
  input: z.object({
    to: z.string(),
    subject: z.string(),
    priority: z.number().default(3),
    tags: z.array(z.string()).optional(),
  }),
  output: z.object({ messageId: z.string() }),
};

describe('the graph builder’s types', () => {
  it('types a node’s out from its tool’s output schema', () => {
    const g = graph();
    const c = g.tool('customer', lookupCustomer, { email: g.input('email') });
    expectTypeOf(c.out.name).toEqualTypeOf<Ref<string>>();
    expectTypeOf(c.out.plan).toEqualTypeOf<Ref<'free' | 'pro'>>();
    // Below an optional field a path may read nothing.
    expectTypeOf(c.out.address.city).toEqualTypeOf<Ref<string | undefined>>();
    expectTypeOf(c.out.orders[0]!.total).toEqualTypeOf<Ref<number>>();
    // @ts-expect-error: a misspelled field of the output
    void c.out.nmae;
    // @ts-expect-error: a field below a string
    void c.out.name.first;
  });

  it('types args from the tool’s input, each a value or a reference of a fitting type', () => {
    const g = graph();
    const c = g.tool('customer', lookupCustomer, { email: 'ada@example.com' });
    // A field with a default may be left out; the input schema's own input type is used.
    g.tool('mail', sendMail, { to: 'ada@example.com', subject: c.out.name });
    g.tool('mail2', sendMail, { to: c.out.name, subject: g.text`Hi ${c.out.name}`, tags: ['a', c.out.name] });
    // @ts-expect-error: a number reference where a string goes
    g.tool('mail3', sendMail, { to: c.out.orders[0]!.total, subject: 'x' });
    // @ts-expect-error: a reference that may read nothing where a string is required
    g.tool('mail4', sendMail, { to: c.out.address.city, subject: 'x' });
    // @ts-expect-error: an object reference where a string goes
    g.tool('mail5', sendMail, { to: c.out.address, subject: 'x' });
    // @ts-expect-error: a misspelled arg
    g.tool('mail6', sendMail, { to: 'a', subjct: 'x' });
    // @ts-expect-error: a required arg left out
    g.tool('mail7', sendMail, { to: 'a' });
    // @ts-expect-error: a plain value of the wrong type
    g.tool('customer2', lookupCustomer, { email: 42 });
  });

  it('types built-in tools loosely, by name', () => {
    const g = graph();
    const page = g.tool('fetch', 'http', { url: 'https://example.org' });
    // Any path; each step is read through an index signature, so with `noUncheckedIndexedAccess`
    // (this repository's setting) it may be undefined to the compiler: `!` says it is a reference.
    expectTypeOf(page.out.body!.items![3]!.title!).toEqualTypeOf<AnyRef>();
    // A loose reference fits any arg.
    g.tool('mail', sendMail, { to: page.out.body!.to!, subject: page.out.anything! });
    g.tool('mcp', 'mcp.search.query', { q: 'x' });
    // @ts-expect-error: not a built-in tool's name (a custom tool is given as its value)
    g.tool('other', 'crm.lookup', {});
  });

  it('types the run’s input when the graph is typed', () => {
    const loose = graph();
    expectTypeOf(loose.input('anything')).toEqualTypeOf<AnyRef>();
    const g = graph<{ email: string; limit?: number }>();
    expectTypeOf(g.input('email')).toEqualTypeOf<Ref<string>>();
    expectTypeOf(g.input('limit')).toEqualTypeOf<Ref<number | undefined>>();
    // @ts-expect-error: not a field of the input
    g.input('emial');
  });

  it('types llm nodes: text, or a schema’s answer as given', () => {
    const g = graph();
    const note = g.llm('note', { prompt: 'Say hi' });
    expectTypeOf(note.out.text).toEqualTypeOf<Ref<string>>();
    const loose = g.llm('json', { prompt: 'Rate it', schema: { type: 'object' } });
    expectTypeOf(loose.out.score!).toEqualTypeOf<AnyRef>();
    const typed = g.llm<{ score: number }>('typed', { prompt: 'Rate it', schema: { type: 'object' } });
    expectTypeOf(typed.out.score).toEqualTypeOf<Ref<number>>();
    // @ts-expect-error: an llm node's fields are the API's (no `promt`)
    g.llm('bad', { promt: 'x' });
    // @ts-expect-error: options the API does not have
    g.tool('t', 'json', {}, { timeout: 5 });
    g.tool('t2', 'json', {}, { timeoutMs: 5, retry: { network: 2 }, onError: 'continue', priority: 7 });
  });
});
