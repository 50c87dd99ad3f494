#!/usr/bin/env node
// Entry point of the `tetraloop` command. Sources are TypeScript, loaded through tsx.
import { register } from 'tsx/esm/api';

register();
const { main } = await import('../src/main.ts');
await main(process.argv.slice(2));
