/** The shape of one operation of the OpenAPI document: what a route takes and answers. */
import type { z } from 'zod';

/** A path, query or header parameter. */
export interface ParameterSpec {
  readonly schema: z.ZodType;
  readonly description: string;
  /** Query and header parameters; path parameters are always required. @defaultValue false */
  readonly required?: boolean;
}

/** A successful answer: its body (JSON by default) and the headers it sets. */
export interface AnswerSpec {
  readonly description: string;
  /** A JSON body described by this schema (named in `components.schemas`, or inline). */
  readonly json?: z.ZodType;
  /** A body of another media type, a string. */
  readonly media?:
    | 'text/event-stream'
    | 'application/x-ndjson'
    | 'text/plain'
    | 'text/html'
    | 'text/javascript'
    | 'text/css';
  /** Any JSON at all (a blob's content, the document itself). */
  readonly anyJson?: true;
  readonly headers?: Readonly<Record<string, string>>;
}

export interface OperationSpec {
  readonly summary: string;
  readonly description?: string;
  readonly tag: string;
  readonly params?: Readonly<Record<string, ParameterSpec>>;
  /** An object schema whose fields are the query parameters, with what each is for. */
  readonly query?: { readonly schema: z.ZodObject; readonly describe: Readonly<Record<string, string>> };
  readonly headers?: Readonly<Record<string, ParameterSpec>>;
  /** The JSON body the handler validates. */
  readonly body?: { readonly schema: z.ZodType; readonly required: boolean; readonly description?: string };
  readonly answers: Readonly<Record<number, AnswerSpec>>;
  /** Error codes by status, beyond those every route of its kind can answer (see `document.ts`). */
  readonly errors: Readonly<Record<number, readonly string[]>>;
}
