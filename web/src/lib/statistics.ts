// The catalogue of per-head statistics as the page reads it: GET /api/model's
// statistics_catalogue (or the embedded payload's), written by the core (headscope/analysis.h,
// StatInfo). Labels, help texts, the constants quoted in notes and the CSV's columns come from
// here, so that the page never words a statistic or a constant itself.

import type { HeadStats, ModelInfo, StatInfo } from './api';
import { fixed, percent } from './format';

/** The entry of `key`; a bare one (its key as label, no help) when the catalogue lacks it. */
export function statInfo(model: Pick<ModelInfo, 'statistics_catalogue'>, key: keyof HeadStats): StatInfo {
  return (
    model.statistics_catalogue.find((s) => s.key === key) ?? {
      key,
      kind: 'mean',
      label: key,
      unit: '',
      help: '',
      constants: {},
    }
  );
}

/** A constant of the formulas by name ("cover_mass"), from whichever entry uses it. */
export function statConstant(model: Pick<ModelInfo, 'statistics_catalogue'>, name: string): number | undefined {
  for (const s of model.statistics_catalogue) if (name in s.constants) return s.constants[name];
  return undefined;
}

/** Every constant the catalogue names, as GET /api/model's `statistics` object holds them. */
export function statConstants(catalogue: readonly StatInfo[]): Record<string, number> {
  return Object.assign({}, ...catalogue.map((s) => s.constants)) as Record<string, number>;
}

/** The columns of the CSV export: every per-query mean, in catalogue order (the counts and the
 *  per-offset object are left out). */
export function csvStatKeys(catalogue: readonly StatInfo[]): (keyof HeadStats)[] {
  return catalogue.filter((s) => s.kind === 'mean').map((s) => s.key);
}

/** A value as its unit reads: shares as percentages, everything else as a plain number. */
export function showStat(info: StatInfo, v: number | null): string {
  return info.unit === 'share' ? percent(v, 1) : fixed(v, info.unit === 'keys' ? 1 : 2);
}
