import { describe, expect, it } from 'vitest';
import { DEFAULT_STATE, stateFromQuery, stateToQuery } from '../lib/state';
import { VIEW_IDS, VIEWS } from './index';

const shape = { n_layer: 6, n_head: 12 };

describe('the view registry', () => {
  it('opens with the four tabs of the explorer in their order (a new view may follow them)', () => {
    expect(VIEWS.slice(0, 4).map((v) => [v.id, v.label])).toEqual([
      ['layer', 'Layer heads'],
      ['model', 'Model overview'],
      ['lines', 'Head lines'],
      ['compare', 'Compare heads'],
    ]);
    expect(VIEW_IDS).toEqual(VIEWS.map((v) => v.id));
  });

  it('gives every view a unique URL-safe id and a unique tab label', () => {
    expect(new Set(VIEW_IDS).size).toBe(VIEWS.length);
    expect(new Set(VIEWS.map((v) => v.label)).size).toBe(VIEWS.length);
    for (const v of VIEWS) {
      expect(v.id).toMatch(/^[a-z][a-z-]*$/);
      expect(encodeURIComponent(v.id)).toBe(v.id);
      expect(v.label.trim()).not.toBe('');
      expect(typeof v.create).toBe('function');
    }
  });

  it('has a digit shortcut (1–9) for every view', () => {
    expect(VIEWS.length).toBeGreaterThan(0);
    expect(VIEWS.length).toBeLessThanOrEqual(9);
  });

  it('lets every view work on a long text whose maps were streamed (none goes dark)', () => {
    expect(VIEWS.filter((v) => !v.streamed).map((v) => v.id)).toEqual([]);
  });

  it('registers the view a bare URL opens', () => {
    expect(VIEW_IDS).toContain(DEFAULT_STATE.view);
    expect(stateFromQuery('', shape, VIEW_IDS).view).toBe(DEFAULT_STATE.view);
  });

  it('restores every registered view from the URL, and no other', () => {
    for (const id of VIEW_IDS) {
      const query = stateToQuery({ ...DEFAULT_STATE, view: id });
      expect(stateFromQuery(query, shape, VIEW_IDS).view).toBe(id);
    }
    expect(stateFromQuery('view=nope', shape, VIEW_IDS).view).toBe(DEFAULT_STATE.view);
  });
});
