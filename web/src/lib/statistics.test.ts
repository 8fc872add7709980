import { describe, expect, it } from 'vitest';
import type { ModelInfo } from './api';
import { STATISTICS_CATALOGUE } from './statistics-catalogue.fixture';
import { csvStatKeys, showStat, statConstant, statConstants, statInfo } from './statistics';

const model = { statistics_catalogue: STATISTICS_CATALOGUE } as Pick<ModelInfo, 'statistics_catalogue'>;

describe('the catalogue of statistics', () => {
  it('gives the CSV the columns it always had: every mean, in the schema order', () => {
    expect(csvStatKeys(STATISTICS_CATALOGUE)).toEqual([
      'entropy_bits',
      'entropy_norm',
      'sparsity',
      'keys_90',
      'keys_90_share',
      'max_attention',
      'avg_attention',
      'uniform_overlap',
      'mean_distance',
      'mean_offset',
      'self_mass',
      'prev_mass',
      'next_mass',
      'local_mass',
      'first_mass',
      'special_mass',
      'end_special_mass',
      'sink_mass',
      'sink_mass_norm',
      'punct_mass',
      'content_mass',
      'duplicate_mass',
    ]);
  });

  it('labels and explains a statistic with the constants of its formula', () => {
    expect(statInfo(model, 'sparsity').label).toBe('Sparsity');
    expect(statInfo(model, 'sparsity').help).toMatch(/threshold: 10 % .* under 0\.1 \/ n/);
    expect(statInfo(model, 'local_mass').label).toBe('Within ±3 positions (not itself)');
    expect(statConstant(model, 'cover_mass')).toBe(0.9);
    expect(statConstant(model, 'nothing')).toBeUndefined();
    expect(statConstants(STATISTICS_CATALOGUE)).toEqual({
      sparsity_fraction: 0.1,
      cover_mass: 0.9,
      local_window: 3,
      max_offset: 8,
    });
  });

  it('falls back to the key when the catalogue lacks a statistic', () => {
    const bare = statInfo({ statistics_catalogue: [] }, 'prev_mass');
    expect([bare.label, bare.help]).toEqual(['prev_mass', '']);
  });

  it('shows a value as its unit reads', () => {
    expect(showStat(statInfo(model, 'prev_mass'), 0.1234)).toBe('12.3 %');
    expect(showStat(statInfo(model, 'mean_distance'), 1.234)).toBe('1.23');
    expect(showStat(statInfo(model, 'keys_90'), 2.25)).toBe('2.3');
    expect(showStat(statInfo(model, 'prev_mass'), null)).toBe('–');
  });
});
