import { describe, expect, it } from 'vitest';
import { mapHead, parseMapView, shownMapView } from './maps';

describe('map views', () => {
  it('falls back to the weights with the reason when the run cannot show a view', () => {
    expect(shownMapView('norm', { weights: null, norm: null, rollout: 'too long' })).toEqual({
      view: 'norm',
      reason: null,
    });
    expect(shownMapView('rollout', { weights: null, norm: null, rollout: 'too long' })).toEqual({
      view: 'weights',
      reason: 'too long',
    });
    expect(shownMapView('rollout', undefined)).toEqual({ view: 'rollout', reason: null });
  });
  it('reads rollout as one map per layer', () => {
    expect(mapHead('rollout', 7)).toBe(0);
    expect(mapHead('norm', 7)).toBe(7);
  });
  it('parses only the three names', () => {
    expect(parseMapView('norm')).toBe('norm');
    expect(parseMapView('rollout')).toBe('rollout');
    expect(parseMapView('Norm')).toBe('weights');
    expect(parseMapView(null)).toBe('weights');
  });
});
