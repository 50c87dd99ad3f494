import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  ToolDefinitionError,
  defineCustomTool,
  queueOfTool,
  type CustomToolDefinition,
} from './custom-tool.js';

const valid: CustomToolDefinition<{ email: string }, { id: string }> = {
  name: 'crm.lookup',
  description: 'Find a customer',
  input: z.object({ email: z.string() }),
  output: z.object({ id: z.string() }),
  run: () => ({ id: 'c-1' }),
};

const refusal = (patch: Record<string, unknown>): ToolDefinitionError => {
  try {
    defineCustomTool({ ...valid, ...patch });
  } catch (err) {
    if (err instanceof ToolDefinitionError) return err;
    throw err;
  }
  throw new Error('accepted');
};

describe('defineCustomTool', () => {
  it('describes the tool for the catalog: JSON Schemas, queue, version, a hash of the schemas', () => {
    const tool = defineCustomTool({
      ...valid,
      queue: 'crm',
      version: '3',
      retry: { server: 3 },
      secrets: ['T'],
    });
    expect(tool.custom).toMatchObject({
      name: 'crm.lookup',
      queue: 'crm',
      version: '3',
      retry: { server: 3 },
      secrets: ['T'],
    });
    expect(tool.custom.inputSchema).toMatchObject({
      type: 'object',
      properties: { email: { type: 'string' } },
    });
    expect(tool.custom.outputSchema).toMatchObject({ properties: { id: { type: 'string' } } });
    expect(tool.custom.schemaHash).toMatch(/^[0-9a-f]{12}$/);
    expect(queueOfTool(tool)).toBe('crm');
    expect(queueOfTool(defineCustomTool(valid))).toBe('default');
    // The same schemas hash alike across versions; another output does not.
    expect(defineCustomTool({ ...valid, version: '4' }).custom.schemaHash).toBe(
      defineCustomTool(valid).custom.schemaHash,
    );
    expect(
      defineCustomTool({ ...valid, output: z.object({ id: z.number() }), run: () => ({ id: 1 }) }).custom
        .schemaHash,
    ).not.toBe(defineCustomTool(valid).custom.schemaHash);
  });

  it('refuses each wrong field, naming it', () => {
    expect(refusal({ name: 'Bad Name' }).field).toBe('name');
    expect(refusal({ name: 'http' }).message).toContain('built-in');
    expect(refusal({ name: 'mcp.fs.read' }).field).toBe('name');
    expect(refusal({ description: '' }).field).toBe('description');
    expect(refusal({ input: { parse: () => 1 } }).field).toBe('input');
    expect(refusal({ output: undefined }).field).toBe('output');
    expect(refusal({ run: 'no' }).field).toBe('run');
    expect(refusal({ queue: 'CRM!' }).field).toBe('queue');
    expect(refusal({ timeoutMs: 0 }).field).toBe('timeoutMs');
    expect(refusal({ concurrency: 1.5 }).field).toBe('concurrency');
    expect(refusal({ retry: { auth: 1 } }).field).toBe('retry.auth');
    expect(refusal({ retry: { server: 11 } }).field).toBe('retry.server');
    expect(refusal({ secrets: [''] }).field).toBe('secrets');
    expect(refusal({ name: 'http' }).message).toMatch(/^tool "http": name/);
  });
});
