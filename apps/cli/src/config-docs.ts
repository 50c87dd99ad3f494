/** `docs/configuration.md`, generated from the settings catalog (`npm run docs:config`). Pure. */
import { defaultOf, type Setting } from '@tetraloop/core/config';
import { GROUP_ORDER } from './settings-catalog.js';

const cell = (text: string): string => text.replace(/\|/g, '\\|').replace(/\n/g, ' ');

function readers(s: Setting): string {
  const who = s.readBy.map((r) => (r === 'workers' && s.pools ? `workers (${s.pools.join(', ')})` : r));
  return who.join(', ');
}

/** The reference: every setting by group, with its default, its config file key and its readers. */
export function configurationDoc(catalog: ReadonlyMap<string, Setting>): string {
  const groups = new Map<string, [string, Setting][]>();
  for (const [name, s] of catalog) groups.set(s.group, [...(groups.get(s.group) ?? []), [name, s]]);
  const ordered = [
    ...GROUP_ORDER.filter((g) => groups.has(g)),
    ...[...groups.keys()].filter((g) => !(GROUP_ORDER as readonly string[]).includes(g)).sort(),
  ];
  const out: string[] = [
    '# Configuration',
    '',
    '<!-- Generated from the settings catalog by `npm run docs:config`; a test fails when it is stale. Edit the catalog, not this file. -->',
    '',
    `Every setting Tetraloop reads, ${catalog.size} in all, by group. Each is an environment variable and,`,
    'where the **file** column names a key, a key of the config file (`TETRALOOP_CONFIG=./tetraloop.yaml`',
    'or `--config` on any command; see `tetraloop.example.yaml`). A variable set in the environment wins',
    'over the file. **Read by** says which processes parse it: `api`, `workers` (with the pools that use it',
    "when not all), `dev` (`tetraloop dev` itself) and `client` (the CLI's client commands). A bad value",
    'stops the process at start, naming the variable (and the file and line it came from);',
    '`tetraloop config check` checks the whole configuration without starting anything, and',
    '`tetraloop config print` shows the effective settings and where each came from. A `TETRALOOP_*`',
    'variable that is not below is named in a warning at start, with the closest setting.',
    '',
    '## Contents',
    '',
    ...ordered.map((g) => `- [${g[0]!.toUpperCase()}${g.slice(1)}](#${g.replace(/ /g, '-')})`),
  ];
  for (const group of ordered) {
    out.push(
      '',
      `## ${group[0]!.toUpperCase()}${group.slice(1)}`,
      '',
      '| setting | default | file | read by | |',
      '|---|---|---|---|---|',
    );
    for (const [name, s] of groups.get(group)!.sort(([a], [b]) => (a < b ? -1 : 1))) {
      const d = defaultOf(s);
      const shown = d === undefined ? 'unset' : d === '' ? '(empty)' : `\`${cell(d)}\``;
      const file = s.file === '' ? 'environment only' : `\`${s.file}\``;
      out.push(
        `| \`${name}\` | ${shown} | ${file} | ${readers(s)} | ${cell(s.doc)}${s.secret ? ' (secret: masked by `config print`)' : ''} |`,
      );
    }
  }
  return `${out.join('\n')}\n`;
}
