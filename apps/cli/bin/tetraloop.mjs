#!/usr/bin/env node
// Entry point of the `tetraloop` command. Sources are TypeScript, loaded through tsx.
import { register } from 'tsx/esm/api';

register();
// Tracing first (when OTEL_* variables ask for it), so its instrumentations see modules load.
const { startTracing } = await import('../src/tracing.ts');
// The command names the service; `--config <file>` may come before it.
const args = process.argv.slice(2);
const command = args.find((a, i) => !a.startsWith('-') && args[i - 1] !== '--config');
await startTracing(command ?? 'cli');
const { main } = await import('../src/main.ts');
await main(process.argv.slice(2));
