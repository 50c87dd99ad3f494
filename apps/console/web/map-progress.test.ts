import { describe, expect, it } from 'vitest';
import { ITEMS_PAGE_SIZE, itemsPage, mapBar, mapProgressText } from './map-progress.js';

describe('map progress', () => {
  it('says done of total, and failed and running only when there are some', () => {
    expect(mapProgressText({ done: 7, failed: 1, running: 3, total: 12 })).toBe(
      '7 of 12 done · 1 failed · 3 running',
    );
    expect(mapProgressText({ done: 12, failed: 0, running: 0, total: 12 })).toBe('12 of 12 done');
  });

  it('fills the bar by the items done; a map of no items is full', () => {
    expect(mapBar({ done: 3, failed: 0, running: 2, total: 12 })).toEqual({
      fraction: 0.25,
      message: '3 of 12 done · 2 running',
    });
    expect(mapBar({ done: 0, failed: 0, running: 0, total: 0 }).fraction).toBe(1);
  });
});

describe('itemsPage', () => {
  it('pages the items by the page size, the last page holding the rest', () => {
    expect(ITEMS_PAGE_SIZE).toBe(20);
    expect(itemsPage(45, 0)).toEqual({ indices: [...Array(20).keys()], page: 0, lastPage: 2 });
    expect(itemsPage(45, 2)).toEqual({ indices: [40, 41, 42, 43, 44], page: 2, lastPage: 2 });
  });

  it('keeps a page asked for past either end within the list, and has one empty page of none', () => {
    expect(itemsPage(45, 9).page).toBe(2);
    expect(itemsPage(45, -1).page).toBe(0);
    expect(itemsPage(0, 0)).toEqual({ indices: [], page: 0, lastPage: 0 });
  });
});
