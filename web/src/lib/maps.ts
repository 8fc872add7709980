// Which quantity the attention maps show (the "Maps" toggle; docs/explorer.md "Views"):
// the attention weights; norm-weighted maps, α_qk · ‖v_k W_O,hᵀ‖ with each row renormalised to sum 1
// (Kobayashi et al. 2020: the share of what a query's output moved that came from each key); or the
// attention rollout up to the layer, residual included (Abnar & Zuidema 2020), one map per layer.

export type MapView = 'weights' | 'norm' | 'rollout';
export const MAP_VIEWS: readonly MapView[] = ['weights', 'norm', 'rollout'];

/** The toggle's button text. */
export const MAP_LABELS: Record<MapView, string> = { weights: 'Weights', norm: 'Norm-weighted', rollout: 'Rollout' };

/** What one value of the map is, for tooltips ("weight 0.1234") and legends. */
export const MAP_QUANTITY: Record<MapView, string> = {
  weights: 'weight',
  norm: 'norm-weighted share',
  rollout: 'rollout share',
};

/** One line under the toggle saying what the chosen maps are. */
export const MAP_EXPLANATION: Record<MapView, string> = {
  weights: 'Attention weights α: how much each query looks at each key.',
  norm: 'Norm-weighted: α · ‖v W_O‖ per key, each row rescaled to sum 1 — the share of what the head moves into the query that comes from each key.',
  rollout:
    'Rollout: how much of this layer’s output at each query traces back to each input token, through every head and the residual of all layers so far (one map per layer).',
};

/** Why each view is unavailable for a run (/api/run "views"), null where it is available. */
export type MapAvailability = Partial<Record<MapView, string | null>>;

/** The view actually drawn: the one asked for, or the weights (with the reason) when the run
 *  cannot show it (streamed maps; rollout past its token limit). */
export function shownMapView(
  asked: MapView,
  available: MapAvailability | undefined,
): { view: MapView; reason: string | null } {
  const reason = available?.[asked] ?? null;
  return reason ? { view: 'weights', reason } : { view: asked, reason: null };
}

/** The head index inside a fetched [layers, heads, U, U] tensor: rollout has one map per layer. */
export function mapHead(view: MapView, head: number): number {
  return view === 'rollout' ? 0 : head;
}

/** Parses `maps=` from the URL; anything else is the weights. */
export function parseMapView(raw: string | null): MapView {
  return raw !== null && (MAP_VIEWS as readonly string[]).includes(raw) ? (raw as MapView) : 'weights';
}

/** Why a map view is unavailable, in words, with what to do. The server's reason (/api/run
 *  "views", pipeline/explore.cc view_unavailable) speaks of T × T maps, n_layer · T³ and MiB;
 *  the two cases it knows are told here in the reader's terms, anything else is kept. */
export function mapsReasonText(view: MapView, reason: string): string {
  const tokens = /this text's (\d+) tokens/.exec(reason)?.[1];
  const text = tokens ? `this text (${Number(tokens).toLocaleString('en')} tokens)` : 'this text';
  if (/streamed/.test(reason))
    return `${MAP_LABELS[view]} maps need every full attention map, and ${text} is too long to keep them all (its maps were summarised as they were computed). Analyse a shorter text to see them${view === 'norm' ? ', or zoom into the head panel’s map and press Norm-weighted for the exact shares of the region on screen' : ''}`;
  const limit = /over the limit of (\d+)/.exec(reason)?.[1];
  if (view === 'rollout' && limit)
    return `Rollout multiplies the maps of every layer, which this page does for texts of up to ${Number(limit).toLocaleString('en')} tokens; ${text} is longer. Analyse a shorter text to see it`;
  return reason.replace(/\s*\(?limits::\w+\)?/g, '');
}
