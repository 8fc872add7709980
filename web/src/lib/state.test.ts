import { describe, expect, it } from 'vitest';
import { compareNext, DEFAULT_STATE, enterCompare, stateFromQuery, stateToQuery, type ViewState } from './state';

const shape = { n_layer: 6, n_head: 12 };
const views = ['layer', 'model', 'lines', 'compare'];

describe('view state in the URL', () => {
  it('round-trips every field', () => {
    const s: ViewState = {
      text: 'Ada wrote the program, & then "again"?',
      view: 'compare',
      layer: 4,
      head: 11,
      level: 'word',
      hideSpecial: true,
      scale: 'log',
      token: 7,
      compareA: { layer: 2, head: 3 },
      compareB: { layer: 5, head: 0 },
      lock: 3,
      maps: 'rollout',
      path: null,
    };
    expect(stateFromQuery('?' + stateToQuery(s), shape, views)).toEqual(s);
  });

  it('carries a path to trace into the Patching view only, sender before receiver', () => {
    const path = { sender: { layer: 1, head: 8 }, receiver: { layer: 4, head: 11 }, input: 'k' as const };
    const patching = { ...DEFAULT_STATE, view: 'patching', path };
    const q = stateToQuery(patching);
    expect(q).toContain('path=1.8%2C4.11%2Ck');
    expect(stateFromQuery(q, shape, [...views, 'patching']).path).toEqual(path);
    expect(stateToQuery({ ...patching, view: 'layer' })).not.toContain('path=');
    for (const bad of ['4.11,1.8,k', '1.8,1.9,q', '1.8,4.12,v', '1.8,4.11,o', '1.8,4.11'])
      expect(stateFromQuery(`view=patching&path=${bad}`, shape, ['patching']).path).toBeNull();
  });

  it('keeps URLs short by leaving defaults out', () => {
    expect(stateToQuery(DEFAULT_STATE)).toBe('layer=0&head=0');
  });

  it('falls back to defaults on malformed or out-of-range values', () => {
    const s = stateFromQuery(
      'layer=9&head=-1&view=nope&scale=cubic&level=letters&token=x&a=7.1&b=1.99&lock=abc&maps=gradients',
      shape,
      views,
    );
    expect(s.layer).toBe(DEFAULT_STATE.layer);
    expect(s.head).toBe(DEFAULT_STATE.head);
    expect(s.view).toBe('layer');
    expect(s.scale).toBe('linear');
    expect(s.level).toBe('token');
    expect(s.token).toBe(DEFAULT_STATE.token);
    expect(s.compareA).toEqual(DEFAULT_STATE.compareA);
    expect(s.compareB).toEqual({ layer: 0, head: 1 });
    expect(s.lock).toBe(-1);
    expect(s.maps).toBe('weights');
  });

  it('treats a blank text as the default sentence', () => {
    expect(stateFromQuery('text=%20%20', shape, views).text).toBe(DEFAULT_STATE.text);
  });
});

describe('long texts and the URL', () => {
  it('a text too long for a request line stays out of the URL; the rest of the state stays', () => {
    const long = 'word '.repeat(2000);
    const q = stateToQuery({ ...DEFAULT_STATE, text: long, layer: 3, head: 2 });
    expect(q).not.toContain('text=');
    expect(q.length).toBeLessThan(100);
    const back = stateFromQuery(q, { n_layer: 6, n_head: 12 }, ['layer']);
    expect(back.layer).toBe(3);
    expect(back.head).toBe(2);
    expect(stateToQuery({ ...DEFAULT_STATE, text: 'short one' })).toContain('text=short+one');
  });
});

describe('Compare starts from the selected head', () => {
  it('defaults A to the selected head and B to the next one', () => {
    const s = stateFromQuery('?layer=2&head=5&view=compare', shape, ['layer', 'compare']);
    expect(s.compareA).toEqual({ layer: 2, head: 5 });
    expect(s.compareB).toEqual({ layer: 2, head: 6 });
    expect(compareNext({ layer: 2, head: 11 }, shape)).toEqual({ layer: 3, head: 0 });
    expect(compareNext({ layer: 5, head: 11 }, shape)).toEqual({ layer: 0, head: 0 });
  });
  it('entering Compare puts the selected head in A unless it is already A or B', () => {
    const s = stateFromQuery('?layer=1&head=3&a=0.0&b=0.1&view=compare', shape, ['layer', 'compare']);
    expect(enterCompare(s, shape)).toEqual({ compareA: { layer: 1, head: 3 }, compareB: { layer: 1, head: 4 } });
    const kept = { ...s, layer: 0, head: 1 };
    expect(enterCompare(kept, shape)).toEqual({ compareA: s.compareA, compareB: s.compareB });
  });
});
