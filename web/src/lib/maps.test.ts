import { describe, expect, it } from 'vitest';
import { mapHead, mapsReasonText, parseMapView, shownMapView } from './maps';

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

describe('mapsReasonText', () => {
  it('tells the server’s two reasons in plain words, with the way out', () => {
    const rollout = mapsReasonText(
      'rollout',
      "the rollout view multiplies every layer's T x T map (n_layer · T³): this text's 1500 tokens are over the limit of 1024; analyse a shorter text",
    );
    expect(rollout).toBe(
      'Rollout multiplies the maps of every layer, which this page does for texts of up to 1,024 tokens; this text (1,500 tokens) is longer. Analyse a shorter text to see it',
    );
    const streamed = mapsReasonText(
      'norm',
      "the norm-weighted view needs the whole attention maps, and this text's 8192 tokens were streamed (dense maps are kept up to 256 MiB): analyse a shorter text",
    );
    expect(streamed).toContain('this text (8,192 tokens) is too long to keep them all');
    expect(streamed).not.toMatch(/MiB|T³|T x T/);
    // The way out that works on a long text: the head panel's exact tiles, norm-weighted.
    expect(streamed).toContain('press Norm-weighted');
    const rolloutStreamed = mapsReasonText(
      'rollout',
      "the rollout view needs ... this text's 8192 tokens were streamed",
    );
    expect(rolloutStreamed).not.toContain('Norm-weighted');
  });
});
