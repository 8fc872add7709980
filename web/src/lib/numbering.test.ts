import { describe, expect, it } from 'vitest';
import { headName, headShort, headTag, headWithIndex, layerName, layerWithIndex } from './numbering';

describe('head and layer numbering', () => {
  it('counts from 1 and names the 0-based index where both appear', () => {
    expect(headName(0)).toBe('Head 1');
    expect(layerName(3)).toBe('Layer 4');
    expect(headWithIndex(0)).toBe('Head 1 (index 0)');
    expect(layerWithIndex(11)).toBe('Layer 12 (index 11)');
    expect(headTag(2, 8)).toBe('L3 H9');
    expect(headShort(11)).toBe('H12');
  });
});
