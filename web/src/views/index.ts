// The explorer's tab views, in tab order: the one place a view is registered. For each entry the
// app makes a tab (data-view = id), a keyboard shortcut (1–9 in this order), a slot in #views, and
// accepts its id in the URL (view=…). The view a bare URL opens is DEFAULT_STATE.view (lib/state.ts).
// A new view: a folder views/<name>/ whose index.ts exports its ViewDefinition, and one line here.

import type { ViewDefinition } from './context';
import { compareView } from './compare';
import { compositionView } from './composition';
import { headMapView } from './headmap';
import { layerView } from './layer';
import { lensView } from './lens';
import { linesView } from './lines';
import { modelView } from './model';
import { patchingView } from './patching';
import { twoModelsView } from './twomodels';

export const VIEWS: readonly ViewDefinition[] = [
  layerView,
  modelView,
  linesView,
  compareView,
  patchingView,
  lensView,
  compositionView,
  headMapView,
  twoModelsView,
];

/** The registered ids, which the URL may name. */
export const VIEW_IDS: readonly string[] = VIEWS.map((v) => v.id);
