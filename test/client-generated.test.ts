/**
 * The client's generated files never drift from the API: `libs/client/openapi.json` is the
 * document the API's schemas give now, and `libs/client/src/generated/openapi.ts` is what
 * openapi-typescript makes of it. When a schema, a route or an answer changes, this fails until
 * `npm run client:generate` is run and its output committed.
 */
import { readFileSync } from 'node:fs';
import { expect, it } from 'vitest';
import { openApiDocument } from '@tetraloop/api';
import { DOCUMENT_FILE, TYPES_FILE, typesOf } from '../libs/client/scripts/generate-types.js';

const STALE = 'stale: run `npm run client:generate` and commit what it writes';

it('the checked-in document is the one the API generates', () => {
  const checkedIn = JSON.parse(readFileSync(DOCUMENT_FILE, 'utf8')) as unknown;
  expect(checkedIn, `libs/client/openapi.json is ${STALE}`).toEqual(
    JSON.parse(JSON.stringify(openApiDocument())),
  );
});

it('the checked-in types are the ones generated from that document', async () => {
  const document = JSON.parse(readFileSync(DOCUMENT_FILE, 'utf8')) as object;
  const types = await typesOf(document);
  expect(readFileSync(TYPES_FILE, 'utf8') === types, `libs/client/src/generated/openapi.ts is ${STALE}`).toBe(
    true,
  );
});
