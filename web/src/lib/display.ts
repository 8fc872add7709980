// What a heatmap shows: a head's matrix over the units of the chosen level, with special
// tokens dropped (and the rows renormalised) when the user hides them.

import { unitMask, type UnitMask } from './heatmap';
import { keepAndRenormalise, type Matrix } from './matrix';
import { keepMask, type Units } from './units';

export interface ShownMatrix {
  matrix: Matrix;
  /** Unit index of every shown row/column. */
  index: number[];
  labels: string[];
}

export function shownMatrix(m: Matrix, units: Units, hideSpecial: boolean): ShownMatrix {
  if (m.n !== units.labels.length)
    throw new Error(`matrix is ${m.n}×${m.n} but there are ${units.labels.length} ${units.level}s`);
  if (!hideSpecial || !units.special.some(Boolean)) {
    return { matrix: m, index: units.labels.map((_, i) => i), labels: units.labels };
  }
  const { matrix, index } = keepAndRenormalise(m, keepMask(units, true));
  return { matrix, index, labels: index.map((i) => units.labels[i]) };
}

/** The model's sliding window at `layer` (0: none, and for models without windows). Given the
 *  text's length, 0 also when the window covers the whole text (it hides nothing there). */
export function layerWindow(model: { window?: number[] }, layer: number, nTokens = Infinity): number {
  const w = model.window?.[layer] ?? 0;
  return w > 0 && nTokens > w ? w : 0;
}

/** The masked cells of a shown matrix: future units of a causal model and, at a sliding-window
 *  layer, units wholly outside the window (each shown row covers its unit's tokens). */
export function shownMask(shown: ShownMatrix, units: Units, causal: boolean, window: number): UnitMask | undefined {
  const span = (u: number): [number, number] => {
    const ts = units.tokens[shown.index[u]];
    return [ts[0], ts[ts.length - 1]];
  };
  return unitMask(causal, window, span);
}
