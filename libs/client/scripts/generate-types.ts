/**
 * The client's types, `src/generated/openapi.ts`, generated from the API's OpenAPI document
 * (`openapi.json`, written by `tetraloop openapi`) with openapi-typescript. `npm run
 * client:generate` writes both; `test/client-generated.test.ts` fails when the checked-in files are
 * not what the API's current schemas give, so they never drift.
 */
import { writeFile, readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import openapiTS, { COMMENT_HEADER, astToString, type OpenAPI3 } from 'openapi-typescript';

export const DOCUMENT_FILE = fileURLToPath(new URL('../openapi.json', import.meta.url));
export const TYPES_FILE = fileURLToPath(new URL('../src/generated/openapi.ts', import.meta.url));

/** The TypeScript of `document`'s paths, operations and components. */
export async function typesOf(document: object): Promise<string> {
  // A field with a default is optional in a request: the API fills it in.
  const ast = await openapiTS(document as OpenAPI3, { silent: true, defaultNonNullable: false });
  return COMMENT_HEADER + astToString(ast);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const document = JSON.parse(await readFile(DOCUMENT_FILE, 'utf8')) as object;
  await writeFile(TYPES_FILE, await typesOf(document));
}
