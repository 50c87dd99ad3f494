/** Text the client commands print, pure: aligned tables and durations a person reads. */

/**
 * Rows as an aligned text table, a header first: each column as wide as its widest cell, two
 * spaces apart; the last column is not padded.
 */
export function textTable(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]): string =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd();
  return `${[header, ...rows].map(line).join('\n')}\n`;
}

/** A duration: `850ms`, `1.2s`, `2m05s`, `1h02m`; `-` for none. */
export function formatMs(ms: number | null | undefined): string {
  if (ms === null || ms === undefined || !Number.isFinite(ms)) return '-';
  const whole = Math.max(0, Math.round(ms));
  if (whole < 1000) return `${whole}ms`;
  if (whole < 60_000) return `${(whole / 1000).toFixed(1)}s`;
  const seconds = Math.floor(whole / 1000);
  if (seconds < 3600) return `${Math.floor(seconds / 60)}m${String(seconds % 60).padStart(2, '0')}s`;
  return `${Math.floor(seconds / 3600)}h${String(Math.floor((seconds % 3600) / 60)).padStart(2, '0')}m`;
}

/** Text cut to `chars`, an ellipsis marking the cut; whitespace runs become one space. */
export function cut(text: string, chars: number): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length <= chars ? flat : `${flat.slice(0, chars - 1)}…`;
}

/** An ISO time without its milliseconds, as tables show it. */
export const shortTime = (iso: string | null | undefined): string =>
  iso ? iso.replace(/\.\d+Z$/, 'Z') : '-';
