// What a heatmap shows: a head's matrix over the units of the chosen level, with special
// tokens dropped (and the rows renormalised) when the user hides them.

import { keepAndRenormalise, type Matrix } from './matrix';
import { keepMask, type Units } from './units';

export interface ShownMatrix {
  matrix: Matrix;
  /** Unit index of every shown row/column. */
  index: number[];
  labels: string[];
}

export function shownMatrix(m: Matrix, units: Units, hideSpecial: boolean): ShownMatrix {
  if (m.n !== units.labels.length) throw new Error(`matrix is ${m.n}×${m.n} but there are ${units.labels.length} ${units.level}s`);
  if (!hideSpecial || !units.special.some(Boolean)) {
    return { matrix: m, index: units.labels.map((_, i) => i), labels: units.labels };
  }
  const { matrix, index } = keepAndRenormalise(m, keepMask(units, true));
  return { matrix, index, labels: index.map((i) => units.labels[i]) };
}
