/**
 * The settings the CLI itself reads: where its client commands find the API, which config file
 * to read, and the OpenTelemetry variables that turn tracing on (read before anything else loads,
 * so from the environment only).
 */
import { setting, type Settings } from '@tetraloop/core/config';
import { z } from 'zod';

const optionalText = z
  .string()
  .optional()
  .transform((v) => (v === '' ? undefined : v));

export const CLI_SETTINGS = {
  TETRALOOP_CONFIG: setting({
    group: 'process',
    file: '',
    readBy: ['api', 'workers', 'dev', 'client'],
    doc: 'A config file (YAML) holding these settings in groups (`tetraloop.example.yaml`); `--config <file>` on any command says the same. A variable set in the environment wins over the file.',
    schema: optionalText,
  }),
  TETRALOOP_API_URL: setting({
    group: 'client',
    file: 'client.apiUrl',
    readBy: ['client'],
    doc: 'The API the client commands (`run`, `runs`, `explain`, `agent`, `lessons`, `mcp`, `keys` with the root token) talk to.',
    schema: z.url().default('http://localhost:3000'),
  }),
  TETRALOOP_API_KEY: setting({
    group: 'client',
    file: 'client.apiKey',
    readBy: ['client'],
    secret: true,
    doc: "The client commands' bearer key (`tl_…`), when the API requires one.",
    schema: optionalText,
  }),
  OTEL_EXPORTER_OTLP_ENDPOINT: setting({
    group: 'tracing',
    file: '',
    readBy: ['api', 'workers', 'dev'],
    doc: 'Set: spans and the GenAI client metrics go over OTLP/HTTP to this collector (environment only: tracing starts before the config file is read).',
    schema: optionalText,
  }),
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: setting({
    group: 'tracing',
    file: '',
    readBy: ['api', 'workers', 'dev'],
    doc: 'As `OTEL_EXPORTER_OTLP_ENDPOINT`, for traces only.',
    schema: optionalText,
  }),
  OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: setting({
    group: 'tracing',
    file: '',
    readBy: ['api', 'workers', 'dev'],
    doc: 'As `OTEL_EXPORTER_OTLP_ENDPOINT`, for metrics only (`gen_ai.client.token.usage`, `gen_ai.client.operation.duration`).',
    schema: optionalText,
  }),
  OTEL_METRICS_EXPORTER: setting({
    group: 'tracing',
    file: '',
    readBy: ['api', 'workers', 'dev'],
    doc: '`none` turns the OTLP metrics off whatever the endpoint.',
    schema: optionalText,
  }),
  OTEL_METRIC_EXPORT_INTERVAL: setting({
    group: 'tracing',
    file: '',
    readBy: ['api', 'workers', 'dev'],
    defaultText: '60000',
    doc: 'Milliseconds between two OTLP exports of the metrics.',
    schema: optionalText,
  }),
  OTEL_TRACES_EXPORTER: setting({
    group: 'tracing',
    file: '',
    readBy: ['api', 'workers', 'dev'],
    doc: '`none` turns tracing off whatever the endpoint.',
    schema: optionalText,
  }),
  OTEL_SDK_DISABLED: setting({
    group: 'tracing',
    file: '',
    readBy: ['api', 'workers', 'dev'],
    doc: '`true` turns tracing and the OTLP metrics off whatever the endpoint.',
    schema: optionalText,
  }),
  OTEL_SERVICE_NAME: setting({
    group: 'tracing',
    file: '',
    readBy: ['api', 'workers', 'dev'],
    defaultText: 'tetraloop-<command>',
    doc: "The spans' and metrics' `service.name`.",
    schema: optionalText,
  }),
  OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: setting({
    group: 'tracing',
    file: '',
    readBy: ['api', 'workers', 'dev'],
    doc: '`true` lets spans carry prompts and completions (GenAI content attributes); unset: they never do.',
    schema: optionalText,
  }),
} satisfies Settings;
