/**
 * Holds real answers to the OpenAPI document: finds the operation a request went to, checks that
 * the status and media type are documented for it, and validates the body against the documented
 * schema with ajv (draft 2020-12, the dialect of OpenAPI 3.1). Keeps which operation answered
 * which status, so a test can ask that every operation was seen.
 */
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';

type Json = Record<string, unknown>;

const DOC_ID = 'https://tetraloop.test/openapi.json';
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** A JSON pointer into the document, as a URI fragment. */
const pointer = (parts: readonly string[]): string =>
  parts.map((p) => encodeURIComponent(p.replace(/~/g, '~0').replace(/\//g, '~1'))).join('/');

export interface Located {
  readonly template: string;
  readonly method: string;
  readonly operation: Json;
}

export interface Answer {
  readonly status: number;
  readonly headers: Headers;
  /** The body: parsed JSON for a JSON media type (null when empty), its text otherwise. */
  readonly body: unknown;
  readonly text: string;
}

export class Contract {
  private readonly ajv = new Ajv2020({
    strict: false,
    allErrors: true,
    formats: { uuid: UUID, 'date-time': true },
  });
  private readonly templates: { regex: RegExp; template: string }[];
  /** `operationId status` of every answer checked. */
  readonly seen = new Set<string>();

  constructor(readonly document: Json) {
    this.ajv.addSchema({ ...document, $id: DOC_ID });
    this.templates = Object.keys(document.paths as Json).map((template) => ({
      template,
      regex: new RegExp(`^${template.replace(/\{[^}]+\}/g, '[^/]+')}$`),
    }));
  }

  /** The operation documented for a request to `path` (without its query) with `method`. */
  locate(method: string, path: string): Located {
    const found = this.templates.find((t) => t.regex.test(path));
    if (!found) throw new Error(`${method.toUpperCase()} ${path}: no documented path matches`);
    const operation = (this.document.paths as Record<string, Json>)[found.template]![method.toLowerCase()];
    if (!operation) throw new Error(`${method.toUpperCase()} ${found.template}: no documented operation`);
    return { template: found.template, method: method.toLowerCase(), operation: operation as Json };
  }

  /** The validator of a documented schema, by its pointer into the document. */
  schemaAt(parts: readonly string[]): ValidateFunction {
    const validate = this.ajv.getSchema(`${DOC_ID}#/${pointer(parts)}`);
    if (!validate) throw new Error(`no schema at ${parts.join(' / ')}`);
    return validate;
  }

  /** A named component's validator. */
  component(name: string): ValidateFunction {
    return this.schemaAt(['components', 'schemas', name]);
  }

  /** Throws, saying what differs, unless `value` fits the component `name`. */
  expectComponent(name: string, value: unknown, what = name): void {
    const validate = this.component(name);
    if (!validate(value)) {
      throw new Error(
        `${what} does not match ${name}: ${this.ajv.errorsText(validate.errors)}\n${JSON.stringify(value).slice(0, 2000)}`,
      );
    }
  }

  /**
   * Throws unless the answer is documented for the request: its status is one of the operation's
   * responses, its media type is the documented one, and its body fits the documented schema.
   */
  check(method: string, path: string, answer: Answer): void {
    const { template, operation } = this.locate(method, path);
    const where = `${method.toUpperCase()} ${path} → ${answer.status}`;
    const responses = operation.responses as Record<string, Json>;
    const response = responses[String(answer.status)];
    if (!response) {
      throw new Error(
        `${where}: status not documented (documented: ${Object.keys(responses).join(', ')}); body ${answer.text.slice(0, 500)}`,
      );
    }
    this.seen.add(`${operation.operationId as string} ${answer.status}`);
    const content = response.content as Record<string, Json> | undefined;
    if (!content) {
      if (answer.text !== '') throw new Error(`${where}: documented without a body, answered ${answer.text}`);
      return;
    }
    const media = (answer.headers.get('content-type') ?? '').split(';')[0]!.trim();
    if (!(media in content)) {
      throw new Error(`${where}: media type ${media}, documented ${Object.keys(content).join(', ')}`);
    }
    const validate = this.schemaAt([
      'paths',
      template,
      method.toLowerCase(),
      'responses',
      String(answer.status),
      'content',
      media,
      'schema',
    ]);
    if (!validate(answer.body)) {
      throw new Error(
        `${where}: body does not match the documented schema: ${this.ajv.errorsText(validate.errors)}\n${answer.text.slice(0, 2000)}`,
      );
    }
  }

  /** Every `operationId` of the document. */
  operationIds(): string[] {
    return Object.values(this.document.paths as Record<string, Record<string, Json>>).flatMap((item) =>
      Object.values(item).map((op) => op.operationId as string),
    );
  }
}

/** Reads a whole answer: its body parsed when it is JSON, else its text. */
export async function readAnswer(res: Response): Promise<Answer> {
  const text = await res.text();
  const media = (res.headers.get('content-type') ?? '').split(';')[0]!.trim();
  const json = media === 'application/json' || media.endsWith('+json');
  const body: unknown = !json ? text : text === '' ? null : JSON.parse(text);
  return { status: res.status, headers: res.headers, text, body };
}
