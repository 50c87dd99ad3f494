/**
 * Renders a node's prompt: `{{ref}}` placeholders are replaced by the referenced values, each cut
 * to a character budget with a marker, so one large dependency output cannot crowd out the rest.
 * Pure.
 */
import { getPath } from '../graph/references.js';

const TEMPLATE = /\{\{\s*([^{}\s]+)\s*\}\}/g;

export function truncate(text: string, maxChars: number): string {
  if (text.length <= maxChars) return text;
  const omitted = text.length - maxChars;
  return `${text.slice(0, maxChars)}…[truncated ${omitted} chars]`;
}

export function renderPrompt(
  template: string,
  scope: Readonly<Record<string, unknown>>,
  maxChars: number,
): string {
  return template.replace(TEMPLATE, (_m, expr: string) => {
    const [root = '', ...path] = expr.split('.');
    const value = getPath(scope[root], path);
    const text =
      value === undefined || value === null ? '' : typeof value === 'string' ? value : JSON.stringify(value);
    return truncate(text, maxChars);
  });
}
