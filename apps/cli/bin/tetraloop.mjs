#!/usr/bin/env node
// Entry point of the `tetraloop` command. Sources are TypeScript, loaded through tsx.
import { register } from 'tsx/esm/api';

register();
// Tracing first (when OTEL_* variables ask for it), so its instrumentations see modules load.
const { startTracing } = await import('../src/tracing.ts');
await startTracing(process.argv[2] === 'worker' ? 'worker' : (process.argv[2] ?? 'cli'));
const { main } = await import('../src/main.ts');
await main(process.argv.slice(2));
