/**
 * `tetraloop openapi [--out <file>]`: the API's OpenAPI 3.1 document, as `GET /openapi.json` of an
 * API with the default settings serves it, without starting anything. `npm run client:generate`
 * writes it to `libs/client/openapi.json`, the client's types are generated from it.
 */
import { writeFile } from 'node:fs/promises';
import { openApiDocument } from '@tetraloop/api';

/** The document as JSON text, two-space indented, ending with a newline. */
export const openApiText = (): string => `${JSON.stringify(openApiDocument(), null, 2)}\n`;

export async function writeOpenApiDocument(out: string | undefined): Promise<void> {
  if (out === undefined) process.stdout.write(openApiText());
  else await writeFile(out, openApiText());
}
