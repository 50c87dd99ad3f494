/**
 * A map node's items as the run page shows them (pure): its progress from the run document (the
 * `map` field of its node, `{done, failed, running, total}`, which the API keeps as its items
 * settle and announces in `map.progress` events), as the bar its box in the graph carries; and
 * which items a page of the items table holds.
 */
import type { NodeView } from '@tetraloop/client';
import type { NodeProgress } from './node-progress.js';

export type MapProgress = NonNullable<NodeView['map']>;

/** Items a page of the items table shows. */
export const ITEMS_PAGE_SIZE = 20;

/** A map node's progress, when the node is a map that started its items. */
export const mapProgressOf = (node: { readonly map?: MapProgress } | undefined): MapProgress | undefined =>
  node?.map;

/** `7 of 12 done · 1 failed · 3 running`: the counts that are not 0 beside done. */
export function mapProgressText(p: MapProgress): string {
  return [
    `${p.done} of ${p.total} done`,
    p.failed > 0 ? `${p.failed} failed` : '',
    p.running > 0 ? `${p.running} running` : '',
  ]
    .filter(Boolean)
    .join(' · ');
}

/** The bar of a map's box in the graph: the fraction of its items done (a map of none is done). */
export const mapBar = (p: MapProgress): NodeProgress => ({
  fraction: p.total === 0 ? 1 : p.done / p.total,
  message: mapProgressText(p),
});

/** The item indices of page `page` (from 0) of a list of `total`, and the last page there is. */
export function itemsPage(
  total: number,
  page: number,
): { indices: number[]; page: number; lastPage: number } {
  const lastPage = Math.max(0, Math.ceil(total / ITEMS_PAGE_SIZE) - 1);
  const at = Math.min(Math.max(0, page), lastPage);
  const from = at * ITEMS_PAGE_SIZE;
  const count = Math.max(0, Math.min(ITEMS_PAGE_SIZE, total - from));
  return { indices: Array.from({ length: count }, (_, i) => from + i), page: at, lastPage };
}
